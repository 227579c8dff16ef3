"""The reuse table of one task: its continuable sub-agents, which agent owns each, what becomes of a follow-up,
and the waits of the runs that asked for their results.

A sub-agent is owned by the agent that delegated to it: the task's root agent ("" — every turn's Director), or
another sub-agent (a Repo sub-agent owns the DevOps sub-agents it delegated to). A run sees, continues and waits
for its owner's sub-agents only; any other id, another task's included, is unknown to it. The daemon never reads
a conversation: a follow-up names the sub-agent's newest run, and the worker decides from that run's rollout and
its own configuration signature whether it continues it (`RunOutcome.continued`) — then reports back here.

Every state this keeps has a bound and a release path:
- rows: at most `MAX_SUBAGENTS_PER_TASK` per task; past it the oldest that are not working are forgotten (also
  in state.db);
- background runs: at most `MAX_BACKGROUND_PER_RUN` working at once per delegating run, more are refused;
- waits: at most `MAX_WAITS_PER_RUN` per run, each released when answered, at its deadline, or when its run
  ends (`release_run`, idempotent);
- outcomes: the newest run's only, per sub-agent, texts cut to `OUTCOME_TEXT_BUDGET`.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from yagent.ipc.messages import (
    FOLLOWUP_OPTION,
    DelegateRequest,
    ErrorReply,
    RunOutcome,
    SubagentInfo,
    SubagentsReply,
    SubagentsRequest,
)
from yagent.ipc.records import Message
from yagent.ipc.vocabulary import ErrorCode, RunStatus, StopReason, SubagentState, TurnEndChoice

from .registry import Registry, SubagentRow, new_subagent_id
from .schedule import Scheduler, Timer

__all__ = ["MAX_BACKGROUND_PER_RUN", "MAX_SUBAGENTS_PER_TASK", "MAX_WAITS_PER_RUN", "MAX_WAIT_SECONDS",
           "OUTCOME_TEXT_BUDGET", "Placement", "SubagentBook", "WaitingRun"]

log = logging.getLogger(__name__)

MAX_SUBAGENTS_PER_TASK = 256
MAX_BACKGROUND_PER_RUN = 8
MAX_WAITS_PER_RUN = 4
MAX_WAIT_SECONDS = 24 * 3600.0  # a longer deadline is this one: the task's own limits end it sooner anyway
OUTCOME_TEXT_BUDGET = 16_000  # of a result's output and error, per sub-agent, in a reply
# Results one reply (a wait's) or one turn's start carries at most, so either stays far below the frame cap; a status
# carries none (its conclusions say enough), and results past these are handed over by a later wait or turn.
MAX_OUTCOMES_PER_REPLY = 64
MAX_RESULTS_PER_TURN = 16
_HANDOFF_BUDGET = 12_000
_TASK_PREVIEW = 200


class WaitingRun(Protocol):
    """What the book needs of a run that asks (`run_supervisor.RunSupervisor`)."""

    @property
    def id(self) -> str: ...

    @property
    def subagent(self) -> str: ...

    @property
    def ended(self) -> bool: ...

    def send(self, msg: Message) -> None: ...

    def wait_began(self, reason: str) -> None: ...

    def wait_ended(self, reason: str) -> None: ...


@dataclass(slots=True)
class Placement:
    """Where a delegation goes: which sub-agent, what agent kind, and the child's options."""

    row: SubagentRow
    agent: str
    options: dict[str, Any] = field(default_factory=dict)
    followup: bool = False


@dataclass(slots=True)
class _Placed:
    """A live run of a sub-agent: which, the run its conversation was in before, and how it was asked."""

    subagent: str
    previous_run: str
    followup: bool
    fresh_if_changed: bool


@dataclass(slots=True)
class _Wait:
    run: WaitingRun
    request_id: int
    ids: list[str]
    timer: Timer | None = None


