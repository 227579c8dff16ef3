"""The worker side of the daemon channel against a real ROUTER socket standing in for yagentd.

These pin the order-sensitive cases: control messages that arrive in the same read as the start message.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
import zmq
import zmq.asyncio

from yagent.ipc.messages import (
    AskUser,
    CompactNow,
    DelegateRequest,
    DelegateResult,
    ErrorReply,
    EventBatch,
    Heartbeat,
    LeaseGrant,
    LeaseRecall,
    LeaseRelease,
    LeaseRequest,
    ListTasks,
    ResultAck,
    RunControl,
    RunOutcome,
    RunResult,
    RunSpec,
    StartRun,
    SubagentsReply,
    SubagentsRequest,
    WorkerHello,
)
from yagent.ipc.records import MAX_FRAME_BYTES, decode, encode
from yagent.ipc.vocabulary import ControlAction, ErrorCode, EventType, RunStatus, StopReason
from yagent.workers import entry
from yagent.workers.channel import BATCH_MAX, EVENT_HOLD_MAX, DaemonChannel
from yagent.workers.kinds import RunContext, agent_kind

CHUNK = EventType.AI_CHUNK.value  # as it comes off the wire: a plain str
T = TypeVar("T")


@agent_kind("test-waits-forever")
async def _waits_forever(ctx: RunContext) -> RunOutcome:
    await asyncio.Event().wait()
    return RunOutcome(status=RunStatus.DONE, stop_reason=StopReason.AGENT_EXIT)


def _spec(run: str, **kw) -> RunSpec:
    fields = {"agent": "test-waits-forever", "daemon_loss_timeout": 30.0, "project_root": os.getcwd(), **kw}
    return RunSpec(run=run, task="t1", turn=1, project="p", input="x", home="/nonexistent", **fields)


async def _router(tmp_path: Path) -> tuple[zmq.asyncio.Context, zmq.asyncio.Socket, str]:
    ctx = zmq.asyncio.Context()
    router = ctx.socket(zmq.ROUTER)
    endpoint = f"ipc://{tmp_path}/w.sock"
    router.bind(endpoint)
    return ctx, router, endpoint


@contextlib.asynccontextmanager
async def _started_channel(tmp_path: Path, run: str, **spec: Any) -> AsyncIterator[tuple[DaemonChannel, Any, bytes]]:
    """A channel opened and started by a fake daemon's ROUTER: (channel, router, the worker's identity)."""
    ctx, router, endpoint = await _router(tmp_path)
    channel = DaemonChannel(run, endpoint)
    opened = asyncio.create_task(channel.open(timeout=10))
    try:
        identity, _ = await _recv(router, WorkerHello)
        await router.send_multipart([identity, encode(StartRun(spec=_spec(run, **spec)))])
        await opened
        yield channel, router, identity
    finally:
        await channel.close()
        router.close(0)
        ctx.term()


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
    assert result.outcome.stop_reason == StopReason.CANCELLED.value


# -- what the worker sends must reach the daemon, whatever an agent hands it ----------------------------


@agent_kind("test-emits-awkward-data")
async def _emits_awkward_data(ctx: RunContext) -> RunOutcome:
    ctx.emit("note", {"n": 1})
    ctx.emit("note", {"set": {3}, "path": Path("/x"), "name": "caf\udce9", "keys": {1: "one"}, "huge": 2**70})
    ctx.emit("note", {"n": 2, "blob": "x" * (MAX_FRAME_BYTES + 10)})
    ctx.emit("note", {"n": 3})
    return RunOutcome(status=RunStatus.DONE, stop_reason=StopReason.AGENT_EXIT, output="ok")


@agent_kind("test-returns-a-huge-result")
async def _returns_a_huge_result(ctx: RunContext) -> RunOutcome:
    return RunOutcome(status=RunStatus.DONE, stop_reason=StopReason.AGENT_EXIT, output="y" * (MAX_FRAME_BYTES + 10),
                        data={"files": {Path("/a")}})


async def _serve_until_result(tmp_path: Path, run: str, agent: str) -> tuple[list[list], RunResult, int]:
    """Drive one worker through start → result against a fake daemon; return its events and result."""
    ctx, router, endpoint = await _router(tmp_path)
    served = asyncio.create_task(entry._serve(run, endpoint))
    identity, _ = await _recv(router, WorkerHello)
    await router.send_multipart([identity, encode(StartRun(spec=_spec(run, agent=agent)))])
    events: list[list] = []
    while True:
        done, _ = await asyncio.wait({served, asyncio.ensure_future(router.recv_multipart())},
                                     timeout=10.0, return_when=asyncio.FIRST_COMPLETED)
        assert done, "the worker neither sent a result nor exited"
        fut = done.pop()
        if fut is served:
            raise AssertionError(f"the worker exited ({served.result()}) without sending its result")
        msg = decode(fut.result()[1])  # the daemon's own decoder: what it cannot read is lost
        if isinstance(msg, EventBatch):
            events.extend(msg.events)
        elif isinstance(msg, RunResult):
            break
    await router.send_multipart([identity, encode(ResultAck())])
    code = await asyncio.wait_for(served, 10.0)
    router.close(0)
    ctx.term()
    return events, msg, code


def test_events_msgpack_cannot_carry_or_too_big_for_a_frame_arrive_converted_and_cut(tmp_path: Path) -> None:
    events, result, code = asyncio.run(_serve_until_result(tmp_path, "r3", "test-emits-awkward-data"))
    assert (result.outcome.status, code) == ("done", entry.EXIT_OK)
    assert [e[0] for e in events] == ["note"] * 4
    assert events[0][2] == {"n": 1} and events[3][2] == {"n": 3}
    odd = events[1][2]
    assert odd["set"] == [3] and odd["path"] == "/x" and odd["name"] == "caf\ufffd"
    assert odd["keys"] == {"1": "one"} and odd["huge"] == str(2**70)
    cut = events[2][2]
    assert cut["n"] == 2 and len(cut["blob"]) < MAX_FRAME_BYTES // 2 and "frame cap" in cut["truncated"]


def test_a_result_too_big_for_a_frame_still_reaches_the_daemon_cut_and_saying_so(tmp_path: Path) -> None:
    _events, result, code = asyncio.run(_serve_until_result(tmp_path, "r4", "test-returns-a-huge-result"))
    assert (result.outcome.status, code) == ("done", entry.EXIT_OK)
    assert result.outcome.output.startswith("yyy") and len(result.outcome.output) < MAX_FRAME_BYTES // 2
    assert "frame cap" in result.outcome.data["truncated"]


# -- what a (third-party) agent kind returns that is not a valid outcome --------------------------------


class _OwnOutcome:
    """An agent module's own result class, the shape of the kind API before RunOutcome."""

    status = "done"
    output = "the answer, in the module's own class"
    error = ""


