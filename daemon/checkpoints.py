"""Git checkpoints of a task's project: when they are made, their record, and diff / undo / rollback on them.

A Coding sub-task is checkpointed before its worker starts (`before_run`: nothing of it has written yet) and once
it has ended, its processes are gone and its `.git` is put back (`after_run`); its agent may make more
(`git_checkpoint_create`), list them and roll back to one of its task's (`git_checkpoint_rollback`). The git work
is done by a short process per job outside the agents' confinement (`checkpoint_jobs.py`,
`workers/checkpoints/`), one job at a time per project, so a diff asked after a turn ended sees that turn's last
checkpoint.

The record is the registry's (`checkpoints`): which commit each checkpoint is, made for which run, of what kind.
Every commit a job is handed comes from there — a worker names a checkpoint by its number within its own task,
and a number that is not one of them is refused — so a ref or commit an agent plants in the repository is never
taken for a checkpoint. The first job of a task pins its repository (the common git dir); a project that is not
a repository, or whose `.git` points elsewhere, has checkpoints off for the task, said once on the task.

A Coding run's file tools name the files they are about to write inside a directory git ignores (`note`, before
the write): each of the run's checkpoints lacking one gets it as it is then (its prior content; a file not there yet
stays absent), and every later capture of the task reads it, so an undo puts such a file back or removes it.

An undo or a rollback first keeps how things are as a checkpoint (safety), writes, then keeps how it left them
(after): so every change yagent makes to the project can itself be taken back, and a later undo knows which
files the user changed since (they differ from what yagent last left) and refuses to overwrite them, naming each,
unless forced.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from yagent.ipc import event_data
from yagent.ipc.checkpoint_settings import CheckpointSettings
from yagent.ipc.confinement import ConfinementSpec
from yagent.ipc.messages import (
    CheckpointCreate,
    CheckpointInfo,
    CheckpointJob,
    CheckpointJobResult,
    CheckpointList,
    CheckpointNote,
    CheckpointReply,
    CheckpointRollback,
    RunSpec,
    SubtaskChanges,
    TaskDiffReply,
    TaskUndoReply,
)
from yagent.ipc.noted_paths import MAX_NOTED_PATHS, plain_project_path
from yagent.ipc.vocabulary import CheckpointJobKind, CheckpointKind, EventType

from .checkpoint_jobs import JobQueues
from .git_guard import WRITES_PROJECT
from .registry import CheckpointRow, TaskRow
from .run_confinement import why_unconfined
from .run_services import RunServices

__all__ = ["CHECKPOINT_REF_ROOT", "REAP_WAIT", "CheckpointRun", "CheckpointService"]

log = logging.getLogger(__name__)

CHECKPOINT_REF_ROOT = "refs/yagent/checkpoints"
REAP_WAIT = 60.0  # seconds the after-checkpoint waits for a run's processes to be gone before it goes ahead
_LABEL_CHARS = 200
_MAX_LISTED = 200  # checkpoints a run's list shows (the newest)


class CheckpointRun(Protocol):
    """What the service needs of a run (`run_supervisor.RunSupervisor`)."""

    id: str
    agent: str
    spec: RunSpec
    reaped: asyncio.Event  # its processes are gone and its .git is put back

    @property
    def task_id(self) -> str: ...


@dataclass(frozen=True, slots=True)
class _Task:
    id: str
    project_id: str
    root: str  # the project directory
    turn: int = 0


def _label(text: str) -> str:
    line = " ".join(text.split())
    return line[:_LABEL_CHARS] + ("…" if len(line) > _LABEL_CHARS else "")


def _clock(when: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(when))


def _info(row: CheckpointRow) -> CheckpointInfo:
    return CheckpointInfo(number=row.number, kind=CheckpointKind(row.kind), run=row.run_id, agent=row.agent,
                          label=row.label, created_at=row.created_at, head=row.head,
                          skipped=[f"{p} ({why})" for p, why in sorted(row.skipped.items())][:50])


class CheckpointService:
    def __init__(self, services: RunServices) -> None:
        self._services = services
        self.jobs = JobQueues(services.launcher, services.scope, services.home, self._confinement)
        self._off: dict[str, str] = {}  # task -> why it has no checkpoints (said once on the task)
        self._repos: dict[str, str] = {}  # task -> the common git dir its first job found
        self._before: dict[str, int] = {}  # run -> the number of its before-checkpoint

    @property
    def settings(self) -> CheckpointSettings:
        return self._services.settings.checkpoints

    def wanted(self, agent: str) -> bool:
        """Whether a run of `agent` is checkpointed before and after (it writes the project, and they are on)."""
        return self.settings.enabled and agent in WRITES_PROJECT

    def _confinement(self, project: str, scratch: str) -> ConfinementSpec:
        services = self._services
        settings = services.settings
        _writable, deny = settings.sandbox.expanded(str(Path.home()))
        return ConfinementSpec(
            abi=services.landlock_abi, agent="checkpoint", project_root=project, home=str(services.home),
            runtime_dir=str(services.runtime_dir or services.home), task_dir="", scratch_dir=scratch,
            unconfined=why_unconfined(settings, "none", services.landlock_abi), required=settings.sandbox.required,
            deny_read=deny)

    def _in_line(self, task: _Task, step: Callable[[], Awaitable[object]]) -> asyncio.Future[object]:
        return self.jobs.enqueue(task.root, step)

    # -- the record -----------------------------------------------------------------------------------

    def _rows(self, task_id: str) -> list[CheckpointRow]:
        return self._services.registry.checkpoints(task_id)

    def _expected_repo(self, task_id: str) -> str:
        known = self._repos.get(task_id)
        if known is None:
            rows = self._rows(task_id)
            known = self._repos[task_id] = rows[0].common_dir if rows else ""
        return known

    def _turn_off(self, task: _Task, reason: str) -> None:
        if task.id in self._off:
            return
        self._off[task.id] = reason
        log.info("task %s: git checkpoints are off: %s", task.id, reason)
        self._say(task, "info", f"git checkpoints are off for this task: {reason}. Agents' changes cannot be undone "
                                "by yagent here, and `yagent diff` has nothing to show")

    def _say(self, task: _Task, level: str, text: str, run: CheckpointRun | None = None) -> None:
        self._services.hub.publish(task.id, run.id if run else "", run.agent if run else "", EventType.LOG.value,
                                   event_data.log(level, text))

    def _job(self, task: _Task, kind: CheckpointJobKind, **fields: object) -> CheckpointJob:
        return CheckpointJob(kind=kind, project_root=task.root, scratch_dir="", home=str(self._services.home),
                             expected_common_dir=self._expected_repo(task.id), **fields)  # type: ignore[arg-type]

    def _row(self, task: _Task, number: int, kind: CheckpointKind, result: CheckpointJobResult, commit: str, *,
             run: str = "", agent: str = "", label: str = "", undoes: str = "") -> CheckpointRow:
        row = CheckpointRow(task_id=task.id, number=number, project_id=task.project_id, turn=task.turn, run_id=run,
                            agent=agent, kind=kind.value, label=_label(label),
                            ref=f"{CHECKPOINT_REF_ROOT}/{task.id}/{number}", commit=commit,
                            common_dir=result.common_dir, head=result.head, skipped=dict(result.skipped),
                            created_at=time.time(), undoes=undoes)
        self._services.registry.add_checkpoint(row)
        self._repos.setdefault(task.id, result.common_dir)
        return row

    async def _create(self, task: _Task, kind: CheckpointKind, *, run: str = "", agent: str = "",
                      label: str = "") -> CheckpointRow | str:
        """(In the project's line.) One checkpoint made and recorded; or why not."""
        if task.id in self._off:
            return self._off[task.id]
        number = self._services.registry.next_checkpoint_number(task.id)
        job = self._job(task, CheckpointJobKind.CREATE, ref=f"{CHECKPOINT_REF_ROOT}/{task.id}/{number}",
                        message=f"yagent checkpoint {number} of task {task.id} ({kind.value})\n\n{_label(label)}",
                        extra_paths=sorted(self._services.registry.checkpoint_paths(task.id)))
        result = await self.jobs.run(job)
        if result.unsupported:
            self._turn_off(task, result.unsupported)
            return result.unsupported
        if not result.ok:
            log.warning("task %s: checkpoint %d (%s) failed: %s", task.id, number, kind.value, result.problem)
            return result.problem
        return self._row(task, number, kind, result, result.commit, run=run, agent=agent, label=label)

    # -- a Coding sub-task's before and after ---------------------------------------------------------

    async def before_run(self, run: CheckpointRun, task: TaskRow, turn: int) -> bool:
        """Checkpoint the project before `run`'s worker starts; whether it has checkpoints (its tools)."""
        ref = _Task(task.id, task.project_id, task.project_path, turn)
        made = await self._in_line(ref, lambda: self._create(ref, CheckpointKind.BEFORE, run=run.id, agent=run.agent,
                                                             label=run.spec.input))
        if isinstance(made, CheckpointRow):
            self._before[run.id] = made.number
            return True
        if ref.id not in self._off:
            self._say(ref, "warning", f"no checkpoint could be made before this {run.agent} sub-task ({made}); its "
                                      "changes cannot be undone by yagent", run)
        return False

    def after_run(self, run: CheckpointRun, task: TaskRow, turn: int) -> None:
        """`run` ended: once its processes are gone, checkpoint what it left. Queued now, so anything asked of the
        project later (a diff, the next sub-task) comes after."""
        if self._before.pop(run.id, None) is None:
            return
        ref = _Task(task.id, task.project_id, task.project_path, turn)

        async def after() -> None:
            try:
                async with asyncio.timeout(REAP_WAIT):
                    await run.reaped.wait()
            except TimeoutError:
                log.warning("run %s: its processes were not gone after %.0fs; checkpointing anyway", run.id, REAP_WAIT)
            made = await self._create(ref, CheckpointKind.AFTER, run=run.id, agent=run.agent, label=run.spec.input)
            if not isinstance(made, CheckpointRow) and ref.id not in self._off:
                self._say(ref, "warning", f"no checkpoint could be made after this {run.agent} sub-task ({made}); "
                                          "`yagent undo` cannot take it back", run)

        self._in_line(ref, after)

    # -- what agents ask ------------------------------------------------------------------------------

    def agent_request(self, run: CheckpointRun, task: TaskRow, turn: int,
                      msg: CheckpointCreate | CheckpointList | CheckpointRollback,
                      answer: Callable[[CheckpointReply], None]) -> None:
        """Answer a run's checkpoint request (in the project's line); `answer` sends the reply."""
        ref = _Task(task.id, task.project_id, task.project_path, turn)
        refusal = self._refusal(run, ref, msg)
        if refusal:
            answer(CheckpointReply(id=msg.id, content=refusal, is_error=True))
            return

        async def step() -> None:
            try:
                reply = await self._agent_step(run, ref, msg)
            except Exception as exc:  # the run must hear back, or it waits for good
                log.exception("run %s: %s failed", run.id, msg.kind)
                reply = CheckpointReply(id=msg.id, is_error=True, content=f"yagentd failed to handle it ({exc})")
            answer(reply)

        self._in_line(ref, step)

    def note(self, run: CheckpointRun, task: TaskRow, turn: int, msg: CheckpointNote,
             answer: Callable[[CheckpointReply], None]) -> None:
        """`run` is about to write `msg.paths` inside ignored directories: once its checkpoints hold their prior
        content (in the project's line), `answer`; the write waits for it, so nothing of theirs is lost."""
        ref = _Task(task.id, task.project_id, task.project_path, turn)
        before = self._before.get(run.id)
        if before is None or not self.settings.enabled or ref.id in self._off or run.agent not in WRITES_PROJECT:
            answer(CheckpointReply(id=msg.id, content="this run has no checkpoints; nothing to keep"))
            return

        async def step() -> None:
            try:
                reply = await self._note(ref, before, msg)
            except Exception as exc:  # the run must hear back: its write waits for this
                log.exception("run %s: noting files for its checkpoints failed", run.id)
                reply = CheckpointReply(id=msg.id, is_error=True, content=f"yagentd failed to keep them ({exc})")
            if reply.is_error:  # the write goes ahead: the user hears what an undo cannot put back
                self._say(ref, "warning", f"{run.agent} writes files in an ignored directory whose content could not "
                                          f"be kept for `yagent undo`: {reply.content}", run)
            answer(reply)

        self._in_line(ref, step)

    async def _note(self, task: _Task, before: int, msg: CheckpointNote) -> CheckpointReply:
        registry = self._services.registry
        known = registry.checkpoint_paths(task.id)
        asked = [p for p in msg.paths[:MAX_NOTED_PATHS] if plain_project_path(p)]
        fresh = sorted(set(asked) - known.keys())
        room = max(0, MAX_NOTED_PATHS - len(known))
        fresh, over = fresh[:room], fresh[room:]
        refused = f" {len(over)} file(s) were not kept: the task's checkpoints keep at most {MAX_NOTED_PATHS} files " \
                  f"agents wrote in ignored directories, so an undo will not put back {', '.join(over[:5])}" \
            if over else ""
        if not fresh:
            return CheckpointReply(id=msg.id, content=("kept already." + refused).strip(), is_error=bool(over))
        rows = [r for r in self._rows(task.id) if r.number >= before]
        result = await self.jobs.run(self._job(task, CheckpointJobKind.NOTE, amend=[[r.ref, r.commit] for r in rows],
                                               extra_paths=fresh))
        if not result.ok:
            why = result.unsupported or result.problem
            log.warning("task %s: the prior content of %d file(s) was not kept: %s", task.id, len(fresh), why)
            return CheckpointReply(id=msg.id, is_error=True, content=f"their content was not kept: {why}")
        if result.detail:
            # All or nothing: a checkpoint moved meanwhile. The record keeps naming the commits it named (each
            # amendment keeps the commit it amends reachable) and no file is noted, so no capture counts on them.
            log.warning("task %s: the prior content of files was not kept: %s", task.id, result.detail)
            return CheckpointReply(id=msg.id, is_error=True, content=f"their content was not kept: {result.detail}")
        amended = {pair[0]: pair[1] for pair in result.amended if isinstance(pair, list) and len(pair) == 2}
        for row in rows:
            commit = amended.get(row.ref, row.commit)
            if commit != row.commit:
                registry.set_checkpoint_commit(task.id, row.number, commit)
        # A file there but unreadable (too big, not a file) is not noted: no capture reads it, no undo touches it.
        asked_now = set(fresh)
        unread = {p: why for p, why in result.skipped.items() if p in asked_now}
        registry.note_checkpoint_paths(task.id, [p for p in fresh if p not in unread], before)
        left = " Not kept, and left as they are by an undo: " + "; ".join(
            f"{p} ({why})" for p, why in sorted(unread.items())[:5]) + "." if unread else ""
        absent = len(fresh) - len(result.files) - len(unread)
        return CheckpointReply(id=msg.id, content=f"kept {len(result.files)} of {len(fresh)}; {absent} did not exist "
                                                  f"yet.{left}{refused}", is_error=bool(over or unread))

    def _refusal(self, run: CheckpointRun, task: _Task, msg: object) -> str:
        if not self.settings.enabled:
            return "git checkpoints are turned off ([git_checkpoint] enabled = false); nothing was done"
        if task.id in self._off:
            return f"this task has no git checkpoints: {self._off[task.id]}"
        if not isinstance(msg, CheckpointList) and run.agent not in WRITES_PROJECT:
            return f"a {run.agent} run does not change the project, so it makes and rolls back no checkpoint"
        return ""

    async def _agent_step(self, run: CheckpointRun, task: _Task, msg: object) -> CheckpointReply:
        if isinstance(msg, CheckpointCreate):
            made = await self._create(task, CheckpointKind.AGENT, run=run.id, agent=run.agent,
                                      label=msg.label or f"made by {run.agent}")
            if not isinstance(made, CheckpointRow):
                return CheckpointReply(id=msg.id, is_error=True, content=f"no checkpoint was made: {made}")
            skipped = f" Not in it (too big, or not a file): {', '.join(sorted(made.skipped)[:10])}." \
                if made.skipped else ""
            return CheckpointReply(id=msg.id, content=f"checkpoint {made.number} made ({made.label}).{skipped} "
                                                      f"git_checkpoint_rollback {made.number} brings the project back "
                                                      "to this state.", checkpoints=[_info(made)])
        rows = self._rows(task.id)
        if isinstance(msg, CheckpointList):
            shown = rows[-_MAX_LISTED:]
            lines = [f"{r.number}: {r.kind} {r.agent} — {r.label} ({_clock(r.created_at)})" for r in shown] \
                or ["no checkpoints yet"]
            return CheckpointReply(id=msg.id, content="\n".join(lines), checkpoints=[_info(r) for r in shown])
        assert isinstance(msg, CheckpointRollback)
        target = next((r for r in rows if r.number == msg.number), None)
        if target is None:
            known = f"1 to {rows[-1].number}" if rows else "none yet"
            return CheckpointReply(id=msg.id, is_error=True, content=(
                f"there is no checkpoint {msg.number} in this task (its checkpoints: {known}); git_checkpoint_list "
                "shows them. Nothing was changed"))
        reply = await self._restore(task, target, scope_from="", expected="", force=True, apply=True, run=run,
                                    label=f"before rolling back to checkpoint {target.number}")
        if isinstance(reply, str):
            return CheckpointReply(id=msg.id, is_error=True, content=f"the rollback failed: {reply}. Nothing was "
                                                                     "changed")
        result, safety = reply
        names = ", ".join(f.path for f in result.files[:20]) + (" …" if len(result.files) > 20 else "")
        left = f" Not touched: {'; '.join(result.left[:10])}." if result.left else ""
        text = (f"rolled back to checkpoint {target.number}: {len(result.files)} file"
                f"{'s' if len(result.files) != 1 else ''} put back ({names or 'none differed'}).{left} How things were "
                f"just before is checkpoint {safety}: git_checkpoint_rollback {safety} undoes this rollback.")
        return CheckpointReply(id=msg.id, content=text)

    async def _restore(self, task: _Task, target: CheckpointRow, *, scope_from: str, expected: str, force: bool,
                       apply: bool, run: CheckpointRun | None = None, label: str = "", undoes: str = ""
                       ) -> tuple[CheckpointJobResult, int] | str:
        """(In the project's line.) Put `target` back (or only say what that changes); (the result, the safety
        checkpoint's number) or why it failed."""
        registry = self._services.registry
        safety = registry.next_checkpoint_number(task.id) if apply else 0
        rows = self._rows(task.id)
        untouchable = sorted({p for r in rows if r.number >= target.number for p in r.skipped})
        noted = registry.checkpoint_paths(task.id)
        job = self._job(task, CheckpointJobKind.RESTORE, target=target.commit, scope_from=scope_from,
                        extra_paths=sorted(noted), noted_later=sorted(p for p, n in noted.items() if n > target.number),
                        expected=expected, untouchable=untouchable, apply=apply, force=force,
                        safety_ref=f"{CHECKPOINT_REF_ROOT}/{task.id}/{safety}" if apply else "",
                        ref=f"{CHECKPOINT_REF_ROOT}/{task.id}/{safety + 1}" if apply else "",
                        message=f"yagent checkpoint {safety} of task {task.id} ({label})")
        result = await self.jobs.run(job)
        if result.unsupported:
            return result.unsupported
        if not result.ok:
            return result.problem
        if result.applied:
            who = {"run": run.id, "agent": run.agent} if run is not None else {}
            self._row(task, safety, CheckpointKind.SAFETY, result, result.safety_commit, label=label, undoes=undoes,
                      **who)
            if result.commit:
                self._row(task, safety + 1, CheckpointKind.AFTER, result, result.commit, label=f"after: {label}", **who)
        return result, safety

    # -- what the user asks ---------------------------------------------------------------------------

    def _subtasks(self, rows: list[CheckpointRow]) -> list[tuple[CheckpointRow, CheckpointRow | None]]:
        """(before, after) of each Coding sub-task, oldest first: its first before- and its last after-checkpoint."""
        befores: dict[str, CheckpointRow] = {}
        afters: dict[str, CheckpointRow] = {}
        for row in rows:
            if row.kind == CheckpointKind.BEFORE and row.run_id not in befores:
                befores[row.run_id] = row
            elif row.kind == CheckpointKind.AFTER and row.run_id in befores:
                afters[row.run_id] = row
        return [(before, afters.get(run)) for run, before in befores.items()]

    def _off_note(self, task: TaskRow) -> str:
        if not self.settings.enabled:
            return "git checkpoints are turned off ([git_checkpoint] enabled = false)"
        return self._off.get(task.id, "")

    async def diff(self, task: TaskRow, *, patches: bool) -> TaskDiffReply:
        """What each Coding sub-task of `task` changed (asked in the project's line)."""
        ref = _Task(task.id, task.project_id, task.project_path)

        async def step() -> TaskDiffReply:
            rows = self._rows(task.id)
            pairs = self._subtasks(rows)
            reply = TaskDiffReply(id=0, task=task.id, checkpoints=[_info(r) for r in rows])
            if not pairs:
                reply.note = self._off_note(task) or "no Coding sub-task of this task has changed the project yet"
                return reply
            done = [(b, a) for b, a in pairs if a is not None]
            changes = []
            if done:
                result = await self.jobs.run(self._job(ref, CheckpointJobKind.DIFF, patches=patches,
                                                       pairs=[[b.commit, a.commit] for b, a in done]))
                if not result.ok:
                    reply.note = f"the changes could not be read: {result.unsupported or result.problem}"
                    return reply
                changes = result.changes
            by_run = {b.run_id: c for (b, _a), c in zip(done, changes, strict=False)}
            undone = {r.undoes: r.number for r in rows if r.undoes}
            for before, after in pairs:
                found = by_run.get(before.run_id)
                note = "not finished: no after-checkpoint yet" if after is None else (found.note if found else "")
                if before.run_id in undone:
                    note = (note + "; " if note else "") + f"undone (checkpoint {undone[before.run_id]} is how it was)"
                reply.subtasks.append(SubtaskChanges(run=before.run_id, agent=before.agent, task=before.label,
                                                     before=before.number, after=after.number if after else 0,
                                                     files=found.files if found else [], note=note))
            return reply

        return await self._in_line(ref, step)  # type: ignore[return-value]

    async def undo(self, task: TaskRow, *, to: int, apply: bool, force: bool) -> TaskUndoReply | str:
        """Undo the last sub-task not undone yet (`to` 0) or go back to checkpoint `to`; or why it cannot be done.
        Without `apply`, what it would change; it refuses over files the user changed since unless `force`."""
        ref = _Task(task.id, task.project_id, task.project_path)

        async def step() -> TaskUndoReply | str:
            rows = self._rows(task.id)
            if not rows:
                return self._off_note(task) or "this task has no checkpoints: no Coding sub-task of it has run yet"
            latest = rows[-1]
            if to:
                target = next((r for r in rows if r.number == to), None)
                if target is None:
                    return f"there is no checkpoint {to} in task {task.id} (its checkpoints: 1 to {latest.number})"
                scope_from, undoes = latest.commit, ""
                what = f"everything since checkpoint {to} ({target.kind}, {target.label})"
            else:
                undone = {r.undoes for r in rows if r.undoes}
                pairs = [(b, a) for b, a in self._subtasks(rows) if a is not None and b.run_id not in undone]
                if not pairs:
                    return "every Coding sub-task of this task is undone already (or none has finished)"
                target, after = pairs[-1]
                scope_from, undoes = after.commit, target.run_id
                what = f"the changes of {target.agent} sub-task {target.run_id} (checkpoints {target.number} → " \
                       f"{after.number}): {target.label}"
            label = f"before undoing {what}"[:_LABEL_CHARS]
            done = await self._restore(ref, target, scope_from=scope_from, expected=latest.commit, force=force,
                                       apply=apply, label=label, undoes=undoes)
            if isinstance(done, str):
                return done
            result, safety = done
            return TaskUndoReply(id=0, task=task.id, target=target.number, what=what, files=result.files,
                                 changed_since=result.changed_since, applied=result.applied,
                                 safety=safety if result.applied else 0, left=result.left)

        return await self._in_line(ref, step)  # type: ignore[return-value]

    # -- a turn's end, and retention ------------------------------------------------------------------

    def turn_ended(self, task: TaskRow, turn: int, text: str) -> None:
        """`[git_checkpoint] squash_on_exit`: the turn's sub-tasks as one commit on the task's agent branch."""
        settings = self.settings
        if not settings.enabled or not settings.squash_on_exit:
            return
        ref = _Task(task.id, task.project_id, task.project_path, turn)

        async def step() -> None:
            pairs = [(b, a) for b, a in self._subtasks(self._rows(task.id)) if b.turn == turn and a is not None]
            if not pairs:
                return
            branch = f"{settings.agent_branch_prefix}{task.id}"
            first = text.strip().splitlines()[0][:72] if text.strip() else f"task {task.id}"
            message = f"yagent: {first}" if settings.generate_commit_message else f"yagent: task {task.id}, turn {turn}"
            if settings.generate_commit_message:
                plural = "s" if len(pairs) != 1 else ""
                message += f"\n\nTask {task.id}, turn {turn}: the changes of {len(pairs)} sub-task{plural}:\n" + \
                    "\n".join(f"- {b.agent}: {b.label}" for b, _a in pairs)
            result = await self.jobs.run(self._job(
                ref, CheckpointJobKind.SQUASH, ref=f"refs/heads/{branch}", base=pairs[0][0].commit,
                target=pairs[-1][1].commit, message=message, merge=settings.auto_merge_on_exit,  # type: ignore[union-attr]
                delete_branch=settings.cleanup_agent_branch))
            text_out = result.detail if result.ok else f"the squash onto {branch} failed: " \
                                                       f"{result.unsupported or result.problem}"
            log.info("task %s turn %d: %s", task.id, turn, text_out)
            self._say(ref, "info" if result.ok else "warning", text_out)

        self._in_line(ref, step)

    async def prune(self, project_path: Callable[[str], str | None]) -> int:
        """Remove checkpoints older than `[git_checkpoint] retention` (their refs, then their record); how many.
        `project_path` gives a task's project directory (None: the task is gone)."""
        retention = self.settings.retention
        if retention <= 0:
            return 0
        old = self._services.registry.checkpoints_before(time.time() - retention)
        by_task: dict[str, list[CheckpointRow]] = {}
        for row in old:
            by_task.setdefault(row.task_id, []).append(row)
        removed = 0
        for task_id, rows in by_task.items():
            root = project_path(task_id)
            if root is None:
                continue
            ref = _Task(task_id, rows[0].project_id, root)

            async def step(rows: list[CheckpointRow] = rows, ref: _Task = ref) -> int:
                result = await self.jobs.run(self._job(ref, CheckpointJobKind.PRUNE,
                                                       delete_refs=[r.ref for r in rows]))
                if not result.ok:
                    log.warning("task %s: old checkpoint refs not removed: %s", ref.id,
                                result.unsupported or result.problem)
                    if not result.unsupported:
                        return 0
                self._services.registry.forget_checkpoints(rows)  # a repository that is gone: its record goes too
                return len(rows)

            removed += int(await self._in_line(ref, step))  # type: ignore[arg-type]
        return removed

