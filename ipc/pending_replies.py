"""Requests waiting for their reply, matched by id: the one such bookkeeping for every requester.

A client on control.sock and a worker on workers.sock both send requests and read replies on a
separate reader task; this is what sits between the two. A request gets a fresh id and a future; the
reader hands every reply to `resolve`; the requester awaits `AwaitedReply.get`, which is where an error
reply becomes `RemoteError` and a reply of the wrong kind `MalformedMessage`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Iterator
from typing import TypeVar

from .errors import MalformedMessage, RemoteError, RequestTimeout
from .messages import ErrorReply
from .records import Message

__all__ = ["AwaitedReply", "PendingReplies"]

R = TypeVar("R", bound=Message)


class AwaitedReply:
    """The reply slot of one request in flight."""

    def __init__(self, request_id: int, request: Message, future: asyncio.Future[Message]) -> None:
        self.id = request_id
        self.request = request
        self._future = future

    async def get(self, expect: type[R], *, timeout: float | None = None) -> R:
        """The reply, once it came, as `expect`; an error reply raises `RemoteError`.

        Without `timeout` this waits until the reply, `PendingReplies.fail_all` or `cancel_all`.
        """
        try:
            async with asyncio.timeout(timeout):
                reply = await self._future
        except TimeoutError:
            raise RequestTimeout(
                f"yagentd did not answer the {self.request.kind} request within {timeout:.0f}s") from None
        return _checked(reply, expect, self.request)


class PendingReplies:
    """Ids handed out to requests, and the futures their replies resolve."""

    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[Message]] = {}

    def __len__(self) -> int:
        return len(self._waiting)

    @contextlib.contextmanager
    def expect(self, request: Message) -> Iterator[AwaitedReply]:
        """Give `request` a fresh id (set on it) and a reply slot for the duration of the block.

        Leaving the block withdraws the slot, however it is left: a request cancelled, timed out or failed
        while waiting leaves nothing behind, and a late reply to it is ignored.
        """
        req_id = next(self._ids)
        request.id = req_id  # type: ignore[attr-defined]
        future: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        self._waiting[req_id] = future
        try:
            yield AwaitedReply(req_id, request, future)
        finally:
            del self._waiting[req_id]

    def resolve(self, reply: Message) -> bool:
        """Hand `reply` to the request with its id; False when no request waits for it."""
        future = self._waiting.get(getattr(reply, "id", None))  # type: ignore[arg-type]
        if future is None or future.done():
            return False
        future.set_result(reply)
        return True

    def fail_all(self, exc: BaseException) -> None:
        """Every waiting request raises `exc` (the peer is gone)."""
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(exc)

    def cancel_all(self) -> None:
        """Every waiting request is cancelled (the connection is closing)."""
        for future in self._waiting.values():
            if not future.done():
                future.cancel()


def _checked(reply: Message, expect: type[R], request: Message) -> R:
    # The one place an error reply becomes an exception and a reply of the wrong kind a protocol error.
    if isinstance(reply, ErrorReply):
        raise RemoteError(reply.code, reply.message)
    if not isinstance(reply, expect):
        raise MalformedMessage(f"expected {expect.kind} in reply to {request.kind}, got {reply.kind}")
    return reply
