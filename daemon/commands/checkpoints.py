"""`task_diff` and `task_undo`: what a task's agents changed in the project, and taking it back (`yagent diff`,
`yagent undo`, `/diff`, `/undo`).

Both are answered in the background: each waits for the project's line of checkpoint jobs (a turn's last
checkpoint comes first) and runs a short git process. An undo is refused while the task has a turn in progress
(its agents are still writing); without `apply` it only says what it would change, and with it it still refuses
over files the user changed since, naming them, unless `force`.
"""

from __future__ import annotations

from yagent.ipc.messages import TaskDiff, TaskDiffReply, TaskUndo, TaskUndoReply
from yagent.ipc.vocabulary import ErrorCode

from ..checkpoints import CheckpointService
from . import CommandError, DaemonView, command, resolve_task

__all__ = ["task_diff", "task_undo"]


def _service(daemon: DaemonView) -> CheckpointService:
    service = daemon.checkpoints
    if service is None:
        raise CommandError(ErrorCode.SHUTTING_DOWN, "yagentd is not serving checkpoints now; try again in a moment")
    return service


@command(TaskDiff, in_background=True)
async def task_diff(daemon: DaemonView, msg: TaskDiff) -> TaskDiffReply:
    row = resolve_task(daemon, msg.task)
    reply = await _service(daemon).diff(row, patches=msg.patches)
    reply.id = msg.id
    return reply


@command(TaskUndo, in_background=True)
async def task_undo(daemon: DaemonView, msg: TaskUndo) -> TaskUndoReply:
    row = resolve_task(daemon, msg.task)
    if msg.to < 0:
        raise CommandError(ErrorCode.BAD_REQUEST, f"checkpoint numbers start at 1 (got {msg.to}); "
                                                  "`yagent diff` lists the task's checkpoints")
    live = daemon.tasks.get(row.id)
    if live is not None and live.in_flight:
        raise CommandError(ErrorCode.BUSY, f"task {row.id} has a turn in progress: its agents may still be writing. "
                                           f"Wait for it to end (or `yagent cancel {row.id}`), then undo")
    done = await _service(daemon).undo(row, to=msg.to, apply=msg.apply, force=msg.force)
    if isinstance(done, str):
        raise CommandError(ErrorCode.BAD_REQUEST, done)
    done.id = msg.id
    return done
