"""`yagent blueprint`: a project's blueprint shown by a short process the daemon starts (the daemon parses no file a
worker writes), confined to reading the project and its blueprint directory (`workers/blueprint/view_process.py`).

The process is started from the forkserver off the event loop, given `DEADLINE` seconds (its derivation reads every
source file of the project once) and killed past it; its one reply is read as msgpack, at most `MAX_REPLY_BYTES`,
never unpickled. One that dies, hangs or answers garbage is a reply saying so, never an exception.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from yagent.ipc.config import Settings
from yagent.ipc.confinement import ConfinementSpec
from yagent.ipc.errors import ProtocolError
from yagent.ipc.messages import BlueprintShown, BlueprintViewSpec
from yagent.ipc.records import decode
from yagent.ipc.state_layout import blueprint_dir

from .job_process import JobProcess
from .launcher import Launcher
from .run_confinement import why_unconfined

__all__ = ["DEADLINE", "MAX_REPLY_BYTES", "show_blueprint"]

DEADLINE = 60.0
MAX_REPLY_BYTES = 4 * 1024 * 1024


async def show_blueprint(launcher: Launcher, settings: Settings, *, home: Path, runtime_dir: Path, abi: int,
                         project_root: str, project_id: str, module: str = "") -> BlueprintShown:
    """The blueprint of the project, as its view process renders it."""
    if not settings.run_settings.blueprint.enabled:
        return BlueprintShown(id=0, project=project_root, text="", problem=(
            "the repository blueprint is turned off ([blueprint] enable = false, or YAGENT_BLUEPRINT=0 in yagentd's "
            "environment)"))
    directory = blueprint_dir(home, project_id)
    await asyncio.to_thread(directory.mkdir, mode=0o700, parents=True, exist_ok=True)
    _writable, deny = settings.sandbox.expanded(str(Path.home()))
    confinement = ConfinementSpec(abi=abi, agent="blueprint", project_root=project_root, home=str(home),
                                  runtime_dir=str(runtime_dir), task_dir="", scratch_dir="",
                                  unconfined=why_unconfined(settings, "none", abi), required=settings.sandbox.required,
                                  deny_read=deny, blueprint_dir=str(directory))
    spec = BlueprintViewSpec(project_root=project_root, blueprint_dir=str(directory), module=module)
    holder = JobProcess()
    work = asyncio.ensure_future(asyncio.to_thread(_blocking, launcher, spec, confinement, holder))
    try:
        async with asyncio.timeout(DEADLINE):
            return await asyncio.shield(work)
    except TimeoutError:
        return BlueprintShown(id=0, project=project_root, text="", problem=(
            f"reading the project took longer than {DEADLINE:g}s and was stopped; try again when the machine is "
            "less busy"))
    finally:
        holder.abandon()


def _blocking(launcher: Launcher, spec: BlueprintViewSpec, confinement: ConfinementSpec, holder: JobProcess
              ) -> BlueprintShown:
    def failed(problem: str) -> BlueprintShown:
        return BlueprintShown(id=0, project=spec.project_root, text="", problem=problem)

    try:
        handle, reader = launcher.launch_blueprint_view(uuid.uuid4().hex[:8], spec, confinement=confinement)
    except (OSError, ValueError, NotImplementedError) as exc:
        return failed(f"its process could not be started ({exc})")
    try:
        if not holder.started(handle):
            return failed("it was given up on before it started")
        try:
            frame = reader.recv_bytes(MAX_REPLY_BYTES)
        except EOFError:
            return failed("its process ended without a reply")
        except OSError as exc:
            return failed(f"its reply was refused ({exc})")
        try:
            shown = decode(frame)
        except ProtocolError as exc:
            return failed(f"its reply could not be read ({exc})")
        return shown if isinstance(shown, BlueprintShown) else failed(f"it sent a {shown.kind} message")
    finally:
        holder.finish(handle, reader)
