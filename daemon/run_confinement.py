"""The confinement spec a run's worker gets at launch, and the state directories it needs, made beforehand.

The daemon decides whether a run is confined (`[sandbox] mode`, the turn's yolo level, the kernel's Landlock
ABI) and where its state lives; the worker decides from its kind's tool profile whether it may write the
project. Landlock rules need paths that exist, so the task's, the run's and the shared state dirs are made
here, private to the user, before the fork.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from yagent.ipc.config import Settings
from yagent.ipc.confinement import ConfinementSpec
from yagent.ipc.messages import RunSpec
from yagent.ipc.project_instructions import instruction_candidates, instructions_root
from yagent.ipc.skills_settings import expand_home
from yagent.ipc.state_layout import approvals_dir, blueprint_dir, breaker_dir, scratch_dir, task_dir
from yagent.ipc.vocabulary import Unconfined, YoloLevel

__all__ = ["REQUIRED_BUT_MISSING", "confinement_for", "confinement_status", "instruction_files_above",
           "why_unconfined"]

REQUIRED_BUT_MISSING = (
    "[sandbox] required = true, but this kernel has no Landlock (Linux 5.13 or later with `landlock` in the "
    "`lsm=` boot parameter), so runs cannot be confined and none is started; run on a kernel with Landlock, or "
    "set `[sandbox] required = false` in config.toml to run unconfined")


def confinement_status(settings: Settings, abi: int) -> str:
    """One line on how runs are confined, for the daemon's log and `yagent daemon status`."""
    if not settings.sandbox.enabled:
        return 'off ([sandbox] mode = "off"): runs are not confined'
    if abi < 1:
        if settings.sandbox.required:
            return "Landlock is missing and [sandbox] required = true: runs are refused"
        return ("Landlock is missing on this kernel: runs are NOT confined (set [sandbox] required = true to "
                "refuse them instead)")
    return f"Landlock ABI {abi}: runs are confined (except those sent with --full-yolo)"


def why_unconfined(settings: Settings, yolo: str, abi: int) -> Unconfined | None:
    """Why a run of this yolo level would not be confined (None: it is)."""
    if not settings.sandbox.enabled:
        return Unconfined.SANDBOX_OFF
    if yolo == YoloLevel.FULL:
        return Unconfined.FULL_YOLO
    if abi < 1:
        return Unconfined.LANDLOCK_MISSING
    return None


def confinement_for(spec: RunSpec, settings: Settings, *, abi: int, runtime_dir: Path,
                    user_home: Path | None = None, git_namespace: bool = False) -> ConfinementSpec:
    """The run's confinement spec, its state directories created (OSError if they cannot be)."""
    home = Path(spec.home)
    task, scratch = task_dir(home, spec.task), scratch_dir(home, spec.run)
    shared, approvals = [breaker_dir(home)], approvals_dir(home)
    for directory in (task, scratch, *shared, approvals):
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    writable, deny = settings.sandbox.expanded(str(user_home or Path.home()))
    skills = settings.run_settings.skills
    skill_dirs = [str(home / "skills"), *(expand_home(d, str(user_home or Path.home())) for d in skills.dirs)
                  ] if skills.enabled else []
    blueprint = ""
    if settings.run_settings.blueprint.enabled:  # read by every run, written by a Repo run's completion alone
        made = blueprint_dir(home, spec.project)
        made.mkdir(mode=0o700, parents=True, exist_ok=True)
        blueprint = str(made)
    return ConfinementSpec(
        abi=abi, agent=spec.agent, project_root=spec.project_root, home=str(home), runtime_dir=str(runtime_dir),
        task_dir=str(task), scratch_dir=str(scratch), unconfined=why_unconfined(settings, spec.yolo, abi),
        required=settings.sandbox.required, shared_dirs=[str(p) for p in shared], approvals_dir=str(approvals),
        writable_roots=writable,
        deny_read=deny, git_namespace=git_namespace, skill_dirs=skill_dirs, blueprint_dir=blueprint,
        blueprint_writable=bool(blueprint) and spec.agent == "repo",
        read_files=instruction_files_above(spec, hidden=[str(home), str(runtime_dir), *deny])
        if spec.parent_run is None else [])


def _within(path: str, tree: str) -> bool:
    return path == tree or path.startswith(tree.rstrip("/") + "/")


def instruction_files_above(spec: RunSpec, *, hidden: list[str]) -> list[str]:
    """The real paths of the root run's instruction files above its project directory (the Director reads them;
    a confined worker reads only the project's own tree): regular files inside the project's root tree (a link
    pointing out of it grants nothing), none inside the state home, the runtime directory or `deny_read`. Names
    and types are looked at, never contents."""
    workdir = Path(spec.project_root)
    project = os.path.realpath(workdir)
    root = os.path.realpath(instructions_root(workdir))
    shielded = [os.path.realpath(p) for p in hidden]
    found: list[str] = []
    for candidate in instruction_candidates(workdir):
        real = os.path.realpath(candidate)
        if _within(real, project) or not _within(real, root) or any(_within(real, tree) for tree in shielded):
            continue
        try:
            if not stat.S_ISREG(os.stat(real).st_mode):
                continue
        except OSError:
            continue
        found.append(real)
    return found