class SubagentBook:
    def __init__(self, registry: Registry, task_id: str, scheduler: Scheduler,
                 clock: Callable[[], float] = time.time) -> None:
        self._registry = registry
        self.task_id = task_id
        self._scheduler = scheduler
        self._clock = clock
        self._rows: dict[str, SubagentRow] | None = None  # loaded from state.db on first use
        self._outcomes: dict[str, RunOutcome] = {}  # sub-agent id -> its newest run's outcome, cut
        self._runs: dict[str, _Placed] = {}  # live runs of sub-agents: released when each ends
        self._waits: list[_Wait] = []

    # -- the table --------------------------------------------------------------------------------------

    @property
    def rows(self) -> dict[str, SubagentRow]:
        if self._rows is None:
            self._rows = {row.id: row for row in self._registry.subagents_of(self.task_id)}
        return self._rows

    def owned_by(self, owner: str) -> list[SubagentRow]:
        return [row for row in self.rows.values() if row.owner == owner]

    def _write(self, row: SubagentRow) -> None:
        row.updated_at = self._clock()
        self._registry.update_subagent(row)

    def _add(self, row: SubagentRow) -> None:
        self._make_room()
        self._registry.add_subagent(row)  # may raise sqlite3.DatabaseError: the caller refuses the delegation
        self.rows[row.id] = row

    def _make_room(self) -> None:
        """Past the cap, the sub-agents untouched longest that are not working are forgotten, here and on disk."""
        excess = len(self.rows) + 1 - MAX_SUBAGENTS_PER_TASK
        if excess <= 0:
            return
        idle = sorted((r for r in self.rows.values() if r.state != SubagentState.WORKING),
                      key=lambda r: (r.updated_at, r.id))[:excess]
        for row in idle:
            del self.rows[row.id]
            self._outcomes.pop(row.id, None)
        try:
            self._registry.forget_subagents(r.id for r in idle)
        except sqlite3.DatabaseError as exc:  # forgotten here anyway: the bound holds in memory
            log.warning("cannot forget %d sub-agents of task %s in state.db: %s", len(idle), self.task_id, exc)

    # -- placing a delegation ---------------------------------------------------------------------------

    def place(self, parent: WaitingRun, msg: DelegateRequest, background_working: int
              ) -> Placement | tuple[ErrorCode, str]:
        """The sub-agent a delegation of `parent` goes to (a follow-up, the one kept under a reuse key, or a new
        one), or why it is refused. `background_working`: the parent's background children still working."""
        owner = parent.subagent
        if msg.background is not None and background_working >= MAX_BACKGROUND_PER_RUN:
            return (ErrorCode.TOO_MANY, f"{background_working} sub-agents already work in the background for this "
                                        f"run (at most {MAX_BACKGROUND_PER_RUN}); wait_agents for some of them "
                                        "first")
        if msg.subagent:
            row = self.rows.get(msg.subagent)
            if row is None or row.owner != owner:
                return ErrorCode.UNKNOWN_SUBAGENT, _unknown(msg.subagent)
            refusal = _not_continuable(row)
            if refusal is not None:
                return refusal
            return self._followup(row, fresh_if_changed=False)
        if msg.reuse_key:
            kept = [r for r in self.owned_by(owner) if r.reuse_key == msg.reuse_key
                    and r.state != SubagentState.RETIRED and r.agent == msg.agent]
            if kept:
                row = kept[-1]
                refusal = _not_continuable(row)
                if refusal is not None:
                    return refusal
                return self._followup(row, fresh_if_changed=True)
        now = self._clock()
        row = SubagentRow(id=new_subagent_id(), task_id=self.task_id, owner=owner, agent=msg.agent,
                          reuse_key=msg.reuse_key, signature="", state=SubagentState.WORKING.value, last_run="",
                          task=_preview(msg.task), conclusion="", handoff="", background="", unread=False,
                          interrupted=False, created_at=now, updated_at=now)
        self._add(row)
        return Placement(row=row, agent=row.agent)

    def _followup(self, row: SubagentRow, *, fresh_if_changed: bool) -> Placement:
        option = {"subagent": row.id, "run": row.last_run, "fresh_if_changed": fresh_if_changed}
        return Placement(row=row, agent=row.agent, options={FOLLOWUP_OPTION: option}, followup=True)

    def started(self, placement: Placement, run_id: str, background: TurnEndChoice | None) -> None:
        """The placed delegation's run exists: it is the sub-agent's newest run, working."""
        row = placement.row
        fresh_if_changed = bool(placement.options.get(FOLLOWUP_OPTION, {}).get("fresh_if_changed"))
        self._runs[run_id] = _Placed(row.id, row.last_run, placement.followup, fresh_if_changed)
        row.last_run = run_id
        row.state = SubagentState.WORKING.value
        row.background = background.value if background is not None else ""
        row.unread = False
        row.interrupted = False
        self._outcomes.pop(row.id, None)
        self._write(row)
        self._answer_waits()

    # -- a run's end ------------------------------------------------------------------------------------

    def ended(self, run_id: str, outcome: RunOutcome) -> str:
        """A sub-agent's run ended with `outcome`: its row follows, and waits that were for it may be answered.
        Returns the sub-agent the run turned out to be (a new one when a workflow node's configuration changed),
        "" for a run that is none's."""
        placed = self._runs.pop(run_id, None)
        row = self.rows.get(placed.subagent) if placed is not None else None
        if placed is None or row is None:
            return ""
        decided = outcome.signature != ""  # the worker got as far as comparing configurations
        if placed.followup and not outcome.continued:
            if not decided:
                # Stopped before it could tell (killed, cancelled while starting): the conversation is still
                # the one the previous run left, and the next follow-up starts from there.
                row.last_run = placed.previous_run or row.last_run
            elif placed.fresh_if_changed:
                row = self._replace(row, run_id)  # a node whose configuration changed: a new sub-agent for it
            else:
                row.state = SubagentState.RETIRED.value  # it said why it cannot be continued: never again
        if decided and row.state != SubagentState.RETIRED:
            row.signature = outcome.signature
        self._finish_row(row, outcome)
        return row.id

    def _replace(self, old: SubagentRow, run_id: str) -> SubagentRow:
        old.state, old.last_run = SubagentState.RETIRED.value, ""
        self._write(old)
        now = self._clock()
        row = SubagentRow(id=new_subagent_id(), task_id=self.task_id, owner=old.owner, agent=old.agent,
                          reuse_key=old.reuse_key, signature="", state=SubagentState.WORKING.value, last_run=run_id,
                          task=old.task, conclusion="", handoff="", background=old.background, unread=False,
                          interrupted=False, created_at=now, updated_at=now)
        try:
            self._add(row)
        except sqlite3.DatabaseError as exc:  # kept here: the follow-ups of this daemon's life still find it
            log.warning("cannot record a new sub-agent of task %s in state.db: %s", self.task_id, exc)
            self.rows[row.id] = row
        return row

    def _finish_row(self, row: SubagentRow, outcome: RunOutcome) -> None:
        if row.state != SubagentState.RETIRED:
            row.state = (SubagentState.IDLE if outcome.status == RunStatus.DONE else SubagentState.STOPPED).value
        row.conclusion = _conclusion(outcome)
        row.handoff = _bounded_json(outcome.handoff)
        row.interrupted = bool(row.background) and outcome.status == RunStatus.INTERRUPTED
        row.unread = bool(row.background)
        self._outcomes[row.id] = _cut(outcome)
        self._write(row)
        self._answer_waits()

    def background_working(self, runs: list[str]) -> int:
        """How many of the sub-agents whose newest run is one of `runs` work in the background."""
        wanted = set(runs)
        return sum(1 for r in self.rows.values()
                   if r.last_run in wanted and r.background and r.state == SubagentState.WORKING)

    # -- what a run asks: status and waits --------------------------------------------------------------

    def ask(self, run: WaitingRun, msg: SubagentsRequest, stop: Callable[[str], None] | None = None) -> None:
        """Answer `msg` now, or once none of the sub-agents it waits for is working (or at its deadline); with
        `cancel`, `stop(run_id)` stops the newest run of each named one that works first."""
        refusal = self._refuse(run, msg)
        if refusal is not None:
            code, why = refusal
            run.send(ErrorReply(id=msg.id, code=code, message=why))
            return
        ids = msg.subagents or [r.id for r in self.owned_by(run.subagent)]
        if msg.cancel:
            self._cancel(ids, stop)
        if not msg.wait:
            run.send(SubagentsReply(id=msg.id, subagents=self._infos(ids, outcomes=False)))
            return
        if not msg.subagents:  # all of them: those working in the background
            ids = [r.id for r in self.owned_by(run.subagent)
                   if r.background and r.state == SubagentState.WORKING]
        wait = _Wait(run, msg.id, ids)
        if not self._working(ids):
            self._reply(wait, timed_out=False)
            return
        if msg.timeout > 0:
            wait.timer = self._scheduler.after(min(msg.timeout, MAX_WAIT_SECONDS), lambda: self._expire(wait),
                                               f"subagent-wait-{run.id}-{msg.id}")
        self._waits.append(wait)
        run.wait_began("subagents")

    def _cancel(self, ids: list[str], stop: Callable[[str], None] | None) -> None:
        """Stop each named sub-agent that works; one that has ended is left as it is (that is success), and a stop
        that fails is logged without keeping the others from being stopped."""
        for subagent in ids:
            row = self.rows.get(subagent)
            if row is None or row.state != SubagentState.WORKING or stop is None:
                continue
            try:
                stop(row.last_run)
            except Exception:
                log.exception("stopping sub-agent %s (run %s) of task %s failed", subagent, row.last_run,
                              self.task_id)

    def _refuse(self, run: WaitingRun, msg: SubagentsRequest) -> tuple[ErrorCode, str] | None:
        if len(msg.subagents) > MAX_SUBAGENTS_PER_TASK:
            return ErrorCode.TOO_MANY, f"name at most {MAX_SUBAGENTS_PER_TASK} sub-agents at once"
        for subagent in msg.subagents:
            row = self.rows.get(subagent)
            if row is None or row.owner != run.subagent:
                return ErrorCode.UNKNOWN_SUBAGENT, _unknown(subagent)
        if msg.cancel and msg.wait:
            return ErrorCode.BAD_REQUEST, "cancel, then wait, in two requests"
        if msg.wait:
            if not math.isfinite(msg.timeout) or msg.timeout < 0:
                return (ErrorCode.BAD_REQUEST, f"a wait's timeout must be a finite number of seconds, 0 or more "
                                               f"(got {msg.timeout!r}); 0 waits with no deadline of its own")
            if sum(1 for w in self._waits if w.run is run) >= MAX_WAITS_PER_RUN:
                return (ErrorCode.TOO_MANY, f"this run already waits {MAX_WAITS_PER_RUN} times; let those end "
                                            "first")
        return None

    def _working(self, ids: list[str]) -> bool:
        return any((row := self.rows.get(i)) is not None and row.state == SubagentState.WORKING for i in ids)

    def _answer_waits(self) -> None:
        for wait in [w for w in self._waits if not self._working(w.ids)]:
            self._reply(wait, timed_out=False)

    def _expire(self, wait: _Wait) -> None:
        if wait in self._waits:
            self._reply(wait, timed_out=True)

    def _reply(self, wait: _Wait, *, timed_out: bool) -> None:
        if wait in self._waits:
            self._waits.remove(wait)
            wait.run.wait_ended("subagents")
        if wait.timer is not None:
            wait.timer.cancel()
        if not wait.run.ended:
            wait.run.send(SubagentsReply(id=wait.request_id, subagents=self._infos(wait.ids, outcomes=True),
                                         timed_out=timed_out))

    def release_run(self, run: WaitingRun) -> None:
        """The run ended: its waits go (idempotent; one that fails to cancel never stops the others)."""
        for wait in [w for w in self._waits if w.run is run]:
            self._waits.remove(wait)
            if wait.timer is not None:
                try:
                    wait.timer.cancel()
                except Exception:  # a timer that cannot be cancelled only fires into a wait that is gone
                    log.exception("cancelling a sub-agent wait of run %s failed", run.id)

    @property
    def waits(self) -> int:
        return len(self._waits)

    # -- what a turn is handed ---------------------------------------------------------------------------

    def background_option(self) -> dict[str, list[dict[str, Any]]]:
        """For a root run's start: the root agent's background sub-agents whose results no turn has read (they
        are handed over now), those still working, and those a stopped daemon interrupted."""
        finished, running, interrupted = [], [], []
        for row in self.owned_by(""):
            if row.state == SubagentState.WORKING and row.background:
                running.append(self.info(row, outcome=False).to_wire())
            elif row.interrupted:
                interrupted.append(self.info(row, outcome=False).to_wire())
                row.interrupted = False
                self._write(row)
            elif row.unread and len(finished) < MAX_RESULTS_PER_TURN:
                finished.append(self.info(row).to_wire())
                row.unread = False
                self._write(row)
        return {"finished": finished, "running": running, "interrupted": interrupted}

    def info(self, row: SubagentRow, *, outcome: bool = True) -> SubagentInfo:
        """What is said of a sub-agent; with `outcome`, how its newest run ended (once it has)."""
        result = self._outcomes.get(row.id) if outcome else None
        if outcome and result is None and row.last_run and row.state != SubagentState.WORKING:
            result = self._recorded_outcome(row)
        try:
            background = TurnEndChoice(row.background) if row.background else None
        except ValueError:
            background = None
        try:
            state = SubagentState(row.state)
        except ValueError:
            state = SubagentState.STOPPED
        return SubagentInfo(subagent=row.id, agent=row.agent, state=state, run=row.last_run, task=row.task,
                            conclusion=row.conclusion, background=background, outcome=result,
                            reuse_key=row.reuse_key, updated_at=row.updated_at)

    def _infos(self, ids: list[str], *, outcomes: bool) -> list[SubagentInfo]:
        infos: list[SubagentInfo] = []
        handed = 0
        for subagent in dict.fromkeys(ids):
            row = self.rows.get(subagent)
            if row is None:
                continue
            give = outcomes and handed < MAX_OUTCOMES_PER_REPLY and row.state != SubagentState.WORKING
            infos.append(self.info(row, outcome=give))
            if give:
                handed += 1
                if row.unread:
                    row.unread = False  # an agent read its result: no later turn is handed it again
                    self._write(row)
        return infos

    def _recorded_outcome(self, row: SubagentRow) -> RunOutcome | None:
        """The outcome of a run that ended before this daemon started, from what state.db recorded of it."""
        try:
            found = self._registry.run_result(row.last_run)
        except sqlite3.DatabaseError:
            return None
        if found is None:
            return None
        status, stop_reason, output, error = found
        try:
            outcome = RunOutcome(status=RunStatus(status), stop_reason=StopReason(stop_reason or "unaccounted"),
                                 output=output, error=error, run=row.last_run, agent=row.agent, subagent=row.id)
        except ValueError:  # a run still recorded as live (queued, running): it has no outcome yet
            return None
        handoff = _loads(row.handoff)
        return _cut(dataclasses.replace(outcome, handoff=handoff))


