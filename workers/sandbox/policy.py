"""What a worker and its commands may read and write, as Landlock rules built from a `ConfinementSpec`.

Landlock rules are allow-lists over whole trees, so nothing is excluded: what must stay unreadable (the state
home with the config file and other tasks' state, the runtime directory with the control credential, the
`deny_read` entries) is kept out by listing the siblings around it, one level at a time (`_around`). The one
part of the state home a run reads is `$YAGENT_HOME/skills`, the user's skills, and only as a real directory.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable

from yagent.ipc.confinement import ConfinementSpec

from ._landlock import IOCTL_DEV, READ, READ_FILE, WRITE, WRITE_FILE, Rule
from ._landlock import load as load_landlock

__all__ = ["SYSTEM_TREES", "approved_rules", "blueprint_view_rules", "checkpoint_rules", "code_server_rules",
           "inspection_rules", "minimal", "rule_sets", "shared_read_rules", "shell_rules", "warm",
           "warmed_shared_rules", "worker_rules"]

# Read (and execute) everywhere beneath these; /run is listed around the runtime directory instead.
SYSTEM_TREES = ("/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/etc", "/opt", "/proc", "/sys",
                "/snap", "/nix")
# Devices a process writes without meaning a file: output sinks, terminals.
_WRITABLE_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/ptmx", "/dev/pts")
_READ_WRITE = READ | WRITE


def rule_sets(spec: ConfinementSpec, writes_project: bool, *, home: str | None = None,
              shared: list[Rule] | None = None) -> tuple[list[Rule], list[Rule]]:
    """(the worker's domain, its commands' nested domain), the read set worked out once for both; `shared`: the
    read rules every run shares, when the caller has them already (`shared_read_rules`).

    The worker reads the read set and the project approvals, and writes its task's state, the shared state dirs
    (circuit breakers), its scratch dir, the writable roots (its commands' domain nests inside this one, so it must
    hold them too) and, for an agent whose profile writes files, the project. A `run_bash` command writes only its
    scratch dir (its TMPDIR), the writable roots and, for Coding, the project — never the task's state or the
    approvals, which it cannot even read, so a command can neither approve itself nor rewrite the conversation."""
    read = _read_set(spec, home, shared)
    shell_writes = [spec.scratch_dir, *spec.writable_roots, *([spec.project_root] if writes_project else [])]
    shell = [*read, *(Rule(p, _READ_WRITE) for p in shell_writes)]
    worker = [*shell, *(Rule(p, _READ_WRITE) for p in (spec.task_dir, *spec.shared_dirs)),
              *(Rule(p, READ_FILE) for p in spec.read_files)]
    if spec.approvals_dir:  # the daemon writes what the user approved; a run that could would approve itself
        worker.append(Rule(spec.approvals_dir, READ))
    if spec.blueprint_dir:  # the worker's alone: its commands never see the state home
        worker.append(Rule(spec.blueprint_dir, _READ_WRITE if spec.blueprint_writable else READ))
    return minimal(worker), minimal(shell)


def approved_rules(spec: ConfinementSpec, writes_project: bool, approved: Iterable[str], *, home_writable: bool,
                   home: str | None = None) -> list[Rule]:
    """The domain of a process the daemon starts for one approved operation: the run's command domain plus each
    approved path (an existing directory: itself; anything else: the directory it lies in, since a Landlock
    rule needs a file that exists) and, for an approved command, the user's home listed around what stays
    hidden (`home_writable`: what a global install or a dotfile edit needs)."""
    rules = rule_sets(spec, writes_project, home=home)[1]
    for path in approved:
        real = os.path.realpath(path)
        target = real if os.path.isdir(real) else _existing_parent(real)
        rules.append(Rule(target, _READ_WRITE))
    if home_writable:
        user_home = os.path.normpath(home if home is not None else os.path.expanduser("~"))
        hidden = [os.path.realpath(p) for p in (spec.home, spec.runtime_dir, *spec.deny_read)]
        rules += (Rule(p, _READ_WRITE) for p in _around(user_home, hidden, os.path.realpath(user_home)))
    return minimal(rules)


def inspection_rules(spec: ConfinementSpec, *, task_dir_fd: int, home: str | None = None) -> list[Rule]:
    """The domain of a resume inspection: it reads the system and Python trees, the project and the task's
    state (held open as `task_dir_fd`, so a link swapped in for it grants nothing) and writes nothing at all —
    not even a device."""
    hidden = [os.path.realpath(p) for p in (spec.home, spec.runtime_dir, *spec.deny_read)]
    user_home = os.path.normpath(home if home is not None else os.path.expanduser("~"))
    rules: list[Rule] = [Rule("/dev", READ)]
    for tree, real in [*_static_trees(user_home), (spec.project_root, os.path.realpath(spec.project_root))]:
        rules += (Rule(p, READ) for p in _around(tree, hidden, real))
    # After `minimal`, which would take the descriptor's path for one /proc already covers.
    return [*minimal(rules), Rule(f"/proc/self/fd/{task_dir_fd}", READ)]


def checkpoint_rules(spec: ConfinementSpec, writable: Iterable[str], *, home: str | None = None) -> list[Rule]:
    """The domain of a checkpoint process (`workers/checkpoints/process.py`): what every run reads (the system and
    Python trees, the home and /run around what stays hidden — the state home, the runtime dir, `deny_read` — and
    the project), and writes to `writable` (the project, its repository's git directories: none of them inside what
    stays hidden) and its scratch dir (`spec.scratch_dir`, in the state home, granted by name). So a link an agent
    swaps in while git reads the project shows git nothing a run could not read itself."""
    hidden = [os.path.realpath(p) for p in (spec.home, spec.runtime_dir, *spec.deny_read)]
    granted = [p for p in writable if p and not any(_inside(os.path.realpath(p), h) for h in hidden)]
    return minimal([*_read_set(spec, home), *(Rule(p, _READ_WRITE) for p in [*granted, spec.scratch_dir])])


def blueprint_view_rules(spec: ConfinementSpec, *, home: str | None = None) -> list[Rule]:
    """The domain of the process that renders a project's blueprint (`yagent blueprint`): what every run reads (never
    the state home, the runtime dir or `deny_read`), the project, and its blueprint directory read-only; it writes
    nothing but the output devices."""
    return [*minimal(_read_set(spec, home)), Rule(spec.blueprint_dir, READ)]


def code_server_rules(project_root: str, index_dir: str, hidden: Iterable[str], *, home: str | None = None
                      ) -> list[Rule]:
    """The domain of the built-in code server: it reads the system and Python trees and the project, each around
    `hidden` (the state home, the runtime dir, `deny_read`), and writes only its index directory (which lies in the
    state home: granted by name, nothing else of the home). It reads nothing else of the user's home."""
    hidden_real = [os.path.realpath(p) for p in hidden]
    user_home = os.path.normpath(home if home is not None else os.path.expanduser("~"))
    rules: list[Rule] = [Rule("/dev", READ), *(Rule(p, READ_FILE | WRITE_FILE) for p in ("/dev/null", "/dev/zero"))]
    for tree, real in _static_trees(user_home):
        rules += (Rule(p, READ) for p in _around(tree, hidden_real, real))
    project_real = os.path.realpath(project_root)
    # Listed around what it hides, the project becomes its entries; a rule on a link grants the link's target, so a
    # link out of the project (to ~/.ssh) is left out: the server reads only what lies in the project.
    rules += (Rule(p, READ) for p in _around(project_root, hidden_real, project_real)
              if not os.path.islink(p) or _inside(os.path.realpath(p), project_real))
    return [*minimal(rules), Rule(index_dir, _READ_WRITE)]