_BAD_RETURNS: dict[str, object] = {
    "status-string": "done",
    "none": None,
    "own-class": _OwnOutcome(),
    "unfinished-status": RunOutcome(status=RunStatus.RUNNING, stop_reason=StopReason.AGENT_EXIT, output="half"),
    "unknown-status": RunOutcome(status="finished", stop_reason=StopReason.AGENT_EXIT,  # type: ignore[arg-type]
                                 output="kept", handoff={"conclusion": "c", "status": "ok"}),
    "wrong-field-type": RunOutcome(status=RunStatus.DONE, stop_reason=StopReason.AGENT_EXIT,
                                   output="kept", steps="three"),  # type: ignore[arg-type]
}


def _returning(value: object) -> Any:
    async def kind(ctx: RunContext) -> Any:
        return value

    return kind


for _name, _value in _BAD_RETURNS.items():
    agent_kind(f"test-returns-{_name}")(_returning(_value))


@pytest.mark.parametrize(("name", "output", "says"), [
    ("status-string", "", "returned str 'done' instead of a RunOutcome"),
    ("none", "", "returned NoneType None instead of a RunOutcome"),
    ("own-class", "the answer, in the module's own class", "returned _OwnOutcome"),
    ("unfinished-status", "half", "returned status 'running', which does not end a run"),
    ("unknown-status", "kept", "RunOutcome.status: expected one of"),
    ("wrong-field-type", "kept", "RunOutcome.steps: expected int"),
])
def test_an_agent_kind_returning_no_valid_outcome_fails_its_run_saying_what_was_wrong(
        tmp_path: Path, name: str, output: str, says: str) -> None:
    agent = f"test-returns-{name}"
    _events, result, code = asyncio.run(_serve_until_result(tmp_path, f"r-{name}", agent))
    outcome = result.outcome
    assert code == entry.EXIT_OK  # the worker did not crash, and the daemon could read the result
    assert (outcome.status, outcome.stop_reason) == (RunStatus.FAILED, StopReason.UNACCOUNTED)
    assert says in outcome.error and repr(agent) in outcome.error
    assert outcome.output == output  # what could be read of the result is kept
    assert outcome.cpu_seconds > 0
    if name == "unknown-status":
        assert outcome.handoff == {"conclusion": "c", "status": "ok"}


# -- frames the worker and the client do not expect ----------------------------------------------------


def test_a_frame_over_the_cap_is_skipped_and_the_channel_keeps_listening(tmp_path: Path) -> None:
    async def main() -> None:
        async with _started_channel(tmp_path, "r5") as (channel, router, identity):
            cancelled = asyncio.Event()
            channel.on_cancel = lambda _reason: cancelled.set()
            # Under the socket's MAXMSGSIZE (so libzmq delivers it) but over the codec's cap.
            await router.send_multipart([identity, b"\x00" * (MAX_FRAME_BYTES + 10)])
            await router.send_multipart([identity, encode(RunControl(action=ControlAction.CANCEL,
                                                                     reason="cancelled"))])
            await asyncio.wait_for(cancelled.wait(), 10.0)  # times out when the oversized frame killed the reader
            assert channel.cancel_reason == "cancelled"
            assert channel._reader is not None and not channel._reader.done()

    asyncio.run(main())


def test_a_request_the_daemon_could_not_read_fails_at_once_saying_why(tmp_path: Path) -> None:
    async def main() -> str:
        async with _started_channel(tmp_path, "r6") as (channel, router, _identity):
            # msgpack cannot carry a set: sent as is, this request would never be answered.
            with pytest.raises(ValueError) as caught:
                await asyncio.wait_for(channel.ask_user("input", "x", options=[], default=None,
                                                        details={"tags": {"a", "b"}}), 5.0)
            assert not channel._pending
            # Maps with int keys are readable: the daemon's decoder gives them text keys.
            asking = asyncio.create_task(channel.ask_user("input", "y", options=[], default=None,
                                                          details={"by_line": {1: "a"}}))
            _, request = await _recv(router, AskUser)
            assert request.question.details == {"by_line": {"1": "a"}}
            asking.cancel()
        return str(caught.value)

    message = asyncio.run(main())
    assert "ask_user" in message and "yagentd" in message


# -- a worker whose daemon is gone -----------------------------------------------------------------------


@agent_kind("test-stuck-in-a-thread")
async def _stuck_in_a_thread(ctx: RunContext) -> RunOutcome:
    import threading

    await asyncio.to_thread(threading.Event().wait)  # a tool blocked for good (a read from a FIFO, say)
    return RunOutcome(status=RunStatus.DONE, stop_reason=StopReason.AGENT_EXIT)


