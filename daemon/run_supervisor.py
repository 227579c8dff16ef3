"""One run, supervised: its worker process from launch to reaping, and everything the worker asks for.

A run is in one `RunPhase` at a time and moves only along `run_phase.MOVES`. Worker messages are dispatched
through `_HANDLERS`, declared beside the methods that handle them. Timeouts are timers: the hello deadline
here, a delegation's idle and total timeouts in its `RunWatchdog` — nothing polls.

The worker is handed a fresh secret at launch; the first hello that proves it (`bind`) binds the run to that
connection, which is then the only one the run hears and sends to. The secret is forgotten once used, so no
later hello — a replayed one included — can bind the run again.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import sqlite3
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from yagent.ipc import event_data
from yagent.ipc.confinement import ConfinementSpec
from yagent.ipc.daemon_events import RUN_INPUT_PREVIEW, LlmSlotWait, RunFinished, RunQueued, RunStarted
from yagent.ipc.event_data import LlmCallEnd
from yagent.ipc.messages import (
    FOLLOWUP_OPTION,
    PROTOCOL_VERSION,
    ApprovedOperation,
    AskUser,
    BrowserCall,
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
    McpCancel,
    McpToolsRequest,
    ResultAck,
    RunControl,
    RunOutcome,
    RunResult,
    RunSpec,
    StartRun,
    SubagentsRequest,
    WorkerHello,
    continues_a_run,
)
from yagent.ipc.page_runs import MAX_PREFAULT_PAGES
from yagent.ipc.records import Message
from yagent.ipc.run_secret import new_run_secret, proves
from yagent.ipc.vocabulary import (
    ControlAction,
    ErrorCode,
    EventType,
    RunStatus,
    StopReason,
    TurnEndChoice,
    Unconfined,
)

from . import approved_operations
from .admission import DelegationPool
from .browser_run_requests import BrowserRunRequests
from .launcher import RunHandle
from .mcp_run_requests import McpRunRequests
from .process_identity import start_time
from .registry import TaskRow
from .run_accounting import ProcessSample, RunUsage
from .run_clock import RunClock
from .run_leases import BudgetGate, RunLeases
from .run_outcome import decide_outcome, exit_note
from .run_phase import MOVES, IllegalTransition, RunPhase
from .run_sandbox import RunSandbox
from .run_services import RunServices
from .run_watchdog import RunWatchdog
from .schedule import Timer
from .stop_escalation import escalate, kill_tree_now
from .subagent_book import SubagentBook

__all__ = ["HELLO_DEADLINE", "MAX_DELEGATION_DEPTH", "RunOwner", "RunSupervisor"]

log = logging.getLogger(__name__)

MAX_DELEGATION_DEPTH = 4
HELLO_DEADLINE = 30.0


class RunOwner(BudgetGate, Protocol):
    """What a run needs of the turn it belongs to (`turn.TurnController`); its lease requests see the spending
    limit and the project through `BudgetGate`."""

    @property
    def id(self) -> str: ...  # the task id: the topic of the run's events

    @property
    def paused(self) -> bool: ...

    @property
    def subagents(self) -> SubagentBook: ...

    @property
    def runs(self) -> Mapping[str, RunSupervisor]: ...  # the task's runs not yet gone, by id

    def delegate(self, parent: RunSupervisor, msg: DelegateRequest) -> RunSupervisor | tuple[ErrorCode, str]: ...

    @property
    def row(self) -> TaskRow: ...  # the task's registry row (its project)

    def ask(self, run: RunSupervisor, msg: AskUser) -> None: ...

    def withdraw_questions(self, run: RunSupervisor) -> None: ...

    def run_finished(self, run: RunSupervisor, outcome: RunOutcome) -> None: ...

    def run_gone(self, run: RunSupervisor) -> None: ...

    def charge(self, dollars: float) -> None: ...


Handler = Callable[["RunSupervisor", Any], None]
_HANDLERS: dict[type[Message], tuple[Handler, bool]] = {}


_LLM_CALL_END = EventType.LLM_CALL_END.value.encode()
# A hello's count of rules added ahead is only shown: capped here (a home of thousands of entries makes as many rules).
_MAX_RULES_SHOWN = 4096


def _handles(kind: type[Message], *, after_hello: bool = True) -> Callable[[Handler], Handler]:
    """Register a worker-message handler; `after_hello`: ignored from a worker that has not said hello."""
    def register(fn: Handler) -> Handler:
        _HANDLERS[kind] = (fn, after_hello)
        return fn

    return register


class RunSupervisor:
    def __init__(self, services: RunServices, turn: RunOwner, spec: RunSpec, *,
                 parent: RunSupervisor | None = None) -> None:
        self.services = services
        self.turn = turn
        self.spec = spec
        self.id = spec.run
        self.agent = spec.agent
        self.turn_number = spec.turn
        self.call_id = spec.call_id or ""
        self.parent = parent
        self.subagent = spec.subagent  # the continuable sub-agent this run is ("" for a root run)
        self.background: TurnEndChoice | None = None  # started in the background, and what its parent's end does
        self.kept = False  # its parent ended and it works on in the background (the turn no longer waits for it)
        self.reply_to: int | None = None  # the parent's DelegateRequest id
        self.pool = DelegationPool(services.settings.max_parallel_delegations)
        self.children: dict[str, RunSupervisor] = {}
        self.phase = RunPhase.QUEUED
        self.handle: RunHandle | None = None
        self.pid = 0
        self.peer: bytes | None = None  # the worker's connection (ZeroMQ identity), once its hello proved the secret
        self._secret: bytes | None = None  # the worker's until its hello: then forgotten
        self.clock: RunClock | None = None  # set at hello: the watchdog's view of the run
        self.outcome: RunOutcome | None = None
        self.stop_reason: StopReason | None = None  # why the daemon is stopping it, if it is
        self.stop_detail = ""
        self.usage = RunUsage()
        self.leases = RunLeases(self, services, turn, self.usage)
        self.last_sample: ProcessSample | None = None  # for the CPU share between two looks
        self.exited = asyncio.Event()
        self.reaped = asyncio.Event()  # its processes are gone and its .git is put back (set after `exited`)
        self._checkpointing: asyncio.Task[None] | None = None  # the checkpoint made before its worker starts
        self.sandbox = RunSandbox(spec, services)
        self.confinement: ConfinementSpec | None = None  # what its worker was confined to, for approved operations
        self.approvals = approved_operations.ApprovalLedger()  # the user's answered prompts, each good for one use
        self._hello_timer: Timer | None = None
        self._watchdog = RunWatchdog(self.id, services.scheduler, lambda: services.settings, services.clock,
                                     self._timed_out)
        self._escalation: asyncio.Task[None] | None = None
        self._early_hello: WorkerHello | None = None  # a hello that beat the launcher's report of the pid
        self._prefaulted = 0  # what its hello said its warm worker copied ahead: shown, never acted on
        self._rules_ahead = 0  # what its hello said its warm worker added to its ruleset ahead: shown only
        # Its hello said it has its spec and its agent works in model steps: a slot may go with its start and a
        # child's result (a cold worker builds after its start: a slot granted then would sit idle meanwhile).
        self._model_loop = False
        self._compaction_asked = False  # `/compact` came before the worker's hello: sent right after its start
        self._stop_on_start: tuple[StopReason, str] | None = None  # asked for while it was launching
        self._started = [services.clock(), 0.0, 0.0]  # when it was queued, its launch began, its pid was known
        self.mcp = McpRunRequests(self, services.mcp, services.scope)  # its calls to its project's MCP servers
        self.browser = BrowserRunRequests(self, services.browser, services.scope, services.home)  # and its browser

    @property
    def unconfined(self) -> Unconfined | None:
        return self.sandbox.unconfined

    # -- state --------------------------------------------------------------------------------------

    def _move(self, to: RunPhase) -> None:
        if to not in MOVES[self.phase]:
            raise IllegalTransition(f"run {self.id}: {self.phase.value} -> {to.value}")
        self.phase = to

    @property
    def ended(self) -> bool:
        return self.phase in (RunPhase.ENDED, RunPhase.GONE)

    @property
    def project_id(self) -> str:
        return self.spec.project

    @property
    def connected(self) -> bool:
        return self.clock is not None

    @property
    def waiting_on_children(self) -> bool:
        return any(not child.ended for child in self.children.values())

    def send(self, msg: Message) -> None:
        if self.connected and self.peer is not None and not self.exited.is_set():
            self.services.send_worker(self.peer, msg)

    def _now(self) -> float:
        return self.services.clock()

    # -- admission and launch ----------------------------------------------------------------------

    def admit(self) -> None:
        """Queue for a place in the parent's delegation pool (delegations), then a live-worker slot."""
        def take_worker_slot() -> None:
            self.services.slots.acquire(self.id, self._launch, delegation=self.parent is not None)

        if self.parent is not None:
            self.parent.pool.submit(self.id, take_worker_slot)
        else:
            take_worker_slot()

    def _launch(self) -> None:
        if self.phase is not RunPhase.QUEUED:  # stopped while it waited for the slot (or its checkpoint)
            self.services.slots.release(self.id)
            return
        checkpoints = self.services.checkpoints
        if self._checkpointing is None and checkpoints is not None and checkpoints.wanted(self.agent):
            # Before the worker exists, so before its first write: the sub-task can be undone whole.
            self._checkpointing = self.services.scope.spawn(f"checkpoint-{self.id}", self._checkpoint_then_launch())
            return
        self.spec.paused = self.turn.paused
        refusal = self.sandbox.refusal()
        if refusal:
            self.finish(RunOutcome(status=RunStatus.FAILED, stop_reason=StopReason.PANIC, error=refusal))
            return
        # Set before the start: the worker's hello can arrive before the launcher reports its pid.
        self._secret = new_run_secret()
        try:
            self.confinement = self.sandbox.launch_spec()
        except Exception as exc:
            self._launch_failed(exc)
            return
        self._move(RunPhase.LAUNCHING)
        self._started[1] = self._now()
        self.services.launcher.begin_launch(self.id, self.agent, self.services.workers_endpoint, self._secret,
                                            confinement=self.confinement, done=self._launched, spec=self.spec)

    async def _checkpoint_then_launch(self) -> None:
        checkpoints = self.services.checkpoints
        assert checkpoints is not None
        on = False
        try:
            on = await checkpoints.before_run(self, self.turn.row, self.turn_number)
        except Exception:  # a checkpoint that cannot be made costs the sub-task its undo, never its start
            log.exception("run %s: the checkpoint before it failed", self.id)
        self.spec.settings = dataclasses.replace(self.spec.settings, git_checkpoints=on)
        self._launch()

    def _launch_failed(self, exc: Exception) -> None:
        log.error("launching a worker for run %s failed", self.id, exc_info=exc)
        self._secret = None
        self.finish(RunOutcome(status=RunStatus.FAILED, stop_reason=StopReason.PANIC,
                               error=f"could not start a worker process: {exc}"))

    def _launched(self, result: RunHandle | Exception) -> None:
        if isinstance(result, Exception):
            if not self.ended:  # else it was given up on while it started, and its end is recorded
                self._launch_failed(result)
            self.services.slots.release(self.id)
            self._gone()
            return
        self.handle, self.pid = result, result.pid
        self._started[2] = self._now()
        asyncio.get_running_loop().add_reader(result.sentinel, self._on_process_exit)
        self.services.runs_started += 1
        if self.ended:  # given up on while it started (shutdown ran out of time): nothing may run it
            self.services.scope.spawn(f"kill-{self.id}", kill_tree_now(self.id, self.pid))
            return
        self._move(RunPhase.STARTING)
        self.services.registry.run_started(self.id, result.pid, start_time(result.pid),
                                           self.unconfined.value if self.unconfined else "")
        self._hello_timer = self.services.scheduler.after(HELLO_DEADLINE, self._hello_overdue, f"hello-{self.id}")
        early, self._early_hello = self._early_hello, None
        if early is not None:
            self._on_hello(early)
        if self._stop_on_start is not None:
            reason, detail = self._stop_on_start
            self.stop(reason, detail)

    def _hello_overdue(self) -> None:
        if self.phase is RunPhase.STARTING:
            self.stop(StopReason.PANIC, f"worker did not say hello within {HELLO_DEADLINE:.0f}s")

    # -- worker messages ---------------------------------------------------------------------------

    def bind(self, peer: bytes, proof: bytes) -> str | None:
        """Bind the run to the connection `peer` if `proof` (its hello's) proves the run's secret for it;
        otherwise say why not, changing nothing: an impostor's hello costs the real worker nothing."""
        if self.peer is not None:
            return "that is already bound to its worker's connection (a second or replayed hello)"
        if self._secret is None:
            return "that has no worker waiting to say hello"
        if not proves(self._secret, self.id, peer, proof):
            return "whose secret it does not prove"
        self.peer, self._secret = peer, None
        return None

    def receive(self, msg: Message, events: bytes | None = None) -> None:
        """Handle one message of this run's worker; `events`: an event batch's items as they arrived (relayed so)."""
        if type(msg) is EventBatch:  # the hot path: its handler needs the bytes too
            self._on_events(msg, events)
            return
        entry = _HANDLERS.get(type(msg))
        if entry is None:
            log.debug("run %s sent unexpected %s", self.id, msg.kind)
            request_id = getattr(msg, "id", None)
            if isinstance(request_id, int):
                self.send(ErrorReply(id=request_id, code=ErrorCode.NOT_A_REQUEST,
                                     message=f"{msg.kind!r} is not a request a worker may send"))
            return
        handler, after_hello = entry
        if after_hello and not self.connected:
            log.debug("run %s sent %s before hello; ignored", self.id, msg.kind)
            return
        handler(self, msg)

    @_handles(EventBatch, after_hello=False)
    def _on_events(self, msg: EventBatch, encoded: bytes | None = None) -> None:
        if self.clock is not None:
            self.clock.touch(self._now())
        # A batch whose bytes never spell the type holds no such event: no look at each of its items.
        calls = msg.events if encoded is None or _LLM_CALL_END in encoded else ()
        for item in calls:
            if type(item) is list and len(item) == 3 and item[0] == EventType.LLM_CALL_END:
                call = LlmCallEnd.read(item[2])
                if call is not None:
                    spent = self.usage.add_call(call)
                    if spent:
                        self.turn.charge(spent)
        self.services.hub.publish_batch(self.turn.id, self.id, self.agent, msg.events, encoded)

    @_handles(Heartbeat, after_hello=False)
    def _on_heartbeat(self, _msg: Heartbeat) -> None:
        if self.clock is not None:
            self.clock.touch(self._now())

    @_handles(WorkerHello, after_hello=False)
    def _on_hello(self, msg: WorkerHello) -> None:
        if msg.version != PROTOCOL_VERSION:
            assert self.peer is not None  # the table hands a run only its bound connection's frames
            self.services.send_worker(self.peer, ErrorReply(
                id=0, code=ErrorCode.PROTOCOL_MISMATCH,
                message=f"worker speaks protocol {msg.version}, daemon {PROTOCOL_VERSION}; restart yagentd"))
            return
        if self.phase is RunPhase.LAUNCHING and not self.connected:
            self._early_hello = msg
            return
        if self.connected or self.phase not in (RunPhase.STARTING, RunPhase.STOPPING):
            return
        if self._hello_timer is not None:
            self._hello_timer.cancel()
        self._prefaulted = min(max(msg.prefaulted, 0), MAX_PREFAULT_PAGES)
        self._rules_ahead = min(max(msg.rules_ahead, 0), _MAX_RULES_SHOWN)
        self._model_loop = msg.model_loop and msg.spec_in_hand
        now = self._now()
        self.clock = RunClock(now)
        if self.turn.paused:
            self.clock.freeze("paused", now)
        self.spec.paused = self.turn.paused
        # Not the whole spec again (its provider keys included) to a worker that has it: only whether it is paused.
        # Such a worker has built its run while the hello travelled and calls the model first: that call takes a slot
        # granted with the start, when one is free, and need not ask.
        lease = self.leases.grant_ahead() if (self._model_loop and not self.spec.paused
                                              and self.phase is RunPhase.STARTING) else 0
        self.send(StartRun(spec=None if msg.spec_in_hand else self.spec, paused=self.spec.paused, lease=lease))
        if self._compaction_asked:
            self._compaction_asked = False
            self.send(CompactNow())
        if self.phase is RunPhase.STOPPING:
            assert self.stop_reason is not None
            self.send(RunControl(action=ControlAction.CANCEL, reason=self.stop_reason.value))
        else:
            self._move(RunPhase.RUNNING)
            self._arm_watchdog()
        self.services.registry.run_running(self.id)
        self.services.publish(self.turn.id, RunStarted(
            agent=self.agent, parent=self.parent.id if self.parent else None, call_id=self.call_id,
            pid=self.pid, depth=self.spec.depth, input=self.spec.input[:RUN_INPUT_PREVIEW],
            unconfined=self.unconfined.value if self.unconfined else "", subagent=self.subagent,
            **self._start_times(now)), self)

    def _start_times(self, hello: float) -> dict[str, Any]:
        queued, launched, forked = self._started
        return {"queued_ms": round((launched - queued) * 1000, 2), "forked_ms": round((forked - launched) * 1000, 2),
                "hello_ms": round((hello - launched) * 1000, 2), "warm": bool(self.handle and self.handle.warm),
                "prefaulted": self._prefaulted, "rules_ahead": self._rules_ahead}

    @_handles(LeaseRequest)
    def _on_lease_request(self, msg: LeaseRequest) -> None:
        if msg.id <= 0:  # a worker's own requests count up from 1; the ids below are the daemon's (`grant_ahead`)
            self.send(ErrorReply(id=msg.id, code=ErrorCode.BAD_REQUEST,
                                 message=f"lease request id {msg.id} is not a worker's: they count up from 1"))
            return
        assert self.clock is not None
        self.clock.freeze("lease", self._now())
        self.leases.request(msg.id)

    @_handles(LeaseRelease)
    def _on_lease_release(self, msg: LeaseRelease) -> None:
        # True: withdrawn while it waited, so the run is no longer waiting on it.
        if self.leases.release(msg.id, unused=msg.unused):
            self._unfreeze("lease")

    def lease_granted(self, lease_id: int) -> None:
        self.send(LeaseGrant(id=lease_id))  # first: the freed slot is idle until the worker hears
        if self.clock is not None:
            self._unfreeze("lease")

    def recall_lease(self, lease_id: int) -> None:
        if not self.ended:
            self.send(LeaseRecall(id=lease_id))

    def slot_wait_changed(self, *, waiting: bool) -> None:
        self.services.publish(self.turn.id, LlmSlotWait(waiting=waiting, limit=self.services.leases.limit), self)

    @_handles(DelegateRequest)
    def _on_delegate(self, msg: DelegateRequest) -> None:
        refusal = self._refuse_delegation(msg)
        if refusal is not None:
            code, why = refusal
            self.send(ErrorReply(id=msg.id, code=code, message=why))
            return
        try:
            placed = self.turn.delegate(self, msg)
        except sqlite3.DatabaseError as exc:  # locked, full or damaged: the parent must hear back, or it waits
            log.error("cannot record a delegation of run %s in %s: %s", self.id, self.services.registry.path, exc)
            self.send(ErrorReply(id=msg.id, code=ErrorCode.REGISTRY_UNAVAILABLE,
                                 message=f"yagentd cannot write its task registry ({exc}); try the delegation "
                                         "again later"))
            return
        if isinstance(placed, tuple):
            code, why = placed
            self.send(ErrorReply(id=msg.id, code=code, message=why))
            return
        child = placed
        if msg.background is None:
            child.reply_to = msg.id
            assert self.clock is not None
            self.clock.freeze("delegation", self._now())
        else:  # create-and-dispatch: the parent goes on; it learns of the end through `SubagentsRequest`
            child.background = msg.background
            self.send(DelegateAccepted(id=msg.id, run=child.id, subagent=child.subagent))
        self.services.publish(self.turn.id, RunQueued(
            agent=child.agent, parent=self.id, call_id=msg.call_id, run=child.id, subagent=child.subagent,
            followup=bool(msg.subagent or msg.reuse_key) and child.continues_subagent, background=msg.background),
            self)
        child.admit()

    def _refuse_delegation(self, msg: DelegateRequest) -> tuple[ErrorCode, str] | None:
        if not (msg.agent or msg.subagent) or not msg.task.strip():
            return (ErrorCode.BAD_REQUEST,
                    "delegate needs an agent name (or a sub-agent to follow up) and a non-empty task")
        if self.spec.depth + 1 > MAX_DELEGATION_DEPTH:
            return (ErrorCode.TOO_DEEP,
                    f"delegation depth would exceed {MAX_DELEGATION_DEPTH}; do the work here instead")
        if self.services.is_shutting_down() or self.phase is not RunPhase.RUNNING:
            return ErrorCode.STOPPING, "the run is being stopped"
        if msg.replay and not continues_a_run(self.spec.options):
            # A replay hands the child what an interrupted run wrote: only a run that continues one may ask.
            return (ErrorCode.BAD_REQUEST, "a replay of an interrupted delegation is asked for only by a run that "
                                           "resumes a stopped turn or replays a delegation; delegate anew instead")
        if msg.background is not None and self.parent is not None:
            # The daemon's own line behind the tools' two: background work belongs to the task's root agent.
            return (ErrorCode.BAD_REQUEST, "only the task's root agent starts sub-agents in the background; "
                                           "delegate and wait for the result instead")
        if msg.replay and (msg.subagent or msg.background is not None):
            return ErrorCode.BAD_REQUEST, "a replay is neither a follow-up nor a background start"
        return None

    @property
    def continues_subagent(self) -> bool:
        """The run is a follow-up: it goes on with its sub-agent's conversation if its configuration matches."""
        return FOLLOWUP_OPTION in self.spec.options

    @_handles(SubagentsRequest)
    def _on_subagents(self, msg: SubagentsRequest) -> None:
        try:
            self.turn.subagents.ask(self, msg, stop=self._stop_child)
        except sqlite3.DatabaseError as exc:
            self.send(ErrorReply(id=msg.id, code=ErrorCode.REGISTRY_UNAVAILABLE,
                                 message=f"yagentd cannot read its task registry ({exc}); ask again later"))

    def _stop_child(self, run_id: str) -> None:
        """Stop a sub-agent's run its agent asked to cancel; a run that has gone needs nothing (that is success)."""
        run = self.turn.runs.get(run_id)
        if run is not None and not run.ended:
            run.stop(StopReason.CANCELLED, f"cancelled by {self.agent} ({self.id})")

    @_handles(AskUser)
    def _on_ask_user(self, msg: AskUser) -> None:
        assert self.clock is not None
        self.clock.freeze("user", self._now())
        self.turn.ask(self, msg)

    @_handles(ApprovedOperation)
    def _on_approved_operation(self, msg: ApprovedOperation) -> None:
        approved_operations.carry_out(self, msg)

    @_handles(CheckpointCreate)
    def _on_checkpoint_create(self, msg: CheckpointCreate) -> None:
        self._checkpoint_request(msg)

    @_handles(CheckpointList)
    def _on_checkpoint_list(self, msg: CheckpointList) -> None:
        self._checkpoint_request(msg)

    @_handles(CheckpointRollback)
    def _on_checkpoint_rollback(self, msg: CheckpointRollback) -> None:
        self._checkpoint_request(msg)

    @_handles(CheckpointNote)
    def _on_checkpoint_note(self, msg: CheckpointNote) -> None:
        checkpoints = self.services.checkpoints
        if checkpoints is None:
            self.send(CheckpointReply(id=msg.id, content="this yagentd makes no git checkpoints; nothing to keep"))
            return
        self.wait_began("checkpoint")

        def answer(reply: CheckpointReply) -> None:
            self.wait_ended("checkpoint")
            self.send(reply)

        checkpoints.note(self, self.turn.row, self.turn_number, msg, answer)

    def _checkpoint_request(self, msg: CheckpointCreate | CheckpointList | CheckpointRollback) -> None:
        checkpoints = self.services.checkpoints
        if checkpoints is None:
            self.send(CheckpointReply(id=msg.id, is_error=True, content="this yagentd makes no git checkpoints"))
            return
        self.wait_began("checkpoint")  # the git work is not the run's idleness

        def answer(reply: CheckpointReply) -> None:
            self.wait_ended("checkpoint")
            self.send(reply)

        checkpoints.agent_request(self, self.turn.row, self.turn_number, msg, answer)

    @_handles(McpToolsRequest)
    def _on_mcp_tools(self, msg: McpToolsRequest) -> None:
        self.mcp.list_tools(msg)

    @_handles(McpCall)
    def _on_mcp_call(self, msg: McpCall) -> None:
        self.mcp.call(msg)

    @_handles(McpCancel)
    def _on_mcp_cancel(self, msg: McpCancel) -> None:
        self.mcp.cancel(msg)

    @_handles(BrowserCall)
    def _on_browser_call(self, msg: BrowserCall) -> None:
        self.browser.call(msg)

    @_handles(BrowserCancel)
    def _on_browser_cancel(self, msg: BrowserCancel) -> None:
        self.browser.cancel(msg)

    def time_left(self) -> float:
        """Seconds before the run's own total timeout stops it (a delegation's); 0 when it has none."""
        total = self.services.settings.delegate_total_timeout
        if self.parent is None or self.clock is None or total <= 0:
            return 0.0
        return max(0.001, total - self.clock.total_for(self._now()))

    def wait_began(self, reason: str) -> None:
        """The run waits on someone else (an MCP server): its idle clock stops until `wait_ended`."""
        if self.clock is not None and not self.ended:
            self.clock.freeze(reason, self._now())
            self._arm_watchdog()

    def wait_ended(self, reason: str) -> None:
        if self.clock is not None and self.clock.frozen_by(reason):
            self._unfreeze(reason)

    def answered(self) -> None:
        """A question of this run was answered: waiting for the user no longer stops its idle clock."""
        if self.clock is not None:
            self._unfreeze("user")

    @_handles(RunResult)
    def _on_result(self, msg: RunResult) -> None:
        self.send(ResultAck())
        if self.ended:
            return
        self.finish(self._outcome(msg.outcome))
        if self.handle is not None and self.handle.learning and msg.page_runs:  # only a run that was asked
            self.services.launcher.learn_pages(msg.page_runs, msg.page_parent, run=self.id)
        if not self.exited.is_set():
            grace = max(self.services.settings.stop_grace, 1.0) * 3
            self.services.scheduler.after(grace, lambda: self._linger(grace), f"reap-{self.id}")

    def _linger(self, grace: float) -> None:
        if not self.exited.is_set():
            log.warning("run %s reported its result but did not exit within %.0fs; killing it", self.id, grace)
            self._start_escalation()

    # -- the watchdog --------------------------------------------------------------------------------

    def _unfreeze(self, reason: str) -> None:
        assert self.clock is not None
        self.clock.unfreeze(reason, self._now())
        self._arm_watchdog()

    def rearm(self) -> None:
        """The timeouts may have changed (a reloaded configuration): schedule the next look anew."""
        self._arm_watchdog()

    def _arm_watchdog(self) -> None:
        """Delegations have their own idle and total timeouts; a root run has the task's (`TurnController`)."""
        if self.clock is not None and self.parent is not None and self.phase is RunPhase.RUNNING:
            self._watchdog.arm(self.clock)
        else:
            self._watchdog.cancel()

    def _timed_out(self, reason: StopReason, detail: str) -> None:
        if self.phase is RunPhase.RUNNING:
            self.stop(reason, detail)

    # -- pause and continue -------------------------------------------------------------------------

    def pause(self) -> None:
        if self.clock is not None and not self.ended:
            self.clock.freeze("paused", self._now())
            self._arm_watchdog()
            self.send(RunControl(action=ControlAction.PAUSE))

    def resume(self) -> None:
        if self.clock is not None and not self.ended:
            self._unfreeze("paused")
            self.send(RunControl(action=ControlAction.CONTINUE))

    # -- compaction ---------------------------------------------------------------------------------

    def request_compaction(self) -> bool:
        """Ask the worker to compact its context before its next model call; False when the run is past that
        (ended or being stopped)."""
        if self.ended or self.phase is RunPhase.STOPPING or self.phase is RunPhase.GONE:
            return False
        if self.connected:
            self.send(CompactNow())
        else:
            self._compaction_asked = True
        return True

    # -- stopping -----------------------------------------------------------------------------------

    def stop(self, reason: StopReason, detail: str) -> None:
        """Stop the run and its descendants: cancel → grace → SIGTERM → grace → SIGKILL of the tree."""
        if self.phase is RunPhase.GONE or self._escalation is not None:
            return
        # A child cut short by the daemon stopping is interrupted like its parent (it resumes with the task),
        # never cancelled: the parent's model must not read an interruption as a failed delegation.
        passed_on = StopReason.INTERRUPTED if reason is StopReason.INTERRUPTED else StopReason.CANCELLED
        for child in list(self.children.values()):
            child.stop(passed_on, f"its parent run {self.id} was stopped ({reason.value})")
        if self.phase is RunPhase.QUEUED:  # there is no process to stop
            self.stop_reason, self.stop_detail = reason, detail
            self.finish(self._outcome(None))
            return
        if self.phase is RunPhase.LAUNCHING:  # no pid to signal yet: stop it the moment there is one
            self._stop_on_start = (reason, detail)
            return
        if self.phase in (RunPhase.STARTING, RunPhase.RUNNING):
            self.stop_reason, self.stop_detail = reason, detail
            self._move(RunPhase.STOPPING)
            self._watchdog.cancel()
        self.send(RunControl(action=ControlAction.CANCEL, reason=reason.value))
        self._start_escalation()

    def _start_escalation(self) -> None:
        if self._escalation is None and not self.exited.is_set():
            self._escalation = self.services.scope.spawn(
                f"stop-{self.id}", escalate(self.id, self.pid, self.exited, self.services.settings.stop_grace))

    async def kill_now(self, why: str) -> None:
        """SIGKILL the whole tree at once (shutdown ran out of time); ends the run if it had not ended."""
        log.warning("run %s did not exit in time; killing it", self.id)
        await kill_tree_now(self.id, self.pid or None)
        if not self.ended:
            self.finish(self._outcome(None, exit_note=why))

    # -- the end --------------------------------------------------------------------------------------

    def _outcome(self, reported: RunOutcome | None, exit_note: str = "") -> RunOutcome:
        return decide_outcome(self.id, self.agent, reported, self.stop_reason, self.stop_detail, exit_note)

    def finish(self, outcome: RunOutcome) -> None:
        """Record the run's end and hand its outcome to whoever waits for it."""
        if self.ended:
            return
        outcome = dataclasses.replace(outcome, run=self.id, agent=self.agent)
        book = self.turn.subagents
        outcome = dataclasses.replace(outcome, subagent=book.ended(self.id, outcome) or self.subagent)
        self.subagent = outcome.subagent
        launching = self.phase is RunPhase.LAUNCHING  # its start reports later, and frees what it holds then
        self._move(RunPhase.ENDED)
        self.outcome = outcome
        self._watchdog.cancel()
        if self._hello_timer is not None:
            self._hello_timer.cancel()
        services = self.services
        services.leases.drop_run(self.id)
        self.mcp.close()  # its MCP calls are cancelled at their servers
        book.release_run(self)
        self.browser.close()  # its browser calls are withdrawn and its tabs closed
        for child in list(self.children.values()):
            if child.ended:
                continue
            if child.background in (TurnEndChoice.WAIT, TurnEndChoice.KEEP):
                # Never forgotten: waited for by the turn, or kept working after it (the task shows it).
                child.kept = child.background is TurnEndChoice.KEEP
                continue
            child.stop(StopReason.CANCELLED, f"its parent run {self.id} ended")
        self.turn.withdraw_questions(self)
        if services.checkpoints is not None:  # before the parent hears: what is asked of the project next waits
            services.checkpoints.after_run(self, self.turn.row, self.turn_number)
        # The parent hears first: its slot is free and its checkpoint taken, and what follows is this daemon's own
        # record (nothing it reads in between: the parent's next message is read after this method has returned).
        if self.parent is not None:
            self.parent.child_finished(self, outcome)
        try:
            services.registry.finish_run(self.id, outcome.status, outcome.stop_reason, outcome.output, outcome.error,
                                         self.usage, outcome.cpu_seconds)
        except Exception:  # a full disk must not also strand the slots and the followers
            log.exception("recording the end of run %s failed", self.id)
        services.publish(self.turn.id, RunFinished(
            status=outcome.status, stop_reason=outcome.stop_reason, error=outcome.error, output=outcome.output,
            parent=self.parent.id if self.parent else None, call_id=self.call_id,
            cpu_seconds=outcome.cpu_seconds), self)
        self.turn.run_finished(self, outcome)
        if self.handle is None and not launching:  # never launched: its queue place is all there is to free
            services.slots.release(self.id)
            self._gone()

    def child_finished(self, child: RunSupervisor, outcome: RunOutcome) -> None:
        self.pool.done(child.id)
        if self.clock is not None and child.background is None:
            self._unfreeze("delegation")
        if not self.ended and child.reply_to is not None:
            self.send(DelegateResult(id=child.reply_to, outcome=outcome, lease=self._lease_with_result()))

    def _lease_with_result(self) -> int:
        """A slot for the model call a parent that works in model steps makes once its last running child has
        answered, or 0: it is paused or being stopped, or other children of its step still work (the call waits for
        them). Other tools of its step may still run meanwhile: the slot is only lent until the call takes it,
        recalled if another run waits. A parent on a cold worker never gets one (its hello could not say what its
        agent is: it had no spec yet)."""
        if not self._model_loop or self.phase is not RunPhase.RUNNING or self.turn.paused:
            return 0
        if any(not c.ended and c.background is None for c in self.children.values()):
            return 0
        return self.leases.grant_ahead()

    def _on_process_exit(self) -> None:
        assert self.handle is not None
        asyncio.get_running_loop().remove_reader(self.handle.sentinel)
        code = self.handle.exitcode()
        self.handle.close()
        if self._relaunch_cold(code):
            return
        self.exited.set()
        services = self.services
        services.slots.release(self.id)
        services.leases.drop_run(self.id)
        self.mcp.close()
        self.browser.close()
        if not self.ended:
            self.finish(self._outcome(None, exit_note=exit_note(code)))
        # Tool processes that left the worker's group (setsid, a daemonising command) outlive even a clean
        # exit; they still carry the run id in their environment, so sweep for them after every run.
        services.scope.spawn(f"reap-{self.id}", self._reap())
        self._gone()

    def _relaunch_cold(self, code: int | None) -> bool:
        """A warm worker that died before its hello (killed while it waited, or as it was handed the run) is
        replaced by a cold one, once; the run is none the wiser. True when that was done."""
        if not (self.handle is not None and self.handle.warm and self.phase is RunPhase.STARTING
                and self.peer is None and self._stop_on_start is None):
            return False
        log.warning("run %s: its warm worker %d exited before its hello (%s); starting a cold one", self.id,
                    self.pid, exit_note(code))
        if self._hello_timer is not None:
            self._hello_timer.cancel()
        self.handle, self.pid = None, 0
        # A new secret: a hello the lost worker may still have in flight proves nothing for its successor.
        self._secret = new_run_secret()
        self._move(RunPhase.LAUNCHING)
        self.services.launcher.begin_launch(self.id, self.agent, self.services.workers_endpoint, self._secret,
                                            confinement=self.confinement, done=self._launched, cold=True)
        return True

    async def _reap(self) -> None:
        try:
            await kill_tree_now(self.id, None)
            reverted = await self.sandbox.put_back()  # nothing of the run is left to race it
        finally:
            self.reaped.set()
        if reverted:
            note = (f"run {self.id} ({self.agent}) changed {', '.join(reverted)}; put back as it was before the run "
                    "(a hook or git setting planted there would run unconfined the next time you use git)")
            log.warning("%s in %s", note, self.spec.project_root)
            self.services.hub.publish(self.turn.id, self.id, self.agent, EventType.LOG.value,
                                      event_data.log("warning", note))

    def _gone(self) -> None:
        if self.handle is None:  # never started: there is nothing to reap
            self.reaped.set()
        self._secret = None
        self._move(RunPhase.GONE)
        self.exited.set()
        self.turn.run_gone(self)