def _existing_parent(path: str) -> str:
    parent = os.path.dirname(path)
    while parent != "/" and not os.path.isdir(parent):
        parent = os.path.dirname(parent)
    return parent


def worker_rules(spec: ConfinementSpec, writes_project: bool, *, home: str | None = None) -> list[Rule]:
    return rule_sets(spec, writes_project, home=home)[0]


def shell_rules(spec: ConfinementSpec, writes_project: bool, *, home: str | None = None) -> list[Rule]:
    return rule_sets(spec, writes_project, home=home)[1]


def _devices() -> list[Rule]:
    # /dev as a whole is readable (random, urandom, fd links); ioctl on terminals (stty, isatty) is allowed.
    return [Rule("/dev", READ | IOCTL_DEV), *(Rule(p, READ_FILE | WRITE_FILE | IOCTL_DEV) for p in _WRITABLE_DEVICES)]


def _read_set(spec: ConfinementSpec, home: str | None, shared: list[Rule] | None = None) -> list[Rule]:
    hidden = [os.path.realpath(p) for p in (spec.home, spec.runtime_dir, *spec.deny_read)]
    # Each tree is listed around what must stay hidden: a sys.path entry (the daemon's working directory), the
    # project or $HOME may hold the state home or the runtime directory.
    user_home = os.path.normpath(home if home is not None else os.path.expanduser("~"))
    # The run's own state lies beneath the state home: granted by name, with writes.
    rules = list(shared if shared is not None else _shared_read(user_home, hidden))
    for tree in (spec.project_root, *spec.writable_roots):
        rules += (Rule(p, READ) for p in _around(tree, hidden, os.path.realpath(tree)))
    rules += (Rule(p, READ) for p in _skill_trees(spec, hidden))
    return rules


