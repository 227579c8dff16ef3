"""`show_blueprint`: a project's repository blueprint (`yagent blueprint`, `/blueprint`), rendered by a short process
(`blueprint_views.py`); answered in the background, the control loop serves on meanwhile."""

from __future__ import annotations

from pathlib import Path

from yagent.ipc.messages import BlueprintShown, ShowBlueprint
from yagent.ipc.vocabulary import ErrorCode

from ..blueprint_views import show_blueprint
from . import CommandError, DaemonView, command


@command(ShowBlueprint, in_background=True)
async def blueprint(daemon: DaemonView, msg: ShowBlueprint) -> BlueprintShown:
    root = Path(msg.project)
    if not root.is_absolute() or not root.is_dir():
        raise CommandError(ErrorCode.BAD_PROJECT, f"{msg.project} is not a project directory (an absolute path to one)")
    project = daemon.registry.ensure_project(root.resolve())
    shown = await show_blueprint(daemon.launcher, daemon.settings, home=daemon.home, runtime_dir=daemon.paths.root,
                                 abi=daemon.landlock_abi, project_root=project.path, project_id=project.id,
                                 module=msg.module)
    shown.id = msg.id
    return shown