def _not_continuable(row: SubagentRow) -> tuple[ErrorCode, str] | None:
    if row.state == SubagentState.WORKING:
        return (ErrorCode.SUBAGENT_BUSY, f"sub-agent {row.id} ({row.agent}) is still working on its last task; "
                                         "wait_agents for it, then send the follow-up")
    if row.state == SubagentState.RETIRED:
        return (ErrorCode.UNKNOWN_SUBAGENT, f"sub-agent {row.id} ({row.agent}) is retired (its configuration changed "
                                            "or it was let go); delegate the work anew with the whole task")
    return None


def _unknown(subagent: str) -> str:
    shown = subagent if len(subagent) <= 40 else subagent[:40] + "…"
    return (f"no sub-agent {shown!r} belongs to you in this task; agent_status lists yours (a sub-agent belongs to "
            "the agent that delegated to it)")


def _preview(task: str) -> str:
    line = task.strip().splitlines()[0] if task.strip() else ""
    return line if len(line) <= _TASK_PREVIEW else line[: _TASK_PREVIEW - 1] + "…"


def _conclusion(outcome: RunOutcome) -> str:
    conclusion = (outcome.handoff or {}).get("conclusion") if isinstance(outcome.handoff, dict) else None
    text = conclusion if isinstance(conclusion, str) and conclusion.strip() else (outcome.output or outcome.error)
    return _preview(text)


def _cut_text(text: str, budget: int) -> str:
    return text if len(text) <= budget else text[:budget] + f"\n[… {len(text) - budget} more characters cut]"


def _cut(outcome: RunOutcome) -> RunOutcome:
    handoff = outcome.handoff if isinstance(outcome.handoff, dict) and len(_bounded_json(outcome.handoff)) else None
    return dataclasses.replace(outcome, output=_cut_text(outcome.output, OUTCOME_TEXT_BUDGET),
                               error=_cut_text(outcome.error, OUTCOME_TEXT_BUDGET), handoff=handoff, data={},
                               usage={})


def _bounded_json(handoff: Any) -> str:
    if not isinstance(handoff, dict):
        return ""
    try:
        text = json.dumps(handoff, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return ""
    return text if len(text) <= _HANDOFF_BUDGET else ""


def _loads(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text) if text else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