def _shared_read(user_home: str, hidden: list[str]) -> list[Rule]:
    """The read rules every run of a daemon shares (the system, Python and $PATH trees, the user's home and
    /run, each listed around `hidden`; the devices), already minimal. Worked out once in the forkserver
    (`warm`) and inherited by every worker, which only checks that no directory listed for it has changed
    since: a worker start then costs a few stats here, not the listing and merging of some fifty rules."""
    key = (user_home, tuple(hidden))
    cached = _SHARED.get(key)
    if cached is not None and all(_mtime(d) == m for d, m in cached[1]):
        return cached[0]
    paths: list[str] = []
    listed: list[tuple[str, int]] = []
    for tree, real in [*_static_trees(user_home), (user_home, os.path.realpath(user_home)),
                       ("/run", os.path.realpath("/run"))]:
        found, seen = _listed_around(tree, hidden, real)
        paths += found
        listed += seen
    rules = minimal([*(Rule(p, READ) for p in paths), *_devices()])
    if _settled(listed):
        _SHARED[key] = (rules, listed)
    return rules


# `_shared_read`'s rules by (user home, hidden paths), with the directories listed for them and their mtimes.
_SHARED: dict[tuple[str, tuple[str, ...]], tuple[list[Rule], list[tuple[str, int]]]] = {}


def shared_read_rules(spec: ConfinementSpec, *, home: str | None = None) -> list[Rule]:
    """The part of `spec`'s read set every run of a daemon shares (`_shared_read`; not to be changed by the caller:
    it is the cached list). Once its listing is settled it is the very list object handed out before, for as long as
    no directory listed for it changes: how a worker knows that the listing it added rules from ahead of its run
    (`sandbox.prepare_shared_rules`) still holds."""
    hidden = [os.path.realpath(p) for p in (spec.home, spec.runtime_dir, *spec.deny_read)]
    return _shared_read(os.path.normpath(home if home is not None else os.path.expanduser("~")), hidden)


def warmed_shared_rules() -> list[Rule] | None:
    """The shared read rules of the daemon's defaults that `warm` worked out in the forkserver (checked anew
    now: a directory listed for them may have changed since); None where `warm` never ran."""
    if _WARMED is None:
        return None
    return _shared_read(*_WARMED)


def _skill_trees(spec: ConfinementSpec, hidden: list[str]) -> list[str]:
    """The skill directories (`spec.skill_dirs`), resolved, around what stays hidden. One beneath the state home is
    read only beneath `$YAGENT_HOME/skills`, and only while that is no link (which could lead to the config or
    another task's state); one that leads into the runtime dir or `deny_read` grants nothing there."""
    state = os.path.realpath(spec.home)
    own = os.path.join(spec.home, "skills")
    own_real = None if os.path.islink(own) else os.path.realpath(own)
    trees: list[str] = []
    for tree in spec.skill_dirs:
        real = os.path.realpath(tree)
        if not _inside(real, state):
            trees += _around(real, hidden, real)
        elif own_real is not None and _inside(real, own_real):
            trees += _around(real, [h for h in hidden if h != state], real)
    return trees


def minimal(rules: list[Rule]) -> list[Rule]:
    """`rules` without those another one already grants: same or more rights on an enclosing tree (each rule
    is a path to open and a system call at every start). Paths are absolute and normalised."""
    merged: dict[str, int] = {}
    for rule in rules:
        merged[rule.path] = merged.get(rule.path, 0) | rule.access
    return [Rule(path, access) for path, access in merged.items() if not _granted_above(path, access, merged)]


def _granted_above(path: str, access: int, merged: dict[str, int]) -> bool:
    """Whether a directory enclosing `path` is granted at least `access` in `merged`."""
    end = len(path) if path != "/" else 0
    while end > 0:  # each enclosing directory, by slicing at its "/": a worker start runs this, dirname costs more
        end = path.rfind("/", 0, end)
        if end < 0:
            return False
        granted = merged.get(path[:end] or "/")
        if granted is not None and access & ~granted == 0:
            return True
    return False


