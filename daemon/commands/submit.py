"""`submit`: a user turn — creates the task when needed and starts its root run."""

from __future__ import annotations

from pathlib import Path

from yagent.ipc.config import ConfigError
from yagent.ipc.messages import Submit, Submitted
from yagent.ipc.vocabulary import EventType, TaskState, YoloLevel

from ..run_clock import RunClock
from . import CommandError, command, resolve_task


@command(Submit)
async def submit(daemon, msg: Submit) -> Submitted:
    if daemon.shutting_down:
        raise CommandError("shutting_down", "yagentd is shutting down; start it again with `yagent daemon start`")
    if not msg.text.strip():
        raise CommandError("bad_request", "the message is empty; say what you want done")
    if msg.yolo not in {y.value for y in YoloLevel}:
        raise CommandError("bad_request", f"unknown yolo level {msg.yolo!r}; use none, yolo or full")
    if not msg.agent.strip():
        raise CommandError("bad_request", "no agent kind given")
    try:
        daemon.refresh_settings()
    except ConfigError as exc:
        raise CommandError("bad_config", "\n".join(exc.lines())) from None
    if msg.task:
        row = resolve_task(daemon, msg.task)
    else:
        path = Path(msg.project)
        if not path.is_absolute():
            raise CommandError("bad_project", f"project path {msg.project!r} must be absolute")
        if not path.is_dir():
            raise CommandError("bad_project", f"project directory {msg.project} does not exist or is not a directory")
        project = daemon.registry.ensure_project(path.resolve())
        title = " ".join(msg.text.split())[:80]
        row = daemon.registry.create_task(project, title)
    task = daemon.live_task(row)
    if task.in_flight:
        raise CommandError("busy", f"task {row.id} is still working on turn {task.turn}; wait for it to finish, "
                                   f"or stop it with `yagent cancel {row.id}`")
    turn = daemon.registry.add_turn(row.id, msg.text)
    task.turn = turn
    task.paused = False
    task.turn_clock = RunClock(daemon.clock())
    run = daemon.create_run(task, turn, msg.agent, msg.text, yolo=msg.yolo, options=msg.options)
    task.root = run
    daemon.registry.set_turn_root(row.id, turn, run.id)
    daemon.registry.set_task_state(row.id, TaskState.RUNNING)
    row.state = TaskState.RUNNING
    daemon.publish(task, EventType.TURN_STARTED, {"turn": turn, "text": msg.text, "agent": msg.agent,
                                                  "project": row.project_path}, run)
    daemon.admit(run)
    return Submitted(id=msg.id, task=row.id, turn=turn, run=run.id, project=row.project_path)
