"""`control`: pause, continue or cancel every live run of a task."""

from __future__ import annotations

from yagent.ipc.messages import Ack, TaskControl
from yagent.ipc.vocabulary import ControlAction, StopReason

from . import CommandError, command, resolve_task


@command(TaskControl)
async def task_control(daemon, msg: TaskControl) -> Ack:
    row = resolve_task(daemon, msg.task)
    try:
        action = ControlAction(msg.action)
    except ValueError:
        raise CommandError("bad_request", f"unknown action {msg.action!r}; use pause, continue or cancel") from None
    task = daemon.tasks.get(row.id)
    if task is None or not task.in_flight:
        raise CommandError("not_running", f"task {row.id} has no turn in progress (state: {row.state}); "
                                          f"nothing to {action.value}")
    if action is ControlAction.PAUSE:
        daemon.pause_task(task)
    elif action is ControlAction.CONTINUE:
        daemon.continue_task(task)
    else:
        assert task.root is not None
        daemon.stop_run(task.root, StopReason.CANCELLED, "cancelled by the user")
    return Ack(id=msg.id, task=row.id, state=task.row.state, detail=action.value)
