"""What a run's agent loop tells its rollout: the opening records, each message it appends, its end.

The loop calls `appended` for every message and `finished` once on every way out (returned, raised,
cancelled). `finished` writes the checkpoint and the terminal event, then closes the writer, so a
cancelled run (the worker's CancelledError path, a lost daemon) leaves a usable checkpoint before the
worker exits. Nothing here ever raises into the loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from yagent.ipc.messages import RunOutcome
from yagent.ipc.resume_switch import resume_enabled
from yagent.ipc.state_layout import rollout_dir, rollout_name
from yagent.ipc.vocabulary import StopReason
from yagent.workers.context.thought import parse_thought
from yagent.workers.llm import Message

from . import rollout_records as records
from .git_identity import GitIdentity, read_git_identity
from .rollout_checkpoint import CheckpointFacts, write_checkpoint
from .rollout_writer import RolloutWriter

__all__ = ["RunRecorder", "open_recorder"]

CLOSE_TIMEOUT = 5.0


# What `begin_soon` keeps: how to make the turn context, the starting messages, the surface's fields.
_Opening = tuple[Callable[[], dict[str, Any]], list[Message], Callable[[], dict[str, Any]] | None]


class RunRecorder:
    """One run's rollout. `stop_reason_of_cancel` says why a cancelled run stopped (paused, interrupted...)."""

    def __init__(self, writer: RolloutWriter, *, project_root: Path, delegation_id: str | None,
                 model: Callable[[], str], tier: Callable[[], str],
                 stop_reason_of_cancel: Callable[[], StopReason],
                 on_problem: Callable[[str], None] | None = None) -> None:
        self.writer = writer
        self.checkpoints = 0
        self._root = project_root
        self._delegation_id = delegation_id
        self._model = model
        self._tier = tier
        self._cancel_reason = stop_reason_of_cancel
        self._on_problem = on_problem
        self._finished = False
        self._end_later = False  # `end_after_result`: a returned run's end waits for `finish_returned`
        self._returned: tuple[int, RunOutcome] | None = None  # the end it left for then
        self._context: dict[str, Any] | None = None  # the turn context's payload, re-recorded when it changes
        self._delegations: dict[str, dict[str, str]] = {}  # call id -> {agent, call_id, state}
        self._returned_in_step: dict[str, int] = {}
        self._surface: Callable[[], dict[str, Any]] | None = None
        self._opening: _Opening | None = None  # `begin_soon`: the opening records, made when first needed

    @property
    def path(self) -> Path:
        return self.writer.path

    def begin(self, context: dict[str, Any], messages: list[Message], *,
              surface: Callable[[], dict[str, Any]] | None = None) -> None:
        """The opening records after `session_meta`: the turn context and the messages the run starts from.
        `surface` gives the context's tool fields as they are now (loaded tools, roster): a tool call can
        change them (`load_tool`, a custom agent joining), and a resume must find what was loaded last."""
        self._context = dict(context.get("payload") or {})
        self._surface = surface
        self.writer.enqueue(context)
        for message in messages:
            self.writer.enqueue(records.response_item(message, 0))

    def begin_soon(self, make_context: Callable[[], dict[str, Any]], messages: list[Message], *,
                   surface: Callable[[], dict[str, Any]] | None = None) -> None:
        """`begin`, with its context made later: at `begin_now` (once the run's first model request is out, while
        the model works), or before any other record at the latest. The context carries the run's configuration
        signature, a digest of every tool definition, which a sub-agent made on its way to its first request.
        `messages` are the ones the run starts from now (copied: the loop appends to its list)."""
        self._opening = (make_context, list(messages), surface)

    def begin_now(self) -> None:
        """Write the opening records `begin_soon` left for later (nothing when there are none), the writer started
        first (`open_recorder` leaves it for now); never raises."""
        self.writer.start()
        opening, self._opening = self._opening, None
        if opening is None:
            return
        make_context, messages, surface = opening
        try:
            context = make_context()
        except Exception as exc:  # the run goes on, its messages recorded; only its context is missing
            if self._on_problem is not None:
                self._on_problem(f"rollout {self.writer.path}: its turn context could not be made "
                                 f"({type(exc).__name__}: {exc})")
            for message in messages:
                self.writer.enqueue(records.response_item(message, 0))
            return
        self.begin(context, messages, surface=surface)

    def appended(self, message: Message, step: int) -> None:
        self.begin_now()
        self.writer.enqueue(records.response_item(message, step))
        if self._context is not None and self._context_changed(message, step):
            self.writer.enqueue(records.record(records.RolloutRecord.TURN_CONTEXT, {
                **self._context, "step": step, "delegations": self._delegations_now()}))

    def _delegations_now(self) -> list[dict[str, str]]:
        # Copies: a delegation's state changes in place later, and the writer encodes a record when its batch closes.
        return [dict(delegation) for delegation in self._delegations.values()]

    def _surface_changed(self) -> bool:
        assert self._context is not None
        if self._surface is None:
            return False
        now = self._surface()
        changed = any(self._context.get(key) != value for key, value in now.items())
        self._context.update(now)
        return changed

    def _context_changed(self, message: Message, step: int) -> bool:
        """Fold a message into the turn context (the plan, the delegations in flight); True when it changed."""
        assert self._context is not None
        changed = False
        if message.role == "assistant":
            thought = parse_thought(message.content)
            if thought is not None and thought.plan:
                plan = [f"[{status}] {text}" for status, text in thought.plan]
                if plan != self._context.get("plan"):
                    self._context["plan"] = plan
                    changed = True
            for call in message.tool_calls:
                if call.name.startswith("delegate_"):
                    self._delegations[call.id] = {"agent": call.name.removeprefix("delegate_"), "call_id": call.id,
                                                  "state": "running"}
                    changed = True
        elif message.role == "tool":
            if message.tool_call_id in self._delegations:
                self._delegations[message.tool_call_id]["state"] = "returned"
                self._returned_in_step[message.tool_call_id] = step
                changed = True
            changed = self._surface_changed() or changed  # only a tool call changes what the run holds
        return changed

    def _mark_interrupted(self, step: int) -> None:
        """A run stopped from outside: the last step's delegations got their results from the cancellation,
        so their children were interrupted (a resume asks each child's rollout what it got to)."""
        hit = [cid for cid, at in self._returned_in_step.items() if at == step]
        for cid in hit:
            self._delegations[cid]["state"] = "interrupted"
        if hit and self._context is not None:
            self.writer.enqueue(records.record(records.RolloutRecord.TURN_CONTEXT, {
                **self._context, "step": step, "delegations": self._delegations_now()}))

    def compacted(self, messages: list[Message], step: int) -> None:
        """The context issue's hook: the whole replacement history after a compression."""
        self.begin_now()
        self.writer.enqueue(records.compacted(messages, step))

    def end_after_result(self) -> None:
        """Write the end of a run that returns (checkpoint, terminal event, close) when `finish_returned` is called,
        after its result went out, instead of in `finished`: the read-back and digest of the checkpoint are then off
        the delegation's way. The writer's lock keeps a follow-up from reading the rollout before its end is in
        (`wait_for_writer`). A run that did not return (cancelled, failed) ends at once as before."""
        self._end_later = True

    def finish_returned(self) -> None:
        """Write the end `finished` left for later (see `end_after_result`); nothing when it left none."""
        returned, self._returned = self._returned, None
        if returned is not None:
            self._end(*returned)

    def finished(self, step: int, outcome: RunOutcome | None, error: BaseException | None = None) -> None:
        """Checkpoint, terminal event, close — once. `outcome` is None when the loop did not return."""
        if self._finished:
            return
        self.writer.start()  # the lock is held from here on, whenever the end is written (`end_after_result`)
        if outcome is not None and self._end_later:
            self._returned = (step, outcome)
            return
        self._end(step, outcome, error)

    def _end(self, step: int, outcome: RunOutcome | None, error: BaseException | None = None) -> None:
        self._finished = True
        if outcome is not None:
            reason, why = outcome.stop_reason, outcome.error
        elif isinstance(error, Exception):
            reason, why = StopReason.PANIC, f"{type(error).__name__}: {error}"
        else:  # cancelled (CancelledError is no Exception): paused, interrupted or cancelled, the run says which
            reason, why = self._cancel_reason(), "the run was stopped before it finished"
        try:
            self.begin_now()  # a run that ended before its first request was out still opens its rollout
            if outcome is None:
                self._mark_interrupted(step)
            problem = write_checkpoint(self.writer, CheckpointFacts(
                step=step, model=self._model(), tier=self._tier(), git=read_git_identity(self._root),
                delegation_id=self._delegation_id, stop_reason=reason))
            self.checkpoints += 0 if problem else 1
            self.writer.enqueue(records.stopped(reason, step, why))
        except Exception as exc:  # the run's end must not fail on its record
            problem = f"checkpoint left out: {type(exc).__name__}: {exc}"
        if not self.writer.close(CLOSE_TIMEOUT):
            problem = problem or f"rollout {self.writer.path} did not close within {CLOSE_TIMEOUT:g}s"
        if problem and self._on_problem is not None:
            self._on_problem(problem)


