"""What a worker needs to confine itself, handed to it at launch, and whether the kernel can confine at all.

A worker confines itself first thing after the fork, before it has said a word to the daemon (Landlock
holds only for threads started after it, and the channel's first act starts libzmq's threads), so this
record travels with the launch, not in `StartRun`. The daemon builds it from the run and `[sandbox]`; the
worker decides from its agent kind's tool profile whether the project is in its write set.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Mapping
from dataclasses import field

from .records import Record, record
from .vocabulary import Unconfined

__all__ = ["ABI_ENV", "USERNS_ENV", "ConfinementSpec", "landlock_abi", "user_namespaces"]

# The one place the ABI can be lowered from outside: `YAGENT_LANDLOCK_ABI=0 yagentd` behaves as on a kernel
# without Landlock, `=5` as on one without scopes. It never raises the ABI above what the kernel has.
ABI_ENV = "YAGENT_LANDLOCK_ABI"
# `YAGENT_USER_NAMESPACES=0 yagentd` behaves as on a system without unprivileged user namespaces.
USERNS_ENV = "YAGENT_USER_NAMESPACES"
_MAX_USER_NAMESPACES = "/proc/sys/user/max_user_namespaces"
_CREATE_RULESET = {"x86_64": 444, "aarch64": 444}
_CREATE_RULESET_VERSION = 1


@record
class ConfinementSpec(Record):
    """How one run's worker confines itself; `unconfined` set: it does not, and that is why."""

    abi: int  # the Landlock ABI the daemon found (0: none); the worker uses no more than this
    agent: str  # the run's agent kind: its tool profile decides whether the project is writable
    project_root: str
    home: str  # $YAGENT_HOME: never readable as a whole
    runtime_dir: str  # the daemon's sockets and the control credential: never readable
    task_dir: str  # the task's own state: writable by its workers, never by their commands
    scratch_dir: str  # the run's scratch space: TMPDIR of its commands
    unconfined: Unconfined | None = None
    required: bool = False  # [sandbox] required: a worker that cannot confine refuses to run
    shared_dirs: list[str] = field(default_factory=list)  # state every worker writes (the circuit breakers)
    # The project approvals (`state_layout.approvals_dir`): read by the worker, never its commands; written by the
    # daemon alone, from the answers it relayed ("": none are read).
    approvals_dir: str = ""
    writable_roots: list[str] = field(default_factory=list)  # [sandbox] writable_roots, expanded
    deny_read: list[str] = field(default_factory=list)  # [sandbox] deny_read, expanded
    git_namespace: bool = False  # a worker that writes the project sees its .git hooks and config read-only
    # Single files above the project the worker reads (its instruction files, `project_instructions`): readable
    # by the worker alone, never by its commands; regular files only, by their real path.
    read_files: list[str] = field(default_factory=list)
    # Skill directories read besides the system, the home and the project: $YAGENT_HOME/skills (inside the state
    # home, otherwise hidden) and [skills] dirs — each only where it does not lead into what stays hidden.
    skill_dirs: list[str] = field(default_factory=list)
    # The project's persisted blueprint (`state_layout.blueprint_dir`, in the state home): read by the worker (never its
    # commands), written only by a Repo run's, whose completion folds its entries in ("": the blueprint is off).
    blueprint_dir: str = ""
    blueprint_writable: bool = False


def landlock_abi(environ: Mapping[str, str] | None = None) -> int:
    """The Landlock ABI version of the running kernel (0 where there is none), capped by `YAGENT_LANDLOCK_ABI`."""
    env = os.environ if environ is None else environ
    abi = _kernel_abi()
    cap = env.get(ABI_ENV, "").strip()
    if cap.isdigit():
        abi = min(abi, int(cap))
    return abi


def user_namespaces(environ: Mapping[str, str] | None = None) -> bool:
    """Whether this process may create user namespaces (read once here; `YAGENT_USER_NAMESPACES=0` says no)."""
    env = os.environ if environ is None else environ
    if env.get(USERNS_ENV, "").strip() == "0":
        return False
    try:
        with open(_MAX_USER_NAMESPACES) as fh:
            allowed = int(fh.read().strip() or 0)
    except (OSError, ValueError):
        return False
    return allowed > 0


def _kernel_abi() -> int:
    number = _CREATE_RULESET.get(os.uname().machine)
    if number is None or os.uname().sysname != "Linux":
        return 0
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        version = libc.syscall(number, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    except (OSError, AttributeError):
        return 0
    return max(0, int(version))
