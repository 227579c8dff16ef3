"""`submit`: a user turn — creates the task when needed and hands the turn to the task's controller."""

from __future__ import annotations

from pathlib import Path

from yagent.ipc.config import ConfigError
from yagent.ipc.messages import Submit, Submitted
from yagent.ipc.vocabulary import ErrorCode, YoloLevel

from ..turn_keys import TurnKeyError
from . import CommandError, DaemonView, command, resolve_task


@command(Submit, in_background=True)  # a zero-config start may ask the model server which models it has
async def submit(daemon: DaemonView, msg: Submit) -> Submitted:
    if daemon.shutting_down:
        raise CommandError(ErrorCode.SHUTTING_DOWN,
                           "yagentd is shutting down; start it again with `yagent daemon start`")
    if not msg.text.strip():
        raise CommandError(ErrorCode.BAD_REQUEST, "the message is empty; say what you want done")
    if msg.yolo not in {y.value for y in YoloLevel}:
        raise CommandError(ErrorCode.BAD_REQUEST, f"unknown yolo level {msg.yolo!r}; use none, yolo or full")
    if not msg.agent.strip():
        raise CommandError(ErrorCode.BAD_REQUEST, "no agent kind given")
    try:
        daemon.refresh_settings()
    except ConfigError as exc:
        raise CommandError(ErrorCode.BAD_CONFIG, "\n".join(exc.lines())) from None
    try:
        keys = await daemon.turn_keys.for_turn(daemon.settings, msg.env)
    except TurnKeyError as exc:
        raise CommandError(exc.code, str(exc)) from None
    if daemon.shutting_down:  # while the model server was asked
        raise CommandError(ErrorCode.SHUTTING_DOWN,
                           "yagentd is shutting down; start it again with `yagent daemon start`")
    # From here on nothing awaits: the check that the task is idle and the turn's start are one step.
    if msg.task:
        row = resolve_task(daemon, msg.task)
    else:
        path = Path(msg.project)
        if not path.is_absolute():
            raise CommandError(ErrorCode.BAD_PROJECT, f"project path {msg.project!r} must be absolute")
        if not path.is_dir():
            raise CommandError(ErrorCode.BAD_PROJECT,
                               f"project directory {msg.project} does not exist or is not a directory")
        project = daemon.registry.ensure_project(path.resolve())
        row = daemon.registry.create_task(project, " ".join(msg.text.split())[:80])
    task = daemon.turn_for(row)
    if task.in_flight:
        raise CommandError(ErrorCode.BUSY, f"task {row.id} is still working on turn {task.turn}; wait for it to "
                                           f"finish, or stop it with `yagent cancel {row.id}`")
    root = task.start(msg.text, msg.agent, yolo=msg.yolo, options=msg.options, keys=keys)
    return Submitted(id=msg.id, task=row.id, turn=task.turn, run=root.id, project=row.project_path,
                     notice=keys.zero.describe() if keys.zero else "")
