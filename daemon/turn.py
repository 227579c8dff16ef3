"""A task's turn, from the user's message to its end: its runs, pause and continue, questions, the task
timeout, and the moment it is over.

`TurnController` lives while its task has anything alive — the turn in flight, or runs of an earlier
turn whose processes are still exiting — and is forgotten after that (the registry keeps the record).
A turn ends when its root run and every run it started have ended; then `turn_finished` is published
with the root's outcome.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from yagent.ipc.daemon_events import (
    BackgroundWork,
    TaskPaused,
    TaskResumed,
    TurnFinished,
    TurnStarted,
    UserHelpResponse,
)
from yagent.ipc.messages import (
    BACKGROUND_OPTION,
    REPLAY_OPTION,
    RESUME_OPTION,
    AskUser,
    DelegateRequest,
    Question,
    RunOutcome,
    RunSpec,
    UserAnswer,
    continued_run,
)
from yagent.ipc.resumable import RESUMABLE_STATES
from yagent.ipc.state_layout import approvals_file
from yagent.ipc.vocabulary import ErrorCode, RunStatus, StopReason, TaskState

from .answered_approvals import TaskApprovals
from .registry import TaskRow, TurnRow, new_run_id
from .run_clock import RunClock
from .run_services import RunServices
from .run_supervisor import RunSupervisor
from .run_table import RunTable
from .schedule import Timer
from .spending import BudgetAsk, budget_question, raise_to
from .subagent_book import Placement, SubagentBook
from .turn_keys import TurnKeys

__all__ = ["INHERITED_OPTIONS", "RESUMABLE", "PendingQuestion", "TurnController"]

log = logging.getLogger(__name__)

# Submit options that hold for the whole turn, so delegations carry them too (a /model choice, say).
INHERITED_OPTIONS = ("model_override",)

RESUMABLE = RESUMABLE_STATES  # turns `continue` resumes where they stopped (`ipc.resumable`)

_TASK_STATE = {RunStatus.DONE: TaskState.DONE, RunStatus.CANCELLED: TaskState.CANCELLED,
               RunStatus.INTERRUPTED: TaskState.INTERRUPTED}


@dataclass(slots=True)
class PendingQuestion:
    question: Question
    run: RunSupervisor | None  # None: the daemon itself asks (a spending limit)
    reply_to: int = 0  # the worker's AskUser request id
    on_answer: Callable[[dict[str, Any]], None] | None = None  # for the daemon's own questions


class TurnController:
    def __init__(self, services: RunServices, row: TaskRow, table: RunTable,
                 forget: Callable[[TurnController], None]) -> None:
        self.services = services
        self.row = row
        self._table = table
        self._forget = forget
        self.turn = 0
        self.paused = False
        self.root: RunSupervisor | None = None
        self.runs: dict[str, RunSupervisor] = {}  # runs of this task not yet gone, every turn's
        self.questions: dict[str, PendingQuestion] = {}
        self._clock: RunClock | None = None  # the turn's total clock, for the task timeout
        self._timeout: Timer | None = None
        self._root_outcome: RunOutcome | None = None  # set when the root ends; the turn ends with its last run
        self.spent = 0.0  # dollars this task's model calls cost, over its turns while it stays in memory
        self._task_limit_raised: float | None = None  # the user raised max_cost_per_task for this task
        self._budget_question: str | None = None  # request id of the pending spending-limit question
        self._budget_waiters: list[Callable[[], None]] = []
        self._budget_questions = 0
        self.keys = TurnKeys()  # the turn's keys from its caller: memory only, dropped when the turn ends
        self.subagents = SubagentBook(services.registry, row.id, services.scheduler)  # the task's reuse table
        self.approvals = TaskApprovals(services.registry, row.id, approvals_file(services.home))
        self._state_after_background: str | None = None  # the task's state once the kept background work ends
        self._text = ""  # the turn's message (a squash commit's title)

    @property
    def id(self) -> str:
        return self.row.id

    @property
    def project_id(self) -> str:
        return self.row.project_id

    @property
    def in_flight(self) -> bool:
        """A turn is in flight until its root run and every run it started have ended — but those it kept
        working in the background once it ended (`background_runs`)."""
        if self.root is None:
            return False
        return not self.root.ended or any(not r.ended and not r.kept for r in self.runs.values()
                                          if r.turn_number == self.turn)

    @property
    def background_runs(self) -> list[RunSupervisor]:
        """Runs a finished turn (this one or an earlier) kept working in the background."""
        return [r for r in self.runs.values() if r.kept and not r.ended]

    @property
    def busy(self) -> bool:
        """Anything of the task alive that pause, continue and cancel act on: the turn, or background work."""
        return self.in_flight or bool(self.background_runs)

    # -- starting -----------------------------------------------------------------------------------

    def start(self, text: str, agent: str, *, yolo: str, options: dict[str, Any], resumes: int = 0,
              keys: TurnKeys | None = None) -> RunSupervisor:
        """Begin a turn: record it, create its root run and queue it for a worker. `keys`: what the caller sent
        (`turn_keys`), for every run of the turn."""
        self.keys = keys or TurnKeys()
        self._text = text
        registry = self.services.registry
        if self.paused:  # background work paused meanwhile: a new turn runs, so everything goes on
            self.resume()
        override = options.get("model_override")
        self.turn = registry.add_turn(self.id, text, agent=agent, yolo=yolo, resumes=resumes,
                                      model_override=override if isinstance(override, str) else "")
        self.paused = False
        self._clock = RunClock(self.services.clock())
        # The results of background work that no turn has read yet, what still works, what a stop interrupted.
        options = {**options, BACKGROUND_OPTION: self.subagents.background_option()}
        root = self.create_run(agent, text, yolo=yolo, options=options)
        self.root = root
        registry.set_turn_root(self.id, self.turn, root.id)
        registry.set_task_state(self.id, TaskState.RUNNING)
        self.row.state = TaskState.RUNNING
        self.services.publish(self.id, TurnStarted(turn=self.turn, text=text, agent=agent,
                                                   project=self.row.project_path, resumes=resumes), root)
        self._arm_timeout()
        root.admit()
        return root

    def resume_stopped(self, stopped: TurnRow, keys: TurnKeys | None = None) -> RunSupervisor:
        """Continue the turn `stopped` (interrupted or cancelled) where it stopped, as a turn of its own: its root
        agent is started again as it ran, told which run it continues, and picks up from what that run wrote
        (`resume_of`); the daemon reads none of it."""
        options: dict[str, Any] = {RESUME_OPTION: {"turn": stopped.turn, "run": stopped.root_run}}
        if stopped.model_override:
            options["model_override"] = stopped.model_override  # the model the stopped turn ran on (`/model`)
        return self.start(stopped.text, stopped.agent or "director", yolo=stopped.yolo, options=options,
                          resumes=stopped.turn, keys=keys)

    def delegate(self, parent: RunSupervisor, msg: DelegateRequest) -> RunSupervisor | tuple[ErrorCode, str]:
        """The child a delegation of `parent` starts — of a new sub-agent, a follow-up to one of its own, or the
        replay of an interrupted one's run — or why it is refused; `admit` it to start it."""
        book = self.subagents
        placement: Placement | tuple[ErrorCode, str] | None = None
        if msg.replay:  # the interrupted run's sub-agent goes on
            interrupted = self.services.registry.run_for_call(self.id, continued_run(parent.spec.options),
                                                              msg.call_id) or ""
            row = next((r for r in book.rows.values() if interrupted and r.last_run == interrupted), None)
            placement = Placement(row=row, agent=msg.agent) if row is not None else None
        if placement is None:
            working = book.background_working([c.id for c in parent.children.values()])
            placement = book.place(parent, msg, working)
        if isinstance(placement, tuple):
            return placement
        child = self.create_run(placement.agent, msg.task, parent=parent, call_id=msg.call_id, context=msg.context,
                                replay=msg.replay, subagent=placement.row.id, extra=placement.options)
        book.started(placement, child.id, msg.background)
        return child

    def create_run(self, agent: str, text: str, *, parent: RunSupervisor | None = None, call_id: str = "",
                   yolo: str = "none", options: dict[str, Any] | None = None, context: str = "",
                   replay: bool = False, subagent: str = "", extra: dict[str, Any] | None = None) -> RunSupervisor:
        """A run of this turn, recorded and known to the daemon; `admit` it to start it. With `replay`, a child
        that picks up the interrupted delegation `call_id` from what that one wrote; `subagent`: the sub-agent
        it is a run of, `extra`: options of its own (a follow-up's)."""
        run_id = new_run_id()
        if parent is not None:
            options = {k: parent.spec.options[k] for k in INHERITED_OPTIONS if k in parent.spec.options}
            if replay and call_id:
                stopped_parent = continued_run(parent.spec.options)
                interrupted = self.services.registry.run_for_call(self.id, stopped_parent, call_id) or ""
                options[REPLAY_OPTION] = {"call_id": call_id, "parent_run": stopped_parent, "run": interrupted}
            options.update(extra or {})
        settings = self.services.settings
        spec = RunSpec(
            run=run_id, task=self.id, turn=self.turn, project=self.row.project_id,
            project_root=self.row.project_path, agent=agent, input=text, home=str(self.services.home),
            parent_run=parent.id if parent else None, call_id=call_id or None, context=context,
            depth=(parent.spec.depth + 1) if parent else 0, yolo=parent.spec.yolo if parent else yolo,
            subagent=subagent, session_grants=self.approvals.session(),
            settings=replace(settings.run_settings, llm=self.keys.llm_for(settings.run_settings.llm),
                             browser=self.services.browser_unavailable()),
            options=options or {}, heartbeat_interval=settings.heartbeat_interval,
            daemon_loss_timeout=settings.daemon_loss_timeout,
        )
        self.services.registry.add_run(run_id, self.id, self.turn, parent.id if parent else None, agent, call_id,
                                       text)
        run = RunSupervisor(self.services, self, spec, parent=parent)
        self._table.add(run)
        self.runs[run_id] = run
        if parent is not None:
            parent.children[run_id] = run
        return run

    # -- the task timeout -----------------------------------------------------------------------------

    def _arm_timeout(self) -> None:
        if self._timeout is not None:
            self._timeout.cancel()
            self._timeout = None
        limit = self.services.settings.task_timeout
        if limit <= 0 or self._clock is None or self.paused:
            return
        left = limit - self._clock.total_for(self.services.clock())
        self._timeout = self.services.scheduler.after(left + 0.01, self._check_timeout, f"task-timeout-{self.id}")

    def _check_timeout(self) -> None:
        self._timeout = None
        root, limit = self.root, self.services.settings.task_timeout
        if not self.in_flight or root is None or self._clock is None or limit <= 0:
            return
        if self._clock.total_for(self.services.clock()) > limit:
            root.stop(StopReason.TOTAL_TIMEOUT, f"the task ran longer than {limit:g}s (task_timeout)")
        else:
            self._arm_timeout()

    def rearm(self) -> None:
        """The configuration changed: the task timeout and every run's watchdog are scheduled anew."""
        if self.in_flight:
            self._arm_timeout()
        for run in self.runs.values():
            run.rearm()

    # -- pause, continue, cancel -----------------------------------------------------------------------

    def pause(self) -> None:
        if self.paused:
            return
        self.paused = True
        if self._clock is not None:
            self._clock.freeze("paused", self.services.clock())
        self._arm_timeout()
        for run in self.runs.values():
            run.pause()
        self._sync_state()
        self.services.publish(self.id, TaskPaused(turn=self.turn))

    def resume(self) -> None:
        if not self.paused:
            return
        self.paused = False
        if self._clock is not None:
            self._clock.unfreeze("paused", self.services.clock())
        self._arm_timeout()
        for run in self.runs.values():
            run.resume()
        self._sync_state()
        self.services.publish(self.id, TaskResumed(turn=self.turn))

    def cancel(self, detail: str = "cancelled by the user") -> None:
        """Stop the turn and everything it started, and the background work earlier turns kept."""
        if self.root is not None:
            self.root.stop(StopReason.CANCELLED, detail)
        for run in self.background_runs:
            run.stop(StopReason.CANCELLED, detail)

    # -- questions ----------------------------------------------------------------------------------

    def ask(self, run: RunSupervisor, msg: AskUser) -> None:
        """A run asks the user: the question waits here until a client answers or the run ends."""
        q = msg.question
        q.request_id = f"{run.id}.{msg.id}"
        q.task, q.run, q.agent, q.asked_at = self.id, run.id, run.agent, time.time()
        self.questions[q.request_id] = PendingQuestion(question=q, run=run, reply_to=msg.id)
        self._sync_state()
        self.services.publish_question(self.id, q, run)

    def answer(self, request_id: str, answer: dict[str, Any], by: str) -> None:
        pending = self.questions.pop(request_id)
        run = pending.run
        if run is not None:
            run.approvals.note(pending.reply_to, pending.question, answer)
            # Kept before the run hears the answer: a child it starts next already holds it. The worker's own
            # resolution of the root, for the same key in the approvals file.
            for problem in self.approvals.keep(os.path.realpath(self.row.project_path), pending.question, answer):
                log.warning("task %s, run %s: %s", self.id, run.id, problem)
                self.services.publish_log(self.id, "warning", problem, run)
            run.answered()
            run.send(UserAnswer(id=pending.reply_to, answer=answer))
        self.services.publish(self.id, UserHelpResponse(request_id=request_id, answer=answer, by=by), run)
        if pending.on_answer is not None:
            pending.on_answer(answer)
        self._sync_state()

    def withdraw_questions(self, run: RunSupervisor) -> None:
        """The run ended: its questions close for every client, answered by nobody."""
        withdrawn = [rid for rid, pending in self.questions.items() if pending.run is run]
        for rid in withdrawn:
            del self.questions[rid]
            self.services.publish(self.id, UserHelpResponse.withdrawn(rid), run)
        if withdrawn:
            self._sync_state()

    # -- spending limits --------------------------------------------------------------------------------

    @property
    def over_budget(self) -> bool:
        return self._budget_question is not None

    @property
    def cost_limit(self) -> float:
        """The task's spending limit now: the configured one, or what the user raised it to."""
        if self._task_limit_raised is not None:
            return self._task_limit_raised
        return self.services.settings.max_cost_per_task

    def charge(self, dollars: float) -> None:
        """A model call of this task cost `dollars`: count it, and ask before going past a limit."""
        self.spent += dollars
        spend = self.services.spend
        spend.add(dollars)
        if self.over_budget or not self.in_flight:
            return
        task_limit = self.cost_limit
        day_limit = spend.limit(self.services.settings.max_cost_per_day)
        if task_limit > 0 and self.spent >= task_limit:
            self._ask_budget(BudgetAsk("task", self.spent, task_limit, "max_cost_per_task"))
        elif day_limit > 0 and spend.spent >= day_limit:
            self._ask_budget(BudgetAsk("day", spend.spent, day_limit, "max_cost_per_day"))

    def after_budget(self, resume: Callable[[], None]) -> None:
        if self.over_budget:
            self._budget_waiters.append(resume)
        else:
            resume()

    def _ask_budget(self, ask: BudgetAsk) -> None:
        self._budget_questions += 1
        question = budget_question(self.id, ask, self._budget_questions)
        self._budget_question = question.request_id
        self.questions[question.request_id] = PendingQuestion(
            question=question, run=None, on_answer=lambda answer: self._budget_answered(ask, answer))
        log.info("task %s reached its spending limit (%s: $%.2f of $%.2f); paused to ask", self.id, ask.scope,
                 ask.spent, ask.limit)
        self.pause()
        self.services.publish_question(self.id, question, None)

    def _budget_answered(self, ask: BudgetAsk, answer: dict[str, Any]) -> None:
        self._budget_question = None
        value = str(answer.get("value", "")).strip().lower()
        if answer.get("cancelled") or not value.startswith("raise"):
            # The held-back lease requests stay unanswered: their runs are cancelled and withdraw them.
            self._budget_waiters = []
            self.cancel(f"stopped at the spending limit (${ask.spent:.2f} of ${ask.limit:.2f}, [llm] {ask.setting})")
            return
        if ask.scope == "task":
            self._task_limit_raised = raise_to(ask.limit)
        else:
            self.services.spend.raised_to = raise_to(ask.limit)
        waiters, self._budget_waiters = self._budget_waiters, []
        self.resume()
        for resume in waiters:
            resume()

    # -- the end ------------------------------------------------------------------------------------

    def run_finished(self, run: RunSupervisor, outcome: RunOutcome) -> None:
        if run is self.root:
            self._root_outcome = outcome
        if self._root_outcome is not None and not self.in_flight:
            outcome, self._root_outcome = self._root_outcome, None
            self._finish(outcome)
        elif run.kept:
            if outcome.status == RunStatus.INTERRUPTED and self._state_after_background is not None:
                self._state_after_background = TaskState.INTERRUPTED  # `continue` starts it again
            self._background_changed()

    def _background_changed(self) -> None:
        """Kept background work started or ended: say which is left; once none is, the task takes its state."""
        if self.in_flight or self._state_after_background is None:
            return
        live = self.background_runs
        state = TaskState.BACKGROUND if live else self._state_after_background
        if not live:
            self._state_after_background = None
        running = [self.subagents.info(row) for r in live if (row := self.subagents.rows.get(r.subagent))]
        self._write_state(self._kept_state() if live else state)
        self.services.publish(self.id, BackgroundWork(running=running, state=state))

    def _finish(self, outcome: RunOutcome) -> None:
        if self._timeout is not None:
            self._timeout.cancel()
            self._timeout = None
        if self._budget_question is not None:  # the turn ended without an answer: the question closes
            self.questions.pop(self._budget_question, None)
            self.services.publish(self.id, UserHelpResponse.withdrawn(self._budget_question))
            self._budget_question, self._budget_waiters = None, []
        state = _TASK_STATE.get(outcome.status, TaskState.FAILED)
        registry = self.services.registry
        registry.finish_turn(self.id, self.turn, state, outcome.output or outcome.error)
        kept = self.background_runs
        task_state = TaskState.BACKGROUND if kept else state
        # What `ps` shows: a question a kept run asked before the turn ended still waits for its answer.
        self._write_state(self._kept_state() if kept else task_state)
        if not self.paused or not kept:
            self.paused = False
        self.keys = TurnKeys()  # the caller's keys are kept no longer than the turn that needs them
        if self.services.checkpoints is not None:
            self.services.checkpoints.turn_ended(self.row, self.turn, self._text)
        self.services.publish(self.id, TurnFinished(
            turn=self.turn, state=task_state, status=outcome.status, stop_reason=outcome.stop_reason,
            output=outcome.output, error=outcome.error, run=outcome.run), self.root)
        if kept:
            self._state_after_background = state
            self._background_changed()

    def run_gone(self, run: RunSupervisor) -> None:
        self._table.remove(run)
        self.runs.pop(run.id, None)
        if not self.in_flight and not self.runs:
            self._forget(self)

    def _sync_state(self) -> None:
        if not self.in_flight:
            if self.background_runs:
                self._set_row_state(self._kept_state())
            return
        self._set_row_state(TaskState.PAUSED if self.paused else (
            TaskState.WAITING if self.questions else TaskState.RUNNING))

    def _kept_state(self) -> str:
        """The task's state while only kept background work lives: paused, waiting for an answer, or working."""
        return TaskState.PAUSED if self.paused else (TaskState.WAITING if self.questions else TaskState.BACKGROUND)

    def _set_row_state(self, state: str) -> None:
        if self.row.state != state:
            self._write_state(state)

    def _write_state(self, state: str) -> None:
        self.row.state = state
        self.services.registry.set_task_state(self.id, state)