def test_a_worker_whose_daemon_is_gone_exits_even_with_a_thread_stuck_in_a_tool(tmp_path: Path) -> None:
    import subprocess
    import sys

    async def main() -> int:
        ctx, router, endpoint = await _router(tmp_path)
        code = (f"from yagent.workers.entry import worker_main; "
                f"worker_main('r7', {endpoint!r}, ('tests.workers.test_worker_channel',))")
        proc = subprocess.Popen([sys.executable, "-c", code], cwd=os.getcwd())
        try:
            identity, _ = await _recv(router, WorkerHello)
            # The fake daemon starts the run, then falls silent: no pings, no acknowledgement.
            spec = _spec("r7", agent="test-stuck-in-a-thread", daemon_loss_timeout=0.5)
            await router.send_multipart([identity, encode(StartRun(spec=spec))])
            _, result = await _recv(router, RunResult, deadline=20.0)
            assert result.outcome.stop_reason == StopReason.INTERRUPTED.value
            return await asyncio.wait_for(asyncio.to_thread(proc.wait), 15.0)  # hangs without the fix
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            router.close(0)
            ctx.term()

    assert asyncio.run(main()) == entry.EXIT_DAEMON_LOST


@pytest.mark.parametrize("spec_in_hand", [False, True])
def test_a_daemon_that_dies_before_starting_the_run_is_noticed_at_once_through_the_runs_pipe(
        tmp_path: Path, spec_in_hand: bool) -> None:
    async def main() -> int:
        ctx, router, endpoint = await _router(tmp_path)
        liveness_r, liveness_w = os.pipe()
        # With its spec in hand (a warm worker's), the run is being built when the daemon dies.
        spec = _spec("r8", agent="test-marks-then-passes-the-gate") if spec_in_hand else None
        served = asyncio.create_task(entry._serve("r8", endpoint, liveness_fd=liveness_r, spec=spec))
        try:
            await _recv(router, WorkerHello)
            os.close(liveness_w)  # the daemon dies between the hello and the start: no StartRun ever comes
            async with asyncio.timeout(5.0):  # the start deadline is 30 s
                return await served
        finally:
            os.close(liveness_r)
            router.close(0)
            ctx.term()

    assert asyncio.run(main()) == entry.EXIT_DAEMON_LOST


@agent_kind("test-asks-then-writes-on-the-way-out")
async def _asks_then_writes(ctx: RunContext) -> RunOutcome:
    try:
        await ctx.ask_user("input", "anyone?", options=[], default=None, details={})
    except asyncio.CancelledError:
        ctx.emit("mark", {"name": "wrapping"})
        ctx.channel.flush()
        await asyncio.sleep(0.2)  # a memory write on the way out: a second cancellation would lose it
        (Path(ctx.spec.project_root) / "on-the-way-out").write_text("kept")
        raise
    return RunOutcome(status=RunStatus.DONE, stop_reason=StopReason.AGENT_EXIT)


@pytest.mark.parametrize("cancelled_first", [False, True])
def test_a_daemon_that_dies_mid_run_stops_it_once_and_its_last_writes_happen(
        tmp_path: Path, cancelled_first: bool) -> None:
    async def main() -> tuple[int, RunResult]:
        ctx, router, endpoint = await _router(tmp_path)
        liveness_r, liveness_w = os.pipe()
        served = asyncio.create_task(entry._serve("r9", endpoint, liveness_fd=liveness_r))
        try:
            identity, _ = await _recv(router, WorkerHello)
            spec = _spec("r9", agent="test-asks-then-writes-on-the-way-out", project_root=str(tmp_path))
            await router.send_multipart([identity, encode(StartRun(spec=spec))])
            await _recv(router, AskUser)
            if cancelled_first:  # the daemon cancels the run, then dies while the run writes what it must
                await router.send_multipart([identity, encode(RunControl(action=ControlAction.CANCEL,
                                                                         reason="cancelled"))])
                await _recv(router, EventBatch)
            os.close(liveness_w)
            # The result still goes out (nobody acknowledges it), and the worker does not wait for the loss timeout.
            _, result = await _recv(router, RunResult, deadline=5.0)
            async with asyncio.timeout(5.0):
                return await served, result
        finally:
            os.close(liveness_r)
            router.close(0)
            ctx.term()

    code, result = asyncio.run(main())
    assert code == entry.EXIT_DAEMON_LOST
    assert result.outcome.stop_reason == (StopReason.CANCELLED if cancelled_first else StopReason.INTERRUPTED).value
    assert (tmp_path / "on-the-way-out").read_text() == "kept"


# -- a channel whose handling of a message fails ----------------------------------------------------------


@agent_kind("test-breaks-its-cancel-hook")
async def _breaks_its_cancel_hook(ctx: RunContext) -> RunOutcome:
    def broken(_reason: str) -> None:
        raise RuntimeError("a cancel hook with a bug")

    ctx.channel.on_cancel = broken  # run by the reader when the daemon's cancel arrives
    await ctx.ask_user("input", "anyone?", options=[], default=None, details={})
    return RunOutcome(status=RunStatus.DONE, stop_reason=StopReason.AGENT_EXIT)


