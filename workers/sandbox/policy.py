"""What a worker and its commands may read and write, as Landlock rules built from a `ConfinementSpec`.

Landlock rules are allow-lists over whole trees, so nothing is excluded: what must stay unreadable (the state
home with the config file and other tasks' state, the runtime directory with the control credential, the
`deny_read` entries) is kept out by listing the siblings around it, one level at a time (`_around`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable

from yagent.ipc.confinement import ConfinementSpec

from ._landlock import IOCTL_DEV, READ, READ_FILE, WRITE, WRITE_FILE, Rule

__all__ = ["SYSTEM_TREES", "shell_rules", "worker_rules"]

# Read (and execute) everywhere beneath these; /run is listed around the runtime directory instead.
SYSTEM_TREES = ("/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/etc", "/opt", "/proc", "/sys",
                "/snap", "/nix")
# Devices a process writes without meaning a file: output sinks, terminals.
_WRITABLE_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/ptmx", "/dev/pts")
_READ_WRITE = READ | WRITE


def worker_rules(spec: ConfinementSpec, writes_project: bool, *, home: str | None = None) -> list[Rule]:
    """The worker's own domain: read the read set; write its task's state, the shared state dirs, its scratch
    dir, the writable roots (its commands' domain nests inside this one, so it must hold them too) and, for an
    agent whose profile writes files, the project."""
    writable = [spec.task_dir, spec.scratch_dir, *spec.shared_dirs, *spec.writable_roots]
    if writes_project:
        writable.append(spec.project_root)
    return [*_read_set(spec, home), *(Rule(p, _READ_WRITE) for p in writable), *_devices()]


def shell_rules(spec: ConfinementSpec, writes_project: bool, *, home: str | None = None) -> list[Rule]:
    """A `run_bash` command's nested domain: the read set, and writes to its scratch dir (its TMPDIR), the
    writable roots and, for Coding, the project — never the task's state (memory, grants) or the shared
    approvals, so a command can neither approve itself nor rewrite the conversation."""
    writable = [spec.scratch_dir, *spec.writable_roots]
    if writes_project:
        writable.append(spec.project_root)
    return [*_read_set(spec, home, own_state=False), *(Rule(p, _READ_WRITE) for p in writable), *_devices()]


def _devices() -> list[Rule]:
    # /dev as a whole is readable (random, urandom, fd links); ioctl on terminals (stty, isatty) is allowed.
    return [Rule("/dev", READ | IOCTL_DEV), *(Rule(p, READ_FILE | WRITE_FILE | IOCTL_DEV) for p in _WRITABLE_DEVICES)]


def _read_set(spec: ConfinementSpec, home: str | None, *, own_state: bool = True) -> list[Rule]:
    hidden = [spec.home, spec.runtime_dir, *spec.deny_read]
    # Each tree is listed around what must stay hidden: a sys.path entry (the daemon's working directory), the
    # project or $HOME may hold the state home or the runtime directory.
    readable: list[str] = [*SYSTEM_TREES, *_python_trees(), *_command_trees(), spec.project_root,
                           *spec.writable_roots]
    own = [spec.task_dir, *spec.shared_dirs] if own_state else []
    user_home = home if home is not None else os.path.expanduser("~")
    rules = [Rule(p, READ) for p in [spec.scratch_dir, *own]]  # beneath the state home, allowed by name
    for tree in [*readable, user_home, "/run"]:
        rules += (Rule(p, READ) for p in _around(tree, hidden))
    return rules


def _command_trees() -> list[str]:
    """Every $PATH directory, and the tool root of a `bin` or `shims` one (~/.pyenv, ~/.cargo, ~/.nvm/...):
    a version manager's shim runs code from beside it."""
    trees: set[str] = set()
    for entry in os.environ.get("PATH", "").split(os.pathsep):
        if entry and os.path.isabs(entry):
            trees.add(entry)
            if os.path.basename(entry.rstrip("/")) in ("bin", "shims"):
                trees.add(os.path.dirname(entry.rstrip("/")))
    return sorted(trees)


def _python_trees() -> list[str]:
    """The interpreter, its standard library and every import location (a venv under /tmp included)."""
    trees = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable))}
    trees.update(p for p in sys.path if p and os.path.isabs(p))
    # yagent's own packages: an editable install maps them from a source tree that is on no sys.path entry.
    trees.add(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ipc = sys.modules.get("yagent.ipc")
    if ipc is not None and getattr(ipc, "__file__", None):
        trees.add(os.path.dirname(os.path.abspath(ipc.__file__)))
    return sorted(trees)


def _around(tree: str, hidden: Iterable[str]) -> list[str]:
    """Paths that together cover `tree` except the `hidden` paths beneath it: the tree itself when nothing is
    hidden in it, else its entries, each the same way."""
    hidden_real = [os.path.realpath(h) for h in hidden]
    real = os.path.realpath(tree)
    if _inside_any(real, hidden_real):
        return []
    if not any(_inside(h, real) for h in hidden_real):
        return [tree]
    try:
        names = os.listdir(tree)
    except OSError:
        return []
    out: list[str] = []
    for name in names:
        out += _around(os.path.join(tree, name), hidden_real)
    return out


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _inside_any(path: str, roots: Iterable[str]) -> bool:
    return any(_inside(path, r) for r in roots)
