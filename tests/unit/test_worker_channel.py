"""The worker side of the daemon channel against a real ROUTER socket standing in for yagentd.

These pin the order-sensitive cases: control messages that arrive in the same read as the start message.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import zmq
import zmq.asyncio

from yagent.ipc.messages import ResultAck, RunControl, RunResult, RunSpec, StartRun, WorkerHello
from yagent.ipc.records import decode, encode
from yagent.ipc.vocabulary import ControlAction, StopReason
from yagent.workers import entry
from yagent.workers.channel import DaemonChannel
from yagent.workers.kinds import AgentOutcome, RunContext, agent_kind


@agent_kind("test-waits-forever")
async def _waits_forever(ctx: RunContext) -> AgentOutcome:
    await asyncio.Event().wait()
    return AgentOutcome(status="done", stop_reason="agent_exit")


def _spec(run: str, **kw) -> RunSpec:
    return RunSpec(run=run, task="t1", turn=1, project="p", project_root=os.getcwd(), agent="test-waits-forever",
                   input="x", home="/nonexistent", daemon_loss_timeout=30.0, **kw)


async def _router(tmp_path: Path) -> tuple[zmq.asyncio.Context, zmq.asyncio.Socket, str]:
    ctx = zmq.asyncio.Context()
    router = ctx.socket(zmq.ROUTER)
    endpoint = f"ipc://{tmp_path}/w.sock"
    router.bind(endpoint)
    return ctx, router, endpoint


async def _recv(router: zmq.asyncio.Socket, kind: type, deadline: float = 10.0):
    while True:
        identity, frame = await asyncio.wait_for(router.recv_multipart(), deadline)
        msg = decode(frame)
        if isinstance(msg, kind):
            return identity, msg


def test_a_continue_right_behind_a_paused_start_leaves_the_run_running(tmp_path: Path) -> None:
    async def main() -> None:
        ctx, router, endpoint = await _router(tmp_path)
        channel = DaemonChannel("r1", endpoint)
        opened = asyncio.create_task(channel.open(timeout=10))
        identity, _ = await _recv(router, WorkerHello)
        # Both frames are queued before the worker reads either, as when a user continues at once.
        await router.send_multipart([identity, encode(StartRun(spec=_spec("r1", paused=True)))])
        await router.send_multipart([identity, encode(RunControl(action=ControlAction.CONTINUE))])
        spec = await opened
        assert spec.paused
        await asyncio.wait_for(channel.pause_gate(), 5.0)  # would block forever if the pause won
        assert not channel.paused
        await channel.close()
        router.close(0)
        ctx.term()

    asyncio.run(main())


def test_a_cancel_that_arrives_with_the_start_message_stops_the_run(tmp_path: Path) -> None:
    async def main() -> RunResult:
        ctx, router, endpoint = await _router(tmp_path)
        served = asyncio.create_task(entry._serve("r2", endpoint))
        identity, _ = await _recv(router, WorkerHello)
        await router.send_multipart([identity, encode(StartRun(spec=_spec("r2")))])
        await router.send_multipart([identity, encode(RunControl(action=ControlAction.CANCEL, reason="cancelled"))])
        _, result = await _recv(router, RunResult)
        await router.send_multipart([identity, encode(ResultAck())])
        assert await asyncio.wait_for(served, 10.0) == entry.EXIT_OK
        router.close(0)
        ctx.term()
        return result

    result = asyncio.run(main())
    assert result.stop_reason == StopReason.CANCELLED.value