def open_recorder(*, home: Path, task: str, run: str, agent: str, turn: int, parent_run: str | None,
                  delegation_id: str | None, depth: int, project_root: Path, yolo: str,
                  model: Callable[[], str], tier: Callable[[], str],
                  stop_reason_of_cancel: Callable[[], StopReason],
                  on_problem: Callable[[str], None] | None = None,
                  environ: dict[str, str] | None = None) -> tuple[RunRecorder | None, GitIdentity]:
    """The recorder of a run, or None when `YAGENT_RESUME=0` (no rollout is written at all)."""
    git = read_git_identity(project_root)
    if not resume_enabled(environ):
        return None, git
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    path = rollout_dir(home, task) / rollout_name(stamp, run, agent if parent_run else None)
    # Started at the run's first model request (`begin_now`), its end, or its close: not on that request's way.
    writer = RolloutWriter(path, on_error=on_problem, start=False)
    recorder = RunRecorder(writer, project_root=project_root, delegation_id=delegation_id, model=model, tier=tier,
                           stop_reason_of_cancel=stop_reason_of_cancel, on_problem=on_problem)
    writer.enqueue(records.session_meta(run=run, task=task, agent=agent, turn=turn, parent_run=parent_run,
                                        delegation_id=delegation_id, depth=depth, project_root=str(project_root),
                                        git=git))
    return recorder, git
