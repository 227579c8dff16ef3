"""`control`: pause, continue or cancel every live run of a task."""

from __future__ import annotations

from yagent.ipc.messages import Ack, TaskControl
from yagent.ipc.vocabulary import ControlAction, ErrorCode

from . import CommandError, DaemonView, command, resolve_task


@command(TaskControl)
async def task_control(daemon: DaemonView, msg: TaskControl) -> Ack:
    row = resolve_task(daemon, msg.task)
    try:
        action = ControlAction(msg.action)
    except ValueError:
        raise CommandError(ErrorCode.BAD_REQUEST,
                           f"unknown action {msg.action!r}; use pause, continue or cancel") from None
    task = daemon.tasks.get(row.id)
    if task is None or not task.in_flight:
        raise CommandError(ErrorCode.NOT_RUNNING, f"task {row.id} has no turn in progress (state: {row.state}); "
                                                  f"nothing to {action.value}")
    if action is ControlAction.PAUSE:
        task.pause()
    elif action is ControlAction.CONTINUE:
        task.resume()
    else:
        task.cancel()
    return Ack(id=msg.id, task=row.id, state=task.row.state, detail=action.value)