_STATIC: dict[str, list[tuple[str, str]]] = {}


def _static_trees(user_home: str) -> list[tuple[str, str]]:
    """(tree, resolved) of the system, Python and $PATH trees: the same for every run of a daemon, so worked out
    once in the forkserver (`warm`) and inherited by every worker."""
    found = _STATIC.get(user_home)
    if found is None:
        trees = dict.fromkeys([*SYSTEM_TREES, *_python_trees(), *_command_trees(user_home)])
        found = _STATIC[user_home] = [(t, os.path.realpath(t)) for t in trees if os.path.lexists(t)]
    return found


def warm(home: str, runtime_dir: str, deny_read: Iterable[str]) -> None:
    """Work out what every run shares, in the forkserver before it forks workers: the system, Python and $PATH
    trees, and the listing of the user's home and /run around the state home, runtime dir and `deny_read`."""
    global _WARMED
    user_home = os.path.normpath(os.path.expanduser("~"))
    load_landlock()
    _WARMED = (user_home, [os.path.realpath(p) for p in (home, runtime_dir, *deny_read)])
    _shared_read(*_WARMED)


# What `warm` worked the shared read rules out for: (the user's home, the hidden paths).
_WARMED: tuple[str, list[str]] | None = None


def _command_trees(user_home: str) -> list[str]:
    """Every $PATH directory, and the tool root of a `bin` or `shims` one (~/.pyenv, ~/.cargo, /opt/tool): a
    version manager's shim runs code from beside it. Never a top-level directory (/tmp), the home or above."""
    trees: set[str] = set()
    for entry in os.environ.get("PATH", "").split(os.pathsep):
        entry = os.path.normpath(entry) if entry else ""
        if not os.path.isabs(entry):
            continue
        trees.add(entry)
        parent = os.path.dirname(entry)
        if os.path.basename(entry) in ("bin", "shims") and parent.count("/") >= 2 and not _inside(user_home, parent):
            trees.add(parent)
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


def _around(tree: str, hidden_real: list[str], real: str | None = None) -> list[str]:
    """Paths that together cover `tree` (`real` once resolved) except the `hidden_real` paths (resolved)
    beneath it: the tree itself when nothing is hidden in it, else its entries, each the same way."""
    return _listed_around(tree, hidden_real, real or os.path.realpath(tree))[0]


def _listed_around(tree: str, hidden_real: list[str], real: str) -> tuple[list[str], list[tuple[str, int]]]:
    """`_around`'s paths, and every directory it had to list with its modification time then."""
    if _inside_any(real, hidden_real):
        return [], []
    if not any(_inside(h, real) for h in hidden_real):
        return [tree], []
    key = (tree, real, tuple(hidden_real))
    cached = _LISTED.get(key)
    if cached is not None and all(_mtime(d) == m for d, m in cached[1]):
        return cached
    listed = [(tree, _mtime(tree))]
    try:
        entries = list(os.scandir(tree))
    except OSError:
        return [], listed
    out: list[str] = []
    for entry in entries:
        # A link gets no rule of its own: Landlock would open it and grant wherever it points (a link in the home to
        # another project, to a dir swapped in later). What it points to is readable where that lies in the read
        # set anyway: Landlock judges a path by where it resolves. An entry that is no link resolves to its name
        # beneath the resolved tree: no realpath per entry.
        if entry.is_symlink():
            continue
        below = os.path.join(real, entry.name)
        paths, deeper = _listed_around(entry.path, hidden_real, below)
        out += paths
        listed += deeper
    if _settled(listed):
        _LISTED[key] = (out, listed)
    return out, listed


# A directory's mtime moves in clock ticks of several milliseconds: an entry made in the same tick as the
# listing leaves it unchanged. A listing of a directory changed this recently is not kept (git's "racily clean").
_RACY_NS = 2_000_000_000


def _settled(listed: list[tuple[str, int]]) -> bool:
    now = time.time_ns()
    return all(m < now - _RACY_NS for _, m in listed)


# What `_around` listed, with the modification time of each directory it read: valid while none changed (an
# entry added to the home shows at the next run). Filled in the forkserver by `warm`, inherited by workers.
_LISTED: dict[tuple[str, str, tuple[str, ...]], tuple[list[str], list[tuple[str, int]]]] = {}


def _mtime(path: str) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return -1


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _inside_any(path: str, roots: Iterable[str]) -> bool:
    return any(_inside(path, r) for r in roots)
