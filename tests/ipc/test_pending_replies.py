"""`PendingReplies`, the request/reply matching both the client and the worker channel use."""

from __future__ import annotations

import asyncio

import pytest

from yagent.ipc.errors import MalformedMessage, RemoteError, RequestTimeout
from yagent.ipc.messages import Ack, ErrorReply, LeaseGrant, LeaseRequest, StatusRequest
from yagent.ipc.pending_replies import PendingReplies


def test_replies_reach_their_own_request_whatever_the_order() -> None:
    async def main() -> None:
        pending = PendingReplies()
        first, second = LeaseRequest(id=0), StatusRequest(id=0)
        with pending.expect(first) as a, pending.expect(second) as b:
            assert (a.id, b.id) == (first.id, second.id) and first.id != second.id  # set on the request
            assert len(pending) == 2
            assert pending.resolve(Ack(id=second.id, task="b"))
            assert pending.resolve(LeaseGrant(id=first.id))
            assert await a.get(LeaseGrant) == LeaseGrant(id=first.id)
            assert (await b.get(Ack)).task == "b"
        assert len(pending) == 0

    asyncio.run(main())


def test_an_error_reply_and_a_reply_of_the_wrong_kind_raise() -> None:
    async def main() -> None:
        pending = PendingReplies()
        refused, odd = StatusRequest(id=0), LeaseRequest(id=0)
        with pending.expect(refused) as a, pending.expect(odd) as b:
            pending.resolve(ErrorReply(id=refused.id, code="busy", message="too many requests; retry later"))
            pending.resolve(Ack(id=odd.id))
            with pytest.raises(RemoteError, match="too many requests") as remote:
                await a.get(Ack)
            assert remote.value.code == "busy"
            with pytest.raises(MalformedMessage, match="expected lease_grant in reply to lease_request, got ack"):
                await b.get(LeaseGrant)

    asyncio.run(main())


def test_a_request_cancelled_while_waiting_is_withdrawn_and_its_late_reply_ignored() -> None:
    async def main() -> None:
        pending = PendingReplies()
        request = LeaseRequest(id=0)
        waiting = asyncio.Event()

        async def ask() -> LeaseGrant:
            with pending.expect(request) as reply:
                waiting.set()
                return await reply.get(LeaseGrant)

        task = asyncio.create_task(ask())
        await asyncio.wait_for(waiting.wait(), 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert len(pending) == 0
        assert not pending.resolve(LeaseGrant(id=request.id))

    asyncio.run(main())


def test_a_request_that_fails_before_waiting_or_times_out_is_withdrawn() -> None:
    async def main() -> None:
        pending = PendingReplies()
        with pytest.raises(ValueError), pending.expect(LeaseRequest(id=0)):
            raise ValueError("cannot encode it")
        assert len(pending) == 0
        request = StatusRequest(id=0)
        with pytest.raises(RequestTimeout, match="did not answer the status request within 0s"), \
                pending.expect(request) as reply:
            await reply.get(Ack, timeout=0.01)
        assert len(pending) == 0 and not pending.resolve(Ack(id=request.id))

    asyncio.run(main())


def test_unknown_ids_and_replies_without_an_id_are_not_matched() -> None:
    async def main() -> None:
        pending = PendingReplies()
        request = LeaseRequest(id=0)
        with pending.expect(request) as reply:
            assert not pending.resolve(LeaseGrant(id=request.id + 1))
            assert not pending.resolve(ErrorReply(id=0, code="x", message="y"))
            assert pending.resolve(LeaseGrant(id=request.id))
            assert not pending.resolve(LeaseGrant(id=request.id))  # a duplicate does not overwrite the first
            assert await reply.get(LeaseGrant) == LeaseGrant(id=request.id)

    asyncio.run(main())


def test_fail_all_raises_in_every_waiter_and_cancel_all_cancels_them() -> None:
    class Gone(Exception):
        pass

    async def wait_all(pending: PendingReplies, n: int) -> list[asyncio.Task[LeaseGrant]]:
        ready = asyncio.Event()

        async def one() -> LeaseGrant:
            with pending.expect(LeaseRequest(id=0)) as reply:
                if len(pending) == n:
                    ready.set()
                return await reply.get(LeaseGrant)

        tasks = [asyncio.create_task(one()) for _ in range(n)]
        await asyncio.wait_for(ready.wait(), 5)
        return tasks

    async def main() -> None:
        failing = PendingReplies()
        tasks = await wait_all(failing, 3)
        failing.fail_all(Gone("the daemon is gone"))
        results = await asyncio.gather(*tasks, return_exceptions=True)
        assert [type(r) for r in results] == [Gone, Gone, Gone]
        assert len(failing) == 0

        closing = PendingReplies()
        tasks = await wait_all(closing, 2)
        closing.cancel_all()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        assert [type(r) for r in results] == [asyncio.CancelledError, asyncio.CancelledError]
        assert len(closing) == 0

    asyncio.run(main())