def test_a_message_whose_handling_raises_fails_the_run_at_once_and_bad_frames_never_stop_the_reader(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> tuple[int, RunResult]:
        ctx, router, endpoint = await _router(tmp_path)
        served = asyncio.create_task(entry._serve("r10", endpoint))
        try:
            identity, _ = await _recv(router, WorkerHello)
            spec = _spec("r10", agent="test-breaks-its-cancel-hook")
            await router.send_multipart([identity, encode(StartRun(spec=spec))])
            await _recv(router, AskUser)
            # Frames that are merely bad: garbage, a control-socket request, a reply nobody waits for.
            for frame in (b"\xc1garbage", encode(ListTasks(id=7)), encode(LeaseGrant(id=999))):
                await router.send_multipart([identity, frame])
            await router.send_multipart([identity, encode(RunControl(action=ControlAction.CANCEL, reason="cancelled"))])
            # At once, not after the 30 s loss timeout: the question waiting for a reply fails, the run reports.
            _, result = await _recv(router, RunResult, deadline=5.0)
            await router.send_multipart([identity, encode(ResultAck())])  # heard: the reader is still alive
            async with asyncio.timeout(5.0):
                return await served, result
        finally:
            router.close(0)
            ctx.term()

    with caplog.at_level("ERROR", logger="yagent.workers.channel"):
        code, result = asyncio.run(main())
    assert code == entry.EXIT_OK
    outcome = result.outcome
    assert (outcome.status, outcome.stop_reason) == (RunStatus.FAILED, StopReason.PANIC)
    assert "channel to yagentd failed: handling a run_control message" in outcome.error
    assert "RuntimeError: a cancel hook with a bug" in outcome.error
    logged = [r for r in caplog.records if "handling a run_control message" in r.getMessage()]
    assert logged and logged[0].exc_info is not None  # with the traceback


# -- events: at once when quiet, coalesced while busy ---------------------------------------------------


def _against_a_sync_router(tmp_path: Path, run: str, body: Callable[[DaemonChannel, zmq.Socket], Awaitable[T]]) -> T:
    """`body(channel, router)`'s result, for a channel of `run` connected to a synchronous ROUTER (it can be read
    while the worker's event loop is held); the channel is closed after, the router with it."""
    ctx = zmq.Context()
    router = ctx.socket(zmq.ROUTER)
    endpoint = f"ipc://{tmp_path}/quiet.sock"
    router.bind(endpoint)

    async def main() -> T:
        channel = DaemonChannel(run, endpoint)
        try:
            return await body(channel, router)
        finally:
            await channel.close()

    try:
        return asyncio.run(main())
    finally:
        router.close(0)
        ctx.term()


def _event_frames(router: zmq.Socket, events: int, deadline_ms: int = 10_000) -> list[list]:
    """Event batches read until `events` events came (each batch a list of events); fails at the deadline."""
    frames: list[list] = []
    while sum(len(f) for f in frames) < events:
        assert router.poll(deadline_ms), f"only {sum(len(f) for f in frames)} of {events} events arrived"
        msg = decode(router.recv_multipart()[1])
        assert isinstance(msg, EventBatch)
        frames.append(msg.events)
    return frames


def test_a_quiet_event_leaves_before_emit_returns_with_no_timer_in_between(tmp_path: Path) -> None:
    async def body(channel: DaemonChannel, router: zmq.Socket) -> list[list]:
        channel.emit(CHUNK, {"text": "one"})
        # The loop is held from here on: no callback or timer can run, so what arrives left inside emit.
        return _event_frames(router, 1)

    frames = _against_a_sync_router(tmp_path, "r-quiet", body)
    assert [[e[0], e[2]] for f in frames for e in f] == [[CHUNK, {"text": "one"}]]


def test_a_burst_is_coalesced_in_order_and_the_channel_is_quick_again_once_quiet(tmp_path: Path) -> None:
    async def body(channel: DaemonChannel, router: zmq.Socket) -> tuple[list[list], list[list]]:
        for i in range(100):  # one loop iteration: the first leaves at once, the rest wait for the next
            channel.emit(CHUNK, {"i": i})
        burst = await asyncio.to_thread(_event_frames, router, 100)
        channel.emit(CHUNK, {"i": 100})  # iterations have passed with nothing sent: quiet again
        return burst, _event_frames(router, 1)  # read with the loop held, as above

    burst, quiet = _against_a_sync_router(tmp_path, "r-burst", body)
    assert [len(f) for f in burst] == [1, 99]
    assert [e[2]["i"] for f in burst + quiet for e in f] == list(range(101))


def test_a_burst_past_the_batch_cap_goes_in_frames_of_at_most_the_cap(tmp_path: Path) -> None:
    total = 2 * BATCH_MAX + 10

    async def body(channel: DaemonChannel, router: zmq.Socket) -> list[list]:
        for i in range(total):
            channel.emit(CHUNK, {"i": i})
        return await asyncio.to_thread(_event_frames, router, total)

    frames = _against_a_sync_router(tmp_path, "r-cap", body)
    assert max(len(f) for f in frames) <= BATCH_MAX and len(frames) < total / 100
    assert [e[2]["i"] for f in frames for e in f] == list(range(total))


# -- events held on a run's way to its next message -------------------------------------------------------


def _messages(router: zmq.Socket, count: int, deadline_ms: int = 10_000) -> list:
    """The next `count` messages the worker sent, whatever they are, in the order they came."""
    got = []
    for _ in range(count):
        assert router.poll(deadline_ms), f"only {len(got)} of {count} messages arrived: {got}"
        got.append(decode(router.recv_multipart()[1]))
    return got


def test_held_events_wait_for_the_runs_next_message_and_leave_together(tmp_path: Path) -> None:
    async def body(channel: DaemonChannel, router: zmq.Socket) -> tuple[list, list]:
        channel.hold_events()
        for i in range(3):  # the first would leave at once on a quiet channel
            channel.emit(CHUNK, {"i": i})
        channel.heartbeat()  # a frame of its own, sent at once: events sent before it would come first
        # The loop is held: neither the hold's deadline nor a coalescing window can send anything meanwhile.
        before = _messages(router, 1)
        channel.flush()  # the run's next message goes out: what was held goes first, in one frame
        return before, _messages(router, 1)

    before, after = _against_a_sync_router(tmp_path, "r-held", body)
    assert [type(m) for m in before] == [Heartbeat]
    [batch] = after
    assert isinstance(batch, EventBatch) and [e[2]["i"] for e in batch.events] == [0, 1, 2]


def test_a_hold_ends_by_itself_at_its_deadline_and_the_channel_is_quick_again(tmp_path: Path) -> None:
    async def body(channel: DaemonChannel, router: zmq.Socket) -> tuple[list, list]:
        channel.hold_events()  # a run whose next message is long in coming (a tool that works for minutes)
        channel.emit(CHUNK, {"i": 0})
        channel.heartbeat()
        # The loop runs while the frames are awaited: nothing but the hold's own deadline sends the event.
        held = await asyncio.to_thread(_messages, router, 2, int(EVENT_HOLD_MAX * 1000) + 10_000)
        await asyncio.sleep(0)  # the window the deadline's send opened passes with nothing in it
        channel.emit(CHUNK, {"i": 1})  # quiet and no longer held: out before emit returns
        return held, _messages(router, 1)

    held, quick = _against_a_sync_router(tmp_path, "r-held-long", body)
    assert [type(m) for m in held] == [Heartbeat, EventBatch] and held[1].events[0][2] == {"i": 0}
    assert isinstance(quick[0], EventBatch) and quick[0].events[0][2] == {"i": 1}


def test_a_childs_result_holds_the_parents_events_until_its_next_message(tmp_path: Path) -> None:
    async def main() -> None:
        async with _started_channel(tmp_path, "r-resumes") as (channel, router, identity):
            delegation = asyncio.create_task(channel.run_child("chat", "look", "call-1", ""))
            _, request = await _recv(router, DelegateRequest)
            outcome = RunOutcome(status=RunStatus.DONE, stop_reason=StopReason.AGENT_EXIT, output="found")
            await router.send_multipart([identity, encode(DelegateResult(id=request.id, outcome=outcome))])
            assert (await delegation).output == "found"
            # The parent resumes on its way to its next model call: what it emits meanwhile waits for that call.
            channel.emit(EventType.TOOL_CALL_RESULT.value, {"call_id": "call-1"})
            channel.heartbeat()
            _, first = await asyncio.wait_for(router.recv_multipart(), 10.0)
            assert isinstance(decode(first), Heartbeat)
            channel.flush()
            _, batch = await _recv(router, EventBatch)
            assert [e[2] for e in batch.events] == [{"call_id": "call-1"}]

    asyncio.run(main())


async def _recv_lease_frames(router: zmq.asyncio.Socket, count: int) -> list:
    """The next `count` lease requests and releases the worker sent (other frames skipped)."""
    got: list = []
    while len(got) < count:
        _, frame = await asyncio.wait_for(router.recv_multipart(), 10.0)
        msg = decode(frame)
        if isinstance(msg, (LeaseRequest, LeaseRelease)):
            got.append(msg)
    return got


def test_a_lease_asked_for_ahead_is_taken_over_by_the_steps_call_and_no_second_one_is_asked(tmp_path: Path) -> None:
    async def main() -> None:
        async with _started_channel(tmp_path, "r-ahead") as (channel, router, identity):
            with channel.lease_ahead():
                # Out before anything awaits: the daemon's answer travels while the step makes its request.
                [asked] = await _recv_lease_frames(router, 1)
                assert isinstance(asked, LeaseRequest)
                await router.send_multipart([identity, encode(LeaseGrant(id=asked.id))])
                async with channel.hold():
                    channel.emit(CHUNK, {"text": "streaming"})  # a frame that is no lease, to be sure none is
                [released] = await _recv_lease_frames(router, 1)
            assert isinstance(released, LeaseRelease) and released.id == asked.id
            # The block's end gives nothing back twice, and the next call asks anew.
            async def call() -> None:
                async with channel.hold():
                    pass
            task = asyncio.create_task(call())
            [fresh] = await _recv_lease_frames(router, 1)
            assert isinstance(fresh, LeaseRequest) and fresh.id != asked.id
            await router.send_multipart([identity, encode(LeaseGrant(id=fresh.id))])
            await asyncio.wait_for(task, 10.0)

    asyncio.run(main())


def test_a_lease_asked_for_ahead_that_no_call_took_is_given_back_when_the_step_ends(tmp_path: Path) -> None:
    async def main() -> None:
        async with _started_channel(tmp_path, "r-unused") as (channel, router, _identity):
            with channel.lease_ahead():
                [asked] = await _recv_lease_frames(router, 1)
            [released] = await _recv_lease_frames(router, 1)
            assert isinstance(asked, LeaseRequest)
            assert isinstance(released, LeaseRelease) and released.id == asked.id

            # Given back also when the step is cancelled while its call waits for the slot ahead.
            async def step() -> None:
                with channel.lease_ahead():
                    async with channel.hold():
                        pass
            task = asyncio.create_task(step())
            [waited] = await _recv_lease_frames(router, 1)
            task.cancel()
            [back] = await _recv_lease_frames(router, 1)
            assert isinstance(back, LeaseRelease) and back.id == waited.id
            with pytest.raises(asyncio.CancelledError):
                await task

    asyncio.run(main())


def test_a_call_of_another_task_inside_the_block_asks_for_a_slot_of_its_own(tmp_path: Path) -> None:
    async def main() -> None:
        async with _started_channel(tmp_path, "r-other") as (channel, router, identity):
            with channel.lease_ahead():
                [asked] = await _recv_lease_frames(router, 1)

                async def tool_call() -> None:  # a tool's or a background call, in a task of its own
                    async with channel.hold():
                        pass
                other = asyncio.create_task(tool_call())
                [own] = await _recv_lease_frames(router, 1)
                assert isinstance(own, LeaseRequest) and own.id != asked.id
                await router.send_multipart([identity, encode(LeaseGrant(id=own.id))])
                await asyncio.wait_for(other, 10.0)
                [own_back] = await _recv_lease_frames(router, 1)
                assert isinstance(own_back, LeaseRelease) and own_back.id == own.id
            [back] = await _recv_lease_frames(router, 1)
            assert isinstance(back, LeaseRelease) and back.id == asked.id

    asyncio.run(main())


# -- a slot handed over with the message that lets the run go on (its start, a child's result) ------------


@contextlib.asynccontextmanager
async def _started_with_a_slot(tmp_path: Path, run: str, lease: int = -1
                               ) -> AsyncIterator[tuple[DaemonChannel, Any, bytes]]:
    """A channel whose start message (as to a warm worker with its spec in hand) carries the slot `lease`."""
    async with _opened_ahead(tmp_path, run) as (channel, router, identity):
        await router.send_multipart([identity, encode(StartRun(paused=False, lease=lease))])
        await asyncio.wait_for(channel.pause_gate(), 5.0)  # past the gate: the start message was read
        yield channel, router, identity


def test_a_slot_that_came_with_the_start_is_taken_by_the_first_call_without_asking(tmp_path: Path) -> None:
    async def main() -> None:
        async with _started_with_a_slot(tmp_path, "r-handed") as (channel, router, identity):
            with channel.lease_ahead():
                async with channel.hold():
                    channel.emit(CHUNK, {"text": "streaming"})
            # The first lease frame is the slot's release after the call, as used: no request went out before.
            [first] = await _recv_lease_frames(router, 1)
            assert isinstance(first, LeaseRelease) and (first.id, first.unused) == (-1, False)
            # Taken once: the next call asks as always.
            task = asyncio.create_task(_one_call(channel))
            [asked] = await _recv_lease_frames(router, 1)
            assert isinstance(asked, LeaseRequest) and asked.id > 0
            await router.send_multipart([identity, encode(LeaseGrant(id=asked.id))])
            await asyncio.wait_for(task, 10.0)

    asyncio.run(main())


async def _one_call(channel: DaemonChannel) -> None:
    async with channel.hold():
        pass


async def _read_before_a_reply(channel: DaemonChannel, router: zmq.asyncio.Socket, identity: bytes,
                               message: Any) -> None:
    """Send `message` right before the reply to a request of the worker's, and return once that reply is in: the
    channel reads in order, so `message` has been handled by then."""
    listing = asyncio.create_task(channel.subagents([]))
    _, asked = await _recv(router, SubagentsRequest)
    await router.send_multipart([identity, encode(message)])
    await router.send_multipart([identity, encode(SubagentsReply(id=asked.id))])
    await asyncio.wait_for(listing, 10.0)


def test_a_handed_slot_no_call_took_goes_back_unused_when_the_step_ends(tmp_path: Path) -> None:
    async def main() -> None:
        async with _started_with_a_slot(tmp_path, "r-handed-unused") as (channel, router, _identity):
            with channel.lease_ahead():
                pass
            [back] = await _recv_lease_frames(router, 1)
            assert isinstance(back, LeaseRelease) and (back.id, back.unused) == (-1, True)

    asyncio.run(main())


def test_a_recalled_slot_goes_back_unless_a_call_took_it(tmp_path: Path) -> None:
    async def main() -> None:
        async with _started_with_a_slot(tmp_path, "r-recalled") as (channel, router, identity):
            await router.send_multipart([identity, encode(LeaseRecall(id=-1))])
            [back] = await _recv_lease_frames(router, 1)
            assert isinstance(back, LeaseRelease) and (back.id, back.unused) == (-1, True)
            task = asyncio.create_task(_one_call(channel))  # no longer held: the call asks
            [asked] = await _recv_lease_frames(router, 1)
            assert isinstance(asked, LeaseRequest) and asked.id > 0
            await router.send_multipart([identity, encode(LeaseGrant(id=asked.id))])
            await asyncio.wait_for(task, 10.0)
            [released] = await _recv_lease_frames(router, 1)
            assert released.id == asked.id

        async with _started_with_a_slot(tmp_path, "r-recalled-late", lease=-3) as (channel, router, identity):
            async with channel.hold():  # took the slot: the recall comes too late and changes nothing
                other = asyncio.create_task(_one_call(channel))
                [asked] = await _recv_lease_frames(router, 1)
                # The recall is read before this grant, which is how the test knows the worker has seen it.
                await router.send_multipart([identity, encode(LeaseRecall(id=-3))])
                await router.send_multipart([identity, encode(LeaseGrant(id=asked.id))])
                await asyncio.wait_for(other, 10.0)
            frames = await _recv_lease_frames(router, 2)
            assert [(f.id, f.unused) for f in frames] == [(asked.id, False), (-3, False)]

    asyncio.run(main())


def test_a_run_being_stopped_gives_its_handed_slot_back_at_once(tmp_path: Path) -> None:
    async def main() -> None:
        async with _started_with_a_slot(tmp_path, "r-handed-cancel") as (channel, router, identity):
            await router.send_multipart([identity, encode(RunControl(action=ControlAction.CANCEL, reason="cancelled"))])
            [back] = await _recv_lease_frames(router, 1)
            assert isinstance(back, LeaseRelease) and (back.id, back.unused) == (-1, True)
            assert channel.cancel_reason == "cancelled"

    asyncio.run(main())


def test_a_run_that_pauses_gives_its_handed_slot_back_and_asks_again_once_it_goes_on(tmp_path: Path) -> None:
    async def main() -> None:
        async with _started_with_a_slot(tmp_path, "r-handed-paused") as (channel, router, identity):
            await _read_before_a_reply(channel, router, identity, RunControl(action=ControlAction.PAUSE))
            assert channel.paused
            gate = asyncio.create_task(channel.pause_gate())
            [back] = await _recv_lease_frames(router, 1)  # at the gate, before it waits for the continue
            assert isinstance(back, LeaseRelease) and (back.id, back.unused) == (-1, True)
            await router.send_multipart([identity, encode(RunControl(action=ControlAction.CONTINUE))])
            await asyncio.wait_for(gate, 5.0)
            task = asyncio.create_task(_one_call(channel))
            [asked] = await _recv_lease_frames(router, 1)
            assert isinstance(asked, LeaseRequest)
            await router.send_multipart([identity, encode(LeaseGrant(id=asked.id))])
            await asyncio.wait_for(task, 10.0)

    asyncio.run(main())


def test_a_slot_that_came_with_a_childs_result_is_kept_even_when_the_delegation_no_longer_waits(
        tmp_path: Path) -> None:
    async def main() -> None:
        async with _started_channel(tmp_path, "r-parent") as (channel, router, identity):
            delegation = asyncio.create_task(channel.run_child("chat", "look", "call-1", ""))
            _, request = await _recv(router, DelegateRequest)
            delegation.cancel()  # the parent's step was cut short while its child worked
            with pytest.raises(asyncio.CancelledError):
                await delegation
            outcome = RunOutcome(status=RunStatus.DONE, stop_reason=StopReason.AGENT_EXIT, output="late")
            await _read_before_a_reply(channel, router, identity,
                                       DelegateResult(id=request.id, outcome=outcome, lease=-2))
            with channel.lease_ahead():
                async with channel.hold():
                    pass
            [first] = await _recv_lease_frames(router, 1)
            assert isinstance(first, LeaseRelease) and (first.id, first.unused) == (-2, False)

    asyncio.run(main())


# -- a spec in hand ahead of the start message (a warm worker's assignment carries it) -------------------


@agent_kind("test-marks-then-passes-the-gate")
async def _marks_then_passes_the_gate(ctx: RunContext) -> RunOutcome:
    ctx.emit("mark", {"name": "built"})
    ctx.channel.flush()
    await ctx.channel.pause_gate()
    ctx.emit("mark", {"name": "past the gate"})
    return RunOutcome(status=RunStatus.DONE, stop_reason=StopReason.AGENT_EXIT, output="done")


async def _marks(router: zmq.asyncio.Socket, until: type) -> tuple[list[str], Any]:
    """The names of the worker's `mark` events up to its first `until` message, and that message."""
    marks: list[str] = []
    while True:
        _, frame = await asyncio.wait_for(router.recv_multipart(), 10.0)
        msg = decode(frame)
        if isinstance(msg, EventBatch):
            marks += [data["name"] for type_, _ts, data in msg.events if type_ == "mark"]
        if isinstance(msg, until):
            return marks, msg


def test_a_run_whose_spec_came_ahead_is_built_before_its_start_message_and_passes_the_gate_only_after_it(
        tmp_path: Path) -> None:
    async def main() -> tuple[list[str], RunResult, int]:
        ctx, router, endpoint = await _router(tmp_path)
        spec = _spec("r-ahead-spec", agent="test-marks-then-passes-the-gate")
        served = asyncio.create_task(entry._serve("r-ahead-spec", endpoint, spec=spec))
        try:
            identity, hello = await _recv(router, WorkerHello)
            assert hello.spec_in_hand
            # No start message yet: the run is built all the same, and then waits at its gate.
            _, batch = await _recv(router, EventBatch)
            assert [data["name"] for type_, _ts, data in batch.events if type_ == "mark"] == ["built"]
            assert await router.poll(300) == 0  # held at the gate: past it, the run would send its result at once
            await router.send_multipart([identity, encode(StartRun(paused=False))])  # the spec is not sent again
            marks, result = await _marks(router, RunResult)
            await router.send_multipart([identity, encode(ResultAck())])
            return marks, result, await asyncio.wait_for(served, 10.0)
        finally:
            served.cancel()  # a no-op when it ended; else it wraps up without an acknowledgement
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(served, 10.0)
            router.close(0)
            ctx.term()

    marks, result, code = asyncio.run(main())
    assert marks == ["past the gate"] and result.outcome.output == "done" and code == entry.EXIT_OK


@contextlib.asynccontextmanager
async def _opened_ahead(tmp_path: Path, run: str, timeout: float = 10.0, **spec_fields: Any
                        ) -> AsyncIterator[tuple[DaemonChannel, Any, bytes]]:
    """A channel opened with its spec in hand against a fake daemon's ROUTER that has sent no start message yet."""
    ctx, router, endpoint = await _router(tmp_path)
    channel = DaemonChannel(run, endpoint)
    try:
        spec = await asyncio.wait_for(channel.open(timeout=timeout, spec=_spec(run, **spec_fields)), 5.0)
        assert spec.run == run and channel.spec is spec  # at once: no start message was sent
        identity, _ = await _recv(router, WorkerHello)
        yield channel, router, identity
    finally:
        await channel.close()
        router.close(0)
        ctx.term()


def test_a_run_built_ahead_whose_start_message_says_paused_waits_for_the_continue(tmp_path: Path) -> None:
    async def main() -> None:
        async with _opened_ahead(tmp_path, "r-paused-ahead") as (channel, router, identity):
            gate = asyncio.create_task(channel.pause_gate())
            done, _ = await asyncio.wait({gate}, timeout=0.3)
            assert not done  # the start message alone says whether the run may go on
            # The turn was paused between the launch and the hello: the start says so; the spec in hand did not.
            await router.send_multipart([identity, encode(StartRun(paused=True))])
            done, _ = await asyncio.wait({gate}, timeout=0.3)
            assert not done and channel.paused
            await router.send_multipart([identity, encode(RunControl(action=ControlAction.CONTINUE))])
            await asyncio.wait_for(gate, 5.0)
            assert not channel.paused and not channel.lost

    asyncio.run(main())


def test_a_run_built_ahead_of_a_pause_that_ended_before_its_start_goes_on(tmp_path: Path) -> None:
    async def main() -> None:
        # Paused when it was launched, continued before its hello: the start message is what counts.
        async with _opened_ahead(tmp_path, "r-resumed", paused=True) as (channel, router, identity):
            await router.send_multipart([identity, encode(StartRun(paused=False))])
            await asyncio.wait_for(channel.pause_gate(), 5.0)
            assert not channel.paused

    asyncio.run(main())


def test_a_start_waiting_in_the_socket_is_taken_at_the_gate_at_once_with_what_came_behind_it(tmp_path: Path) -> None:
    """A run built ahead reaches its gate with its start message (and what came after it) already in the socket: the
    gate takes them there and then, in their order, without waiting for the loop — and every one of them, so the
    socket's wake-up a receive there consumes strands nothing: a later message still reaches the reader."""
    async def main() -> None:
        ctx = zmq.asyncio.Context()
        router = ctx.socket(zmq.ROUTER)
        endpoint = f"inproc://gate-{os.getpid()}"  # a send lands in the worker's pipe before it returns
        router.bind(endpoint)
        channel = DaemonChannel("r-waiting-start", endpoint, context=ctx)
        try:
            await channel.open(timeout=10, spec=_spec("r-waiting-start"))
            identity, _ = await _recv(router, WorkerHello)
            sender = zmq.Socket.shadow(router.underlying)  # sends now, with no loop turn in between
            for msg in (StartRun(paused=True), RunControl(action=ControlAction.CONTINUE), CompactNow()):
                sender.send_multipart([identity, encode(msg)])
            gate = channel.pause_gate()
            with pytest.raises(StopIteration):  # passed without suspending once: no wait on the loop
                gate.send(None)
            assert not channel.paused  # the CONTINUE came after the paused start, and was applied after it
            assert channel.take_compaction_request()
            # A message that comes later still reaches the reader: the slot a call asks for is granted.
            async def grant() -> None:
                request_identity, request = await _recv(router, LeaseRequest)
                await router.send_multipart([request_identity, encode(LeaseGrant(id=request.id))])
            granting = asyncio.create_task(grant())
            async with asyncio.timeout(10):
                async with channel.hold_lease():
                    pass
            await granting
        finally:
            await channel.close()
            router.close(0)
            ctx.term()

    asyncio.run(main())


def test_a_worker_without_a_spec_whose_start_message_has_none_does_not_start(tmp_path: Path) -> None:
    async def main() -> int:
        ctx, router, endpoint = await _router(tmp_path)
        served = asyncio.create_task(entry._serve("r-no-spec", endpoint))
        try:
            identity, hello = await _recv(router, WorkerHello)
            assert not hello.spec_in_hand
            await router.send_multipart([identity, encode(StartRun(paused=False))])
            return await asyncio.wait_for(served, 10.0)
        finally:
            router.close(0)
            ctx.term()

    assert asyncio.run(main()) == entry.EXIT_NO_START


@pytest.mark.parametrize("daemon_answers", ["nothing", "a refusal"])
def test_a_run_built_ahead_whose_start_never_comes_loses_its_daemon_and_is_stopped(
        tmp_path: Path, daemon_answers: str, caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> tuple[bool, list[str], BaseException | None]:
        timeout = 0.5 if daemon_answers == "nothing" else 30.0
        async with _opened_ahead(tmp_path, "r-never-started", timeout) as (channel, router, identity):
            stopped: list[str] = []
            channel.on_cancel = stopped.append
            if daemon_answers == "a refusal":
                await router.send_multipart([identity, encode(ErrorReply(
                    id=0, code=ErrorCode.PROTOCOL_MISMATCH, message="worker speaks protocol 0; restart yagentd"))])
            raised: BaseException | None = None
            try:
                await asyncio.wait_for(channel.pause_gate(), 10.0)
            except asyncio.CancelledError as exc:
                raised = exc
            return channel.lost, stopped, raised

    with caplog.at_level(logging.WARNING, logger="yagent.workers.channel"):
        lost, stopped, raised = asyncio.run(main())
    assert lost and stopped == ["interrupted"] and raised is not None
    why = ("no start message from yagentd within 0s" if daemon_answers == "nothing"
           else "yagentd refused the run's start: worker speaks protocol 0; restart yagentd")
    assert any(why in r.getMessage() for r in caplog.records), [r.getMessage() for r in caplog.records]


# -- what a run leaves for after its result ---------------------------------------------------------------

_wrap_up_log: list[str] = []
_result_heard: list[asyncio.Event] = []


@agent_kind("test-leaves-wrap-up-for-after-its-result")
async def _leaves_wrap_up(ctx: RunContext) -> RunOutcome:
    async def closes_clients() -> None:
        # Waits for the fake daemon to have the result: run before the result, it would never let it go out.
        await _result_heard[0].wait()
        _wrap_up_log.append("closed")

    async def breaks() -> None:
        raise OSError("the client was closed already")

    assert ctx.after_result(breaks) and ctx.after_result(closes_clients)
    return RunOutcome(status=RunStatus.DONE, stop_reason=StopReason.AGENT_EXIT, output="answered")


def test_what_a_run_leaves_for_after_its_result_runs_after_the_daemon_has_it_and_a_failure_there_is_only_logged(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> tuple[RunResult, int]:
        _wrap_up_log.clear()
        _result_heard[:] = [asyncio.Event()]
        ctx, router, endpoint = await _router(tmp_path)
        served = asyncio.create_task(entry._serve("r-wrap-up", endpoint))
        try:
            identity, _ = await _recv(router, WorkerHello)
            await router.send_multipart([identity, encode(StartRun(
                spec=_spec("r-wrap-up", agent="test-leaves-wrap-up-for-after-its-result")))])
            _, result = await _recv(router, RunResult)
            assert _wrap_up_log == []
            _result_heard[0].set()
            await router.send_multipart([identity, encode(ResultAck())])
            return result, await asyncio.wait_for(served, 10.0)
        finally:
            _result_heard[0].set()
            router.close(0)
            ctx.term()

    with caplog.at_level(logging.ERROR, logger="yagent.workers.entry"):
        result, code = asyncio.run(main())
    assert result.outcome.output == "answered" and code == entry.EXIT_OK
    assert _wrap_up_log == ["closed"]  # after the one that failed
    assert any("wrapping up after the run's result failed" in r.getMessage() for r in caplog.records)


def test_a_context_that_keeps_nothing_for_after_the_result_says_so() -> None:
    ctx = RunContext(_spec("r-direct"), channel=None)  # type: ignore[arg-type]
    assert ctx.after_result(asyncio.sleep) is False  # its caller closes what it opened itself


def test_a_context_handed_in_is_ended_with_the_channel_only_when_it_is_the_channels_own(tmp_path: Path) -> None:
    async def main() -> list[bool]:
        ctx, router, endpoint = await _router(tmp_path)
        ended = []
        for owns in (True, False):
            made_ahead = zmq.asyncio.Context()  # as a warm worker makes it while it waits
            channel = DaemonChannel(f"r-{owns}", endpoint, context=made_ahead, owns_context=owns)
            opened = asyncio.create_task(channel.open(timeout=10))
            identity, hello = await _recv(router, WorkerHello)
            assert hello.run == f"r-{owns}"
            await router.send_multipart([identity, encode(StartRun(spec=_spec(f"r-{owns}")))])
            await opened
            await channel.close()
            ended.append(made_ahead.closed)
            if not made_ahead.closed:
                made_ahead.term()
        router.close(0)
        ctx.term()
        return ended

    # Owned, it is ended as a context of its own would be (its socket's last frames go out before the worker leaves).
    assert asyncio.run(main()) == [True, False]
