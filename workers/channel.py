"""The worker's DEALER channel to the daemon (a random identity; the hello proves the run's secret).

Owns everything that crosses that socket: the hello/start handshake, coalesced events, progress
heartbeats, in-flight LLM leases, delegate and ask_user requests, the pause gate, cancellation, the
final result, and noticing that the daemon has gone away.

Events go out at once when the channel is quiet and are coalesced while it is busy: the first event after a
quiet spell is sent before `emit` returns (no timer stands between an agent and its client), and every event
emitted after it, until a loop iteration passes with none, waits for the end of that iteration and leaves in one
frame with the others (at most `BATCH_MAX`). One frame per event would cap the pipeline at its per-frame cost.

A run on its way from its start or from a child's result to its next model request holds its events
(`hold_events`): they leave in one frame once that request is out, or with the first message to the daemon
before it, and at the latest `EVENT_HOLD_MAX` after the hold began. Each frame sent on that way wakes the daemon,
and through it every client, while the run itself needs the CPU for its request: on the two-core machine this
was measured on, holding them took 2-3 ms off a delegation (`bench/delegation_session.py`). The events of a
model's answer are not held: what they lead to next is a message to the daemon, which they must precede, and
sent with it their wake-ups only moved onto the start of the child it asks for (no gain measured).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import msgpack
import zmq
import zmq.asyncio

from yagent.ipc.errors import MessageTooLarge, ProtocolError, RemoteError
from yagent.ipc.messages import (
    PROTOCOL_VERSION,
    ApprovedOperation,
    ApprovedOperationResult,
    AskUser,
    BrowserCall,
    BrowserCallResult,
    BrowserCancel,
    CheckpointCreate,
    CheckpointList,
    CheckpointNote,
    CheckpointReply,
    CheckpointRollback,
    CompactNow,
    DelegateAccepted,
    DelegateRequest,
    DelegateResult,
    ErrorReply,
    EventBatch,
    Heartbeat,
    LeaseGrant,
    LeaseRecall,
    LeaseRelease,
    LeaseRequest,
    McpCall,
    McpCallResult,
    McpCancel,
    McpToolsChanged,
    McpToolsReply,
    McpToolsRequest,
    Ping,
    Question,
    ResultAck,
    RunControl,
    RunOutcome,
    RunResult,
    RunSpec,
    StartRun,
    SubagentsReply,
    SubagentsRequest,
    UserAnswer,
    WorkerHello,
)
from yagent.ipc.pending_replies import AwaitedReply, PendingReplies
from yagent.ipc.records import MAX_FRAME_BYTES, Message, cut_to_frame, decode, encode
from yagent.ipc.run_secret import hello_proof
from yagent.ipc.sockets import connect_dealer, random_identity
from yagent.ipc.vocabulary import ControlAction, QuestionKind, RunStatus, StopReason, TurnEndChoice

__all__ = ["ChannelFailed", "DaemonChannel", "DaemonLost"]

log = logging.getLogger(__name__)

# Events per frame at most while busy: bounds the work one frame costs the daemon's loop.
BATCH_MAX = 512
# How long a hold keeps events at most (`hold_events`): a client shows them at most this late, under a frame at 60 Hz.
EVENT_HOLD_MAX = 0.015
# Progress heartbeats are rate-limited: the watchdog's resolution is far coarser than this.
HEARTBEAT_MIN_INTERVAL = 0.25
# What an event or result too large for one frame keeps of each text field.
OVERSIZE_KEEP_CHARS = 64 * 1024
# What msgpack refuses to pack: a set, a str with lone surrogates, an int past 64 bits, nesting too deep.
_UNENCODABLE = (TypeError, ValueError, OverflowError)
_MAX_DEPTH = 64


class DaemonLost(Exception):
    """The daemon stopped answering; the run must wrap up and exit."""


class ChannelFailed(Exception):
    """Handling a message from the daemon failed (a bug in yagent): the run ends as failed."""


class DaemonChannel:
    def __init__(self, run_id: str, endpoint: str, *, context: zmq.asyncio.Context | None = None,
                 owns_context: bool = False, secret: bytes = b"", prefaulted: int = 0, rules_ahead: int = 0) -> None:
        """`context`: the ZeroMQ context to open the socket in (None: one of its own); `owns_context`: that one is
        this channel's to end when it closes (a warm worker's, made ahead)."""
        self.run_id = run_id
        self._prefaulted = prefaulted  # said in the hello: the daemon shows it with the run's start times
        self._rules_ahead = rules_ahead  # likewise
        self._ctx = context or zmq.asyncio.Context()
        self._owns_ctx = context is None or owns_context
        identity = random_identity()  # not the run id: nobody may guess it and connect in this worker's place
        self._sock = connect_dealer(self._ctx, endpoint, identity=identity, linger_ms=2000)
        # Only the proof is kept: the secret itself has no further use in this process.
        self._proof = hello_proof(secret, run_id, identity) if secret else b""
        self._sends: set[asyncio.Future[Any]] = set()
        self._batch: list[list[Any]] = []
        # Set while a send is pending: a frame left in this loop iteration, and the next one flushes what came since.
        self._window: asyncio.Handle | None = None
        # Set while events are held (`hold_events`): the hold's deadline, which sends them if nothing did before.
        self._hold: asyncio.TimerHandle | None = None
        self._pending = PendingReplies()
        # A lease asked for ahead of its call (`lease_ahead`) and not yet taken, and the task whose call may take it.
        self._ahead: AwaitedReply | None = None
        self._ahead_task: asyncio.Task[Any] | None = None
        # A slot the daemon granted with the message that let the run go on (`StartRun`, `DelegateResult`), for the
        # next model call: taken by the next `lease_ahead` or `hold_lease`; given back at a pause, or when the
        # daemon recalls it for a run that would wait (until the call takes it, it is only lent).
        self._handed = 0
        self._start: asyncio.Future[RunSpec] | None = None
        self._ack: asyncio.Future[None] | None = None
        self._reader: asyncio.Task[None] | None = None
        self._receiving: asyncio.Future[Any] | None = None  # the reader's receive under way (`_read_waiting`)
        self._watchdog: asyncio.Task[None] | None = None
        self._awaiting_start: asyncio.Task[None] | None = None  # a run built ahead of its start message
        self._resume = asyncio.Event()
        self._resume.set()
        self._last_heartbeat = 0.0
        self.last_heard = time.monotonic()
        self.cancel_reason: str | None = None
        self.cancelled_while_paused = False  # stopped while held at the pause gate: its rollout says paused
        self._at_gate = False
        self.lost = False
        # What broke in handling the daemon's messages, when something did: the run ends FAILED / PANIC.
        self.failure: str | None = None
        self.on_cancel: Callable[[str], None] | None = None
        self.spec: RunSpec | None = None
        self._compaction_asked = False  # `/compact` arrived; the loop takes it before its next model call
        self.mcp_generation = 0  # the newest MCP tool-list generation the daemon announced for the project

    # -- lifecycle ----------------------------------------------------------------------------------

    async def open(self, timeout: float = 30.0, *, hello_sent: Callable[[], object] | None = None,
                   spec: RunSpec | None = None, model_loop: bool = False) -> RunSpec:
        """Say hello and wait for the start message with the run's spec; `hello_sent` is called in between (what
        may wait while the daemon answers).

        `spec`: the run's spec, already in hand (a warm worker's assignment carries it). Then this returns at once
        and the run is built while the hello travels; its first pass through the pause gate waits for the start
        message, which alone says whether the run starts paused. `model_loop`: the hello says the run's agent
        works in model steps (see `WorkerHello`). No start in `timeout`, or a refusal: the daemon is lost to this
        run."""
        loop = asyncio.get_running_loop()
        self._start = loop.create_future()
        self._reader = self._owned(loop.create_task(self._read_loop(), name=f"channel-reader-{self.run_id}"))
        self._send(encode(WorkerHello(version=PROTOCOL_VERSION, run=self.run_id, pid=os.getpid(), proof=self._proof,
                                      prefaulted=self._prefaulted, rules_ahead=self._rules_ahead,
                                      spec_in_hand=spec is not None,
                                      model_loop=model_loop)))
        if hello_sent is not None:
            hello_sent()
        if spec is None:
            spec = await self._started(timeout)
        else:
            self._awaiting_start = self._owned(loop.create_task(self._start_or_lost(timeout),
                                                                name=f"channel-start-{self.run_id}"))
        self.spec = spec
        self._watchdog = self._owned(loop.create_task(self._watch_daemon(spec.daemon_loss_timeout),
                                                      name=f"channel-watchdog-{self.run_id}"))
        return spec

    async def _started(self, timeout: float) -> RunSpec:
        assert self._start is not None
        try:
            async with asyncio.timeout(timeout):
                return await asyncio.shield(self._start)
        except TimeoutError:
            self._start.cancel()  # a start that comes later is not taken, and no loss is left set on it unread
            raise DaemonLost(f"no start message from yagentd within {timeout:.0f}s") from None

    async def _start_or_lost(self, timeout: float) -> None:
        """A run built ahead of its start message: the daemon is lost to it when that message does not come."""
        try:
            await self._started(timeout)
        except (DaemonLost, ChannelFailed, RemoteError) as exc:
            self._lost_by_start(exc)

    def _lost_by_start(self, exc: DaemonLost | ChannelFailed | RemoteError) -> None:
        """What a start that failed means to a run built ahead: its daemon is lost to it (a refusal says why)."""
        if isinstance(exc, DaemonLost):
            self.daemon_lost(str(exc))  # a no-op when a loss is what failed it
        elif isinstance(exc, RemoteError):
            self.daemon_lost(f"yagentd refused the run's start: {exc}")
        # ChannelFailed: the failure has cancelled the run already

    def _owned(self, task: asyncio.Task[None]) -> asyncio.Task[None]:
        """The channel's background tasks end only when it closes; one that dies of an error fails the run."""
        def ended(done: asyncio.Task[None]) -> None:
            if done.cancelled() or done.exception() is None:
                return
            exc = done.exception()
            log.error("run %s: the channel's %s task died", self.run_id, done.get_name(), exc_info=exc)
            self.fail(f"the channel's {done.get_name()} task raised {type(exc).__name__}: {exc}")

        task.add_done_callback(ended)
        return task

    async def finish(self, result: RunResult, timeout: float = 5.0) -> bool:
        """Send the final result and wait for the daemon's acknowledgement."""
        self.flush()
        self._ack = asyncio.get_running_loop().create_future()
        self._send(self._result_frame(result))
        if self.lost:
            return False
        try:
            async with asyncio.timeout(timeout):
                await self._ack
            return True
        except (TimeoutError, DaemonLost):  # the daemon died while we waited: nobody will acknowledge
            return False

    async def close(self) -> None:
        self.flush()
        if self._window is not None:
            self._window.cancel()
            self._window = None
        if self._sends and not self.lost:
            await asyncio.wait(list(self._sends), timeout=2.0)
        for task in (self._reader, self._watchdog, self._awaiting_start):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        self._pending.cancel_all()
        self._sock.close(linger=0 if self.lost else 2000)
        if self._owns_ctx:
            self._ctx.term()

    # -- outbound -----------------------------------------------------------------------------------

    def _send(self, frame: bytes) -> None:
        # The asyncio socket keeps frames in order and sends at once when it can. It must also be the only
        # way we send: a send through a synchronous shadow would swallow the FD wake-up our reader waits on.
        sent = self._sock.send(frame)
        if not sent.done():
            self._sends.add(sent)
            sent.add_done_callback(self._sends.discard)

    def emit(self, type_: str, data: dict[str, Any]) -> None:
        self._batch.append([type_, time.time(), data])
        if len(self._batch) >= BATCH_MAX or (self._window is None and self._hold is None):
            self._send_batch()

    def flush(self) -> None:
        """Send what is batched now (before a request, a pause, the result, or once a model request is out), ending
        a hold: events keep their order."""
        if self._hold is not None:
            self._hold.cancel()
            self._hold = None
        self._send_batch()

    def hold_events(self) -> None:
        """Keep the events emitted from now on until the run's next message goes out (`flush`), `EVENT_HOLD_MAX` at
        most: the run is on its way to a message the system waits for, and should not share the CPU with the
        daemon and the clients each frame would wake meanwhile."""
        if self._hold is None and not self.lost:
            self._hold = asyncio.get_running_loop().call_later(EVENT_HOLD_MAX, self.flush)

    def _send_batch(self) -> None:
        if not self._batch:
            return
        batch, self._batch = self._batch, []
        for frame in self._event_frames(batch):
            self._send(frame)
        if self._window is None:
            self._window = asyncio.get_running_loop().call_soon(self._window_ends)

    def _window_ends(self) -> None:
        """One loop iteration after a send: what gathered meanwhile leaves together; nothing gathered, quiet again."""
        self._window = None
        if self._hold is None:  # held events wait for their message (or the hold's deadline)
            self._send_batch()  # reopens the window when it sent something: busy, keep coalescing

    def _event_frames(self, events: list[list[Any]]) -> list[bytes]:
        """Frames for `events`; data the daemon could not read is converted, data too big for a frame cut.

        An agent bug (a set or a Path in event data, a file name with undecodable bytes, one huge event) must
        cost at most that event's fidelity, never the batch it travels with, the run's result, or the worker.
        """
        try:
            return [encode(EventBatch(events=events))]
        except MessageTooLarge:
            if len(events) > 1:
                half = len(events) // 2
                return self._event_frames(events[:half]) + self._event_frames(events[half:])
            type_, ts, data = events[0]
            log.warning("run %s: a %s event is over the %d-byte frame cap; sending it cut", self.run_id, type_,
                        MAX_FRAME_BYTES)
            return [encode(EventBatch(events=[[type_, ts, cut_to_frame(data, OVERSIZE_KEEP_CHARS)]]))]
        except _UNENCODABLE:
            pass
        fixed = []  # converted data holds only wire types: the second try cannot fail this way again
        for type_, ts, data in events:
            try:
                msgpack.packb(data, use_bin_type=True)
            except _UNENCODABLE as why:
                log.warning("run %s: a %s event carries data yagentd cannot read (%s); sending a converted "
                            "copy — emit maps with str keys of str, numbers, bools, lists and maps",
                            self.run_id, type_, why)
                data = _wire_safe(data)
            fixed.append([_wire_safe(type_), ts, data])
        return self._event_frames(fixed)

    def _result_frame(self, result: RunResult) -> bytes:
        """The result always reaches the daemon: unreadable data is converted, an oversized result cut."""
        try:
            return encode(result)
        except _UNENCODABLE as exc:
            log.warning("run %s: the result carries data yagentd cannot read (%s); sending a converted copy",
                        self.run_id, exc)
            o = result.outcome
            result = RunResult(outcome=dataclasses.replace(
                o, output=_wire_safe(o.output), error=_wire_safe(o.error), handoff=_wire_safe(o.handoff),
                usage=_wire_safe(o.usage), data=_wire_safe(o.data)))
            with contextlib.suppress(MessageTooLarge):
                return encode(result)
        except MessageTooLarge:
            pass
        log.warning("run %s: the result is over the %d-byte frame cap; sending it cut", self.run_id, MAX_FRAME_BYTES)
        o = result.outcome
        return encode(RunResult(outcome=dataclasses.replace(
            o, output=_cut(o.output), error=_cut(o.error),
            handoff=cut_to_frame(o.handoff, OVERSIZE_KEEP_CHARS) if o.handoff else None,
            data=cut_to_frame(o.data, OVERSIZE_KEEP_CHARS))))

    def heartbeat(self) -> None:
        now = time.monotonic()
        if now - self._last_heartbeat >= HEARTBEAT_MIN_INTERVAL:
            self._last_heartbeat = now
            self._send(encode(Heartbeat()))

    async def _request(self, msg: Message, expect: type[Message]) -> Message:
        if self.lost:
            raise DaemonLost("yagentd is gone")
        if self.failure is not None:
            raise ChannelFailed(self.failure)
        with self._pending.expect(msg) as reply:
            try:
                frame = encode(msg)
            except _UNENCODABLE as exc:  # sent anyway, the daemon would drop it and we would wait forever
                raise ValueError(
                    f"cannot send {msg.kind} to yagentd: it carries data the daemon cannot read ({exc}); pass "
                    "only maps with str keys of str, numbers, bools, lists and maps") from None
            self.flush()  # events emitted before the request must be seen before it
            self._send(frame)
            return await reply.get(expect)

    # -- services -----------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def hold_lease(self) -> AsyncIterator[None]:
        """Hold one in-flight LLM slot for the duration of the block (the engines' InFlightGate); a lease asked
        for ahead (`lease_ahead`) is taken over instead of asking again."""
        ahead = self._ahead
        if ahead is not None and self._ahead_task is asyncio.current_task():
            self._ahead = None
        else:
            # Another task's call (a tool's, a background one) asks for a slot of its own, unless one was handed over.
            ahead = self._take_handed()
        request = ahead.request if ahead is not None else LeaseRequest(id=0)
        try:
            if ahead is not None:
                await ahead.get(LeaseGrant)
            else:
                await self._request(request, LeaseGrant)
        except asyncio.CancelledError:
            # The grant may already be on its way: releasing by id covers both a queued and a granted lease.
            if not self.lost:
                self._send(encode(LeaseRelease(id=request.id)))
            raise
        try:
            yield
        finally:
            if not self.lost:
                self._send(encode(LeaseRelease(id=request.id)))

    @contextlib.contextmanager
    def lease_ahead(self) -> Iterator[None]:
        """Ask for the next model call's slot now, while the step still gets its request ready: the daemon's
        answer travels meanwhile instead of after; a slot the daemon handed over ahead is taken instead of asking.
        The first `hold_lease` in the block takes it over; if none does (the step ended without a call), it is given
        back on leaving the block."""
        if self.lost or self.failure is not None or self._ahead is not None:
            yield
            return
        with contextlib.ExitStack() as stack:
            ahead = self._take_handed()
            if ahead is not None:  # granted with the message that let the run go on: nothing to ask
                back = LeaseRelease(id=ahead.id, unused=True)
            else:
                request = LeaseRequest(id=0)
                ahead = stack.enter_context(self._pending.expect(request))
                back = LeaseRelease(id=request.id)
                # Not behind the events batched so far: the daemon hears the request first; their order is no matter.
                self._send(encode(request))
            self._ahead, self._ahead_task = ahead, asyncio.current_task()
            try:
                yield
            finally:
                if self._ahead is ahead:  # no call took it
                    self._ahead = None
                    if not self.lost:
                        self._send(encode(back))

    def _take_handed(self) -> AwaitedReply | None:
        """The slot the daemon handed over ahead, as a reply already in (then no longer kept here), or None (also
        once the daemon is lost or the channel failed: the call then raises as any other would)."""
        lease, self._handed = self._handed, 0
        if not lease or self.lost or self.failure is not None:
            return None
        granted: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        granted.set_result(LeaseGrant(id=lease))
        return AwaitedReply(lease, LeaseRequest(id=lease), granted)

    def _keep_handed(self, lease: int) -> None:
        """Keep a slot handed over with a message for the next model call (one at a time: another goes back)."""
        if self._handed or self.cancel_reason is not None:
            self._give_back(lease)
        else:
            self._handed = lease

    def _give_back_handed(self, lease: int | None = None) -> None:
        """Give the handed-over slot back untaken (only if it is `lease`, when given): the daemon recalled it, or
        the run stops at its pause gate."""
        if self._handed and lease in (None, self._handed):
            lease, self._handed = self._handed, 0
            self._give_back(lease)

    def _give_back(self, lease: int) -> None:
        if not self.lost:
            self._send(encode(LeaseRelease(id=lease, unused=True)))

    def hold(self) -> contextlib.AbstractAsyncContextManager[None]:
        return self.hold_lease()

    async def run_child(self, agent: str, task: str, call_id: str, context: str, *,
                        replay: bool = False, subagent: str = "", reuse_key: str = "") -> RunOutcome:
        """Ask the daemon to run `agent` on `task` as a child of this run; returns the child's outcome once it
        has ended (the daemon fills in its run, agent, sub-agent and, when it stopped the child, status and stop
        reason). `subagent`: continue that sub-agent of this run's agent; `reuse_key`: continue the one kept
        under that key, or start one for it (a workflow's node). A refusal raises `RemoteError`.

        This is the tools' `Delegator` port: the delegation tool calls it directly. When the daemon is lost
        meanwhile, the child is interrupted with it — an interruption, never a failure of the delegation."""
        try:
            reply = await self._request(
                DelegateRequest(id=0, agent=agent, task=task, call_id=call_id, context=context, replay=replay,
                                subagent=subagent, reuse_key=reuse_key),
                DelegateResult)
        except DaemonLost as exc:
            return RunOutcome(status=RunStatus.INTERRUPTED, stop_reason=StopReason.INTERRUPTED, agent=agent,
                              error=f"yagentd stopped while the delegation ran ({exc})")
        assert isinstance(reply, DelegateResult)
        return reply.outcome

    async def start_child(self, agent: str, task: str, call_id: str, context: str, *, choice: TurnEndChoice,
                          subagent: str = "") -> DelegateAccepted:
        """Start `agent` on `task` (or continue `subagent`) in the background: the daemon answers as soon as the
        child is admitted; its end is learnt with `subagents`. A refusal raises `RemoteError`."""
        reply = await self._request(DelegateRequest(id=0, agent=agent, task=task, call_id=call_id, context=context,
                                                    subagent=subagent, background=choice), DelegateAccepted)
        assert isinstance(reply, DelegateAccepted)
        return reply

    async def subagents(self, subagents: list[str], *, wait: bool = False, timeout: float = 0.0,
                        cancel: bool = False) -> SubagentsReply:
        """This run's agent's sub-agents as the daemon has them; with `wait`, once none of them is working (or
        at `timeout`); with `cancel`, after stopping those that work. The daemon answers when that is so: nothing
        here polls."""
        reply = await self._request(SubagentsRequest(id=0, subagents=list(subagents), wait=wait, timeout=timeout,
                                                     cancel=cancel), SubagentsReply)
        assert isinstance(reply, SubagentsReply)
        return reply

    async def ask_user(self, kind: QuestionKind, prompt: str, *, options: list[str], default: str | None,
                       details: dict[str, Any]) -> dict[str, Any]:
        return (await self.ask_user_numbered(kind, prompt, options=options, default=default, details=details))[1]

    async def ask_user_numbered(self, kind: QuestionKind, prompt: str, *, options: list[str], default: str | None,
                                details: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """(the question's request id, the answer): an approved operation names the prompt it was allowed at."""
        question = Question(request_id="", kind=kind, prompt=prompt, options=options, default=default,
                            details=details)
        ask = AskUser(id=0, question=question)
        reply = await self._request(ask, UserAnswer)
        assert isinstance(reply, UserAnswer)
        return ask.id, reply.answer

    async def carry_out_approved(self, ask: int, tool: str, args: dict[str, Any], call_id: str
                                 ) -> ApprovedOperationResult:
        """Have the daemon carry out one call the user allowed at prompt `ask`, outside this run's rules (this
        process never gains a right); `RemoteError` if the daemon finds no such approval."""
        reply = await self._request(ApprovedOperation(id=0, ask=ask, tool=tool, args=args, call_id=call_id),
                                    ApprovedOperationResult)
        assert isinstance(reply, ApprovedOperationResult)
        return reply

    def take_compaction_request(self) -> bool:
        """Whether the user asked for a compaction since the last time this was asked (asking clears it)."""
        asked, self._compaction_asked = self._compaction_asked, False
        return asked

    async def list_mcp_tools(self, wait_for: list[str]) -> McpToolsReply:
        """The project's MCP tools as the daemon has them now (after its required servers, and `wait_for`, came
        up or were given up on); `RemoteError` `mcp_unavailable` when a required one did not come up."""
        reply = await self._request(McpToolsRequest(id=0, wait_for=list(wait_for)), McpToolsReply)
        assert isinstance(reply, McpToolsReply)
        self.mcp_generation = max(self.mcp_generation, reply.generation)
        return reply

    async def call_mcp(self, server: str, tool: str, arguments: dict[str, Any], *, call_id: str
                       ) -> tuple[str, bool]:
        """One MCP tool call through the daemon: (the result text, whether it is an error). Cancelled here, it is
        withdrawn at the daemon, which cancels it at the server."""
        request = McpCall(id=0, server=server, tool=tool, arguments=arguments, call_id=call_id)
        try:
            reply = await self._request(request, McpCallResult)
        except asyncio.CancelledError:
            if not self.lost and request.id:
                self._send(encode(McpCancel(call=request.id)))
            raise
        except DaemonLost as exc:
            return f"yagentd stopped during the call to {tool!r} of MCP server {server!r} ({exc}); it may not " \
                   "have completed", True
        except RemoteError as exc:
            return f"the call to {tool!r} of MCP server {server!r} was refused: {exc}", True
        except ValueError as exc:
            return str(exc), True
        assert isinstance(reply, McpCallResult)
        return reply.content, reply.is_error

    async def call_browser(self, tool: str, arguments: dict[str, Any], *, call_id: str) -> BrowserCallResult:
        """One browser tool call through the daemon on the project's browser. Cancelled here, it is withdrawn at
        the daemon, which withdraws it at the browser."""
        request = BrowserCall(id=0, tool=tool, arguments=arguments, call_id=call_id)
        try:
            reply = await self._request(request, BrowserCallResult)
        except asyncio.CancelledError:
            if not self.lost and request.id:
                self._send(encode(BrowserCancel(call=request.id)))
            raise
        except DaemonLost as exc:
            return BrowserCallResult(id=0, is_error=True, content=f"yagentd stopped during {tool} ({exc}); it may "
                                     "not have completed")
        except RemoteError as exc:
            return BrowserCallResult(id=0, is_error=True, content=f"{tool} was refused: {exc}")
        except ValueError as exc:
            return BrowserCallResult(id=0, is_error=True, content=str(exc))
        assert isinstance(reply, BrowserCallResult)
        return reply

    async def checkpoint_create(self, label: str) -> tuple[str, bool]:
        """The tools' `CheckpointPort`: a checkpoint of the project now, made by the daemon."""
        return await self._checkpoint(CheckpointCreate(id=0, label=label))

    async def checkpoint_list(self) -> tuple[str, bool]:
        return await self._checkpoint(CheckpointList(id=0))

    async def checkpoint_rollback(self, number: int) -> tuple[str, bool]:
        return await self._checkpoint(CheckpointRollback(id=0, number=number))

    async def checkpoint_note(self, paths: list[str]) -> tuple[str, bool]:
        return await self._checkpoint(CheckpointNote(id=0, paths=paths))

    async def _checkpoint(self, msg: CheckpointCreate | CheckpointList | CheckpointNote | CheckpointRollback
                          ) -> tuple[str, bool]:
        try:
            reply = await self._request(msg, CheckpointReply)
        except DaemonLost as exc:
            return f"yagentd stopped during the request ({exc}); it may not have been carried out", True
        except RemoteError as exc:
            return f"yagentd refused it: {exc}", True
        assert isinstance(reply, CheckpointReply)
        return reply.content, reply.is_error

    async def pause_gate(self) -> None:
        if self.cancel_reason is not None:
            raise asyncio.CancelledError(self.cancel_reason)
        start = self._start
        if start is not None and not start.done():
            self._read_waiting()  # the start message is in the socket already, as a rule
            failed = start.exception() if start.done() and not start.cancelled() else None
            if isinstance(failed, DaemonLost | ChannelFailed | RemoteError):
                self._lost_by_start(failed)  # now: the task awaiting the start would say so only a loop turn later
        if self._start is not None and not self._start.done():  # built ahead: the start says if it is paused
            # A start that failed, or never came, has lost the daemon: the cancellation below says so.
            try:
                await asyncio.shield(self._start)
            except asyncio.CancelledError:
                if not self._start.cancelled():  # this task itself is being cancelled
                    raise
            except Exception:
                pass
        if not self._resume.is_set():
            self._give_back_handed()  # a paused run holds no slot: its call asks again once it goes on
            self.flush()
            self._at_gate = True
            try:
                await self._resume.wait()
            finally:
                self._at_gate = False
        if self.cancel_reason is not None:
            raise asyncio.CancelledError(self.cancel_reason)

    @property
    def paused(self) -> bool:
        return not self._resume.is_set()

    def cancel(self, reason: str, *, again: bool = False) -> None:
        """Stop the run (once: a second cancellation would cut short what it writes on its way out), or, with
        `again`, cancel it once more — the daemon's SIGTERM after the grace it gave the first."""
        first = self.cancel_reason is None
        if first:
            self.cancel_reason = reason
            self.cancelled_while_paused = self._at_gate
            self._give_back_handed()  # a run being stopped makes no new call: the slot goes to whoever waits
        self._resume.set()  # a paused run must wake up to notice it was cancelled
        if (first or again) and self.on_cancel is not None:
            self.on_cancel(reason)

    # -- inbound ------------------------------------------------------------------------------------

    async def _read_loop(self) -> None:
        while True:
            self._receiving = self._sock.recv()
            try:
                frame = await self._receiving
            except zmq.ZMQError as exc:  # the socket itself failed: nothing more can be heard from yagentd
                self.daemon_lost(f"cannot read from yagentd's socket: {exc}")
                return
            self._handle(frame)

    def _read_waiting(self) -> None:
        """Handle now, in their order, the frames waiting in the socket — what the reader would do a few loop turns
        later (~0.5 ms on a fresh worker's way to its first request, where the start message waits while the run is
        built). Only while the reader's own receive is under way: a frame it was handed and has not handled yet
        goes first. Every waiting frame is taken, not only the one wanted: ZeroMQ wakes a reader by edges, and a receive
        here may take the edge a frame left behind would have woken the reader with."""
        receiving = self._receiving
        if receiving is None or receiving.done():
            return
        while True:
            taken = self._sock.recv(flags=zmq.NOBLOCK)  # done at once: a frame, or Again when there is none
            if taken.exception() is not None:
                return  # Again; a socket that failed is the reader's to report
            self._handle(taken.result())

    def _handle(self, frame: bytes) -> None:
        self.last_heard = time.monotonic()
        try:
            msg = decode(frame)
        except ProtocolError as exc:  # malformed or over the cap: skip it, keep listening
            log.warning("ignoring a malformed frame from yagentd: %s", exc)
            return
        try:
            self._dispatch(msg)
        except Exception as exc:
            # A bug, not a bad frame: the run cannot trust its state any more, so it ends now (failed, with the
            # reason) instead of waiting out the loss timeout. The reader stays: the result's acknowledgement still
            # has to be heard.
            log.exception("run %s: handling a %s message from yagentd failed", self.run_id, msg.kind)
            self.fail(f"handling a {msg.kind} message from yagentd raised {type(exc).__name__}: {exc}")

    def _dispatch(self, msg: Message) -> None:
        if isinstance(msg, Ping):
            return
        if isinstance(msg, StartRun):
            if self._start is not None and not self._start.done():
                spec = msg.spec or self.spec
                if spec is None:  # a worker that said it had no spec must get one
                    self._start.set_exception(RemoteError("bad_request", "yagentd started the run without its spec"))
                    return
                # Applied here, in arrival order: a CONTINUE read in the same wake-up must win over it. The spec in
                # hand says how things were at the launch; the message, how they are now.
                if msg.spec.paused if msg.spec is not None else msg.paused:
                    self._resume.clear()
                if msg.lease:
                    self._keep_handed(msg.lease)
                self._start.set_result(spec)
            elif msg.lease:  # a start nobody waits for (a second one): its slot goes straight back
                self._give_back(msg.lease)
            return
        if isinstance(msg, LeaseRecall):  # another run would wait: the slot goes back unless a call took it
            self._give_back_handed(msg.id)
            return
        if isinstance(msg, RunControl):
            if msg.action == ControlAction.PAUSE:
                self._resume.clear()
            elif msg.action == ControlAction.CONTINUE:
                self._resume.set()
            elif msg.action == ControlAction.CANCEL:
                self.cancel(msg.reason or "cancelled")
            return
        if isinstance(msg, CompactNow):
            self._compaction_asked = True
        elif isinstance(msg, McpToolsChanged):  # asked for anew at the run's next step
            self.mcp_generation = max(self.mcp_generation, msg.generation)
            return
        if isinstance(msg, ResultAck):
            if self._ack is not None and not self._ack.done():
                self._ack.set_result(None)
            return
        if isinstance(msg, DelegateResult):
            self.hold_events()  # the parent goes on from here, to its next model call as a rule
            if msg.lease:  # kept here: the delegation may no longer wait for it
                self._keep_handed(msg.lease)
        if self._pending.resolve(msg):
            return
        if isinstance(msg, ErrorReply) and self._start is not None and not self._start.done():
            self._start.set_exception(RemoteError(msg.code, msg.message))
            return
        # A late reply to a request withdrawn meanwhile, or a kind that is not for workers: nothing to do.
        log.debug("run %s: ignoring a %s message nobody waits for", self.run_id, msg.kind)

    async def _watch_daemon(self, loss_timeout: float) -> None:
        """Declare the daemon lost when it has been silent (no ping) for `loss_timeout`."""
        step = max(0.05, loss_timeout / 10)
        while True:
            await asyncio.sleep(step)
            if time.monotonic() - self.last_heard > loss_timeout:
                self.daemon_lost(f"no message from yagentd for {loss_timeout:.1f}s")
                return

    def daemon_lost(self, why: str) -> None:
        if self.lost:
            return
        log.warning("run %s: daemon lost (%s); wrapping up", self.run_id, why)
        self.lost = True
        lost = DaemonLost(why)
        self._pending.fail_all(lost)
        for waiting in (self._start, self._ack):
            if waiting is not None and not waiting.done():
                waiting.set_exception(lost)
        self.cancel("interrupted")

    def fail(self, why: str) -> None:
        """End the run as failed because the channel broke: requests in flight fail at once saying why."""
        if self.failure is not None:
            return
        self.failure = why
        self._pending.fail_all(ChannelFailed(why))
        if self._start is not None and not self._start.done():
            self._start.set_exception(ChannelFailed(why))
        try:
            self.cancel("failed")
        except Exception:  # the cancel hook itself is broken: the requests failing above still end the run
            log.exception("run %s: cancelling the run after the channel failed raised too", self.run_id)


# -- making what an agent hands over fit the wire -------------------------------------------------------


def _text(value: str) -> str:
    try:
        value.encode("utf-8")
        return value
    except UnicodeEncodeError:  # lone surrogates, e.g. a file name with undecodable bytes
        pass
    try:  # surrogate escapes stand for the bytes that did not decode: one replacement character each
        return value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    except UnicodeEncodeError:
        return value.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


def _wire_safe(value: Any, depth: int = 0) -> Any:
    """A copy of `value` made of what msgpack carries and the daemon reads; anything else becomes text."""
    if value is None or isinstance(value, bool | float | bytes):
        return value
    if isinstance(value, int):
        return value if -(2**63) <= value < 2**64 else str(value)
    if isinstance(value, str):
        return _text(value)
    if depth >= _MAX_DEPTH:
        return "…"
    if isinstance(value, dict):
        return {(k if isinstance(k, bytes) else _text(k) if isinstance(k, str) else _text(str(k))):
                _wire_safe(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        items = list(value)
        if isinstance(value, set | frozenset):
            with contextlib.suppress(TypeError):
                items.sort()
        return [_wire_safe(v, depth + 1) for v in items]
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    if isinstance(value, os.PathLike):
        return _text(os.fsdecode(value))
    return _text(str(value))


def _cut(text: str) -> str:
    return text if len(text) <= OVERSIZE_KEEP_CHARS else text[:OVERSIZE_KEEP_CHARS] + "…"
