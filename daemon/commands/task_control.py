"""`control`: pause, continue or cancel every live run of a task; `continue` of a task whose last turn was
interrupted (the daemon stopped or died) or cancelled resumes that turn where it stopped."""

from __future__ import annotations

from yagent.ipc.config import ConfigError
from yagent.ipc.messages import Ack, TaskControl
from yagent.ipc.resumable import stopped_midway
from yagent.ipc.vocabulary import ControlAction, ErrorCode

from ..registry import TaskRow
from ..turn_keys import TurnKeyError
from . import CommandError, DaemonView, command, resolve_task


@command(TaskControl, in_background=True)  # a resumed turn may ask a model server which models it has
async def task_control(daemon: DaemonView, msg: TaskControl) -> Ack:
    row = resolve_task(daemon, msg.task)
    try:
        action = ControlAction(msg.action)
    except ValueError:
        raise CommandError(ErrorCode.BAD_REQUEST,
                           f"unknown action {msg.action!r}; use pause, continue or cancel") from None
    task = daemon.tasks.get(row.id)
    idle = task is None or not task.busy
    if action is ControlAction.CONTINUE and idle and last_turn_stopped_midway(daemon, row):
        return await _resume(daemon, msg, row)
    if task is None or not task.busy:  # busy: a turn in progress, or background work a finished turn kept
        raise CommandError(ErrorCode.NOT_RUNNING, f"task {row.id} has no turn in progress (state: {row.state}); "
                                                  f"nothing to {action.value}")
    if action is ControlAction.PAUSE:
        task.pause()
    elif action is ControlAction.CONTINUE:
        task.resume()
    else:
        task.cancel()
    return Ack(id=msg.id, task=row.id, state=task.row.state, detail=action.value)


def last_turn_stopped_midway(daemon: DaemonView, row: TaskRow) -> bool:
    """Whether `continue` resumes the task's last turn (`ipc.resumable`), from what the registry recorded."""
    turn = daemon.registry.last_turn(row.id)
    runs = daemon.registry.runs_of(row.id, turn) if turn is not None else []
    return stopped_midway(row.state, [r.stop_reason for r in runs if r.parent_run is None])


async def _resume(daemon: DaemonView, msg: TaskControl, row: TaskRow) -> Ack:
    if daemon.shutting_down:
        raise CommandError(ErrorCode.SHUTTING_DOWN,
                           "yagentd is shutting down; start it again with `yagent daemon start`, then continue")
    turns = daemon.registry.turns(row.id)
    stopped = turns[-1] if turns else None
    if stopped is None or not stopped.root_run:
        raise CommandError(ErrorCode.NOT_RUNNING, f"task {row.id} has no turn to resume (state: {row.state}); "
                                                  "send it a new message instead")
    try:
        daemon.refresh_settings()
    except ConfigError as exc:
        raise CommandError(ErrorCode.BAD_CONFIG, "\n".join(exc.lines())) from None
    try:
        keys = await daemon.turn_keys.for_turn(daemon.settings, msg.env)
    except TurnKeyError as exc:
        raise CommandError(exc.code, str(exc)) from None
    # Nothing awaits from here on: the task is looked at again, and resumed, in one step.
    task = daemon.tasks.get(row.id)
    if daemon.shutting_down or (task is not None and task.in_flight):
        raise CommandError(ErrorCode.BUSY, f"task {row.id} changed while its resume was prepared; `yagent ps` shows "
                                           "its state")
    task = daemon.turn_for(row)
    task.resume_stopped(stopped, keys)
    return Ack(id=msg.id, task=row.id, state=task.row.state,
               detail=f"resumed turn {stopped.turn} as turn {task.turn}")
