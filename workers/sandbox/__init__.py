"""Kernel confinement (Landlock) of a worker and of the commands it runs.

`confine_worker` is called once, first thing after the fork, while the worker has a single thread: Landlock
restricts the calling thread and what it starts afterwards, and ABI 7 cannot reach threads that already
exist. What the worker may write follows its agent kind's tool profile (`tools/profiles.py`): only a kind
granted file writes (Coding) may write the project. `run_bash` commands run in a stricter domain nested
inside the worker's, applied by the exec helper (`shell_exec.py`) in the fresh process before `execve`.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from dataclasses import dataclass, field

from yagent.ipc.confinement import ConfinementSpec, landlock_abi
from yagent.ipc.vocabulary import Unconfined

from ..tools.profiles import PROFILES
from ..tools.spec import Effect
from ._landlock import LandlockError, Rule, add_rules, create_ruleset, enforce, restrict_self
from .git_namespace import GitNamespaceError, protect_git
from .policy import rule_sets, shared_read_rules, warmed_shared_rules

__all__ = ["Confinement", "confine_worker", "confined", "current", "prepare_shared_rules", "protect_git_dir",
           "refused_after_approval", "shell_argv", "shell_env", "writes_project"]

log = logging.getLogger(__name__)

_HELPER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "shell_exec.py")


@dataclass(frozen=True)
class Confinement:
    """What this worker process is under; `unconfined` set: nothing, and why."""

    spec: ConfinementSpec
    unconfined: Unconfined | None = None
    error: str = ""  # the sandbox was asked for but could not be applied
    shell: list[Rule] = field(default_factory=list)  # the nested domain of each `run_bash` command
    ahead: int = 0  # rules its ruleset held before the run came (`prepare_shared_rules`)


_current: Confinement | None = None


@dataclass(frozen=True)
class _Prepared:
    """A ruleset a warm worker filled while it waited: not enforced, so it confines nothing yet."""

    ruleset: int  # its descriptor
    abi: int
    rules: list[Rule]  # the shared read rules it holds: the list object `policy` handed out
    opened: tuple[tuple[str, int, int], ...]  # (path, device, inode) of what each rule was added on

    def still_holds(self, shared: list[Rule]) -> bool:
        """Whether these rules are still the ones a whole build would add: the same listing (nothing listed for it
        changed) and every path still naming the file its rule was added on (a tree renamed or replaced since would
        leave its rule on a file that may now lie anywhere, a hidden directory included)."""
        if shared is not self.rules:
            return False
        for path, device, inode in self.opened:
            try:
                status = os.stat(path)
            except OSError:
                return False
            if (status.st_dev, status.st_ino) != (device, inode):
                return False
        return True


_prepared: _Prepared | None = None


def prepare_shared_rules() -> None:
    """Add the read rules every run of this daemon shares (the system, Python and $PATH trees, the home and /run
    listed around what stays hidden, the devices: some twenty of a run's thirty) to a new ruleset, in a warm
    worker before it waits for its run; `confine_worker` adds the run's own and enforces it. Confines nothing:
    a ruleset restricts only once enforced. Where it cannot be made the run builds its ruleset whole."""
    global _prepared
    if _prepared is not None:
        return
    ruleset = -1
    try:  # only a head start: whatever goes wrong here, the run builds its ruleset whole
        rules = warmed_shared_rules()
        abi = landlock_abi()
        if not rules or abi < 1:
            return
        ruleset = create_ruleset(abi)
        opened: list[tuple[str, int, int]] = []
        add_rules(ruleset, abi, rules, opened)
        _prepared, ruleset = _Prepared(ruleset, abi, rules, tuple(opened)), -1
    except Exception as exc:
        log.debug("no Landlock rules added ahead: %s", exc)
    finally:
        if ruleset >= 0:
            os.close(ruleset)


def _take_prepared() -> _Prepared | None:
    global _prepared
    prepared, _prepared = _prepared, None
    return prepared


def writes_project(agent: str) -> bool:
    """Whether an agent kind's profile grants file writes; a kind without a profile (a third-party or test
    kind, `family:instance` looked up by family) gets none."""
    profile = PROFILES.get(agent) or PROFILES.get(agent.split(":", 1)[0])
    return profile is not None and bool(profile.grant & Effect.FS_WRITE) and not profile.deny & Effect.FS_WRITE


def protect_git_dir(spec: ConfinementSpec | None) -> str:
    """Give this process (and all it starts) a read-only view of the project's .git hooks and config when the
    daemon asked for one; "" or why the run must not go on. Must run while the process has one thread and
    before Landlock, which refuses mount changes. A namespace that cannot be made leaves the daemon's
    check-and-revert as the only protection, said on stderr (the daemon's log)."""
    if spec is None or not spec.git_namespace or spec.unconfined is not None or not writes_project(spec.agent):
        return ""
    try:
        protect_git(spec.project_root)
    except GitNamespaceError as exc:
        if exc.broken:
            return f"the read-only view of .git could not be set up ({exc.strerror}); the run was not started"
        os.write(2, f"yagent worker {os.getpid()}: .git/hooks and .git/config of {spec.project_root} stay writable "
                    f"during this run ({exc.strerror}); they are checked and put back after it\n".encode())
    return ""


def confine_worker(spec: ConfinementSpec | None, agent: str) -> Confinement | None:
    """Confine this process as `spec` says (no-new-privileges, then Landlock). Must run before any thread
    starts. Returns what was done; never raises (a failure is in `.error`, for the run to report)."""
    global _current
    prepared = _take_prepared()
    try:
        if spec is None:
            return None
        _current = _confine(spec, agent, prepared)
    finally:
        if prepared is not None:
            os.close(prepared.ruleset)
    return _current


def _confine(spec: ConfinementSpec, agent: str, prepared: _Prepared | None) -> Confinement:
    if spec.unconfined is not None:
        return Confinement(spec, spec.unconfined)
    writes = writes_project(agent)
    # A file the home lacks is denied under Landlock, not missing (its name lies in no allowed tree), and git
    # takes a denied ~/.gitconfig for a broken configuration: point git at no global file instead.
    if not os.path.lexists(os.path.expanduser("~/.gitconfig")):
        os.environ.setdefault("GIT_CONFIG_GLOBAL", os.devnull)
    ahead = 0
    try:
        os.makedirs(spec.scratch_dir, mode=0o700, exist_ok=True)
        shared = shared_read_rules(spec) if prepared is not None and prepared.abi == spec.abi else None
        # Both before the domain: listing around the hidden needs reads.
        own, shell = rule_sets(spec, writes, shared=shared)
        # The rules added ahead are still this run's when its read set was built from the same listing and their
        # paths name the same files: those of `own` are added besides, and the domain is the union of `own` either way.
        if prepared is not None and shared is not None and prepared.still_holds(shared):
            held = set(prepared.rules)
            add_rules(prepared.ruleset, spec.abi, [rule for rule in own if rule not in held])
            enforce(prepared.ruleset)
            ahead = len(prepared.opened)
        else:
            restrict_self(spec.abi, own)
    except (LandlockError, OSError) as exc:
        return Confinement(spec, Unconfined.LANDLOCK_MISSING, error=str(exc))
    # The worker's own temporary files go to its scratch dir: /tmp is not in its write set.
    os.environ["TMPDIR"] = spec.scratch_dir
    tempfile.tempdir = spec.scratch_dir
    return Confinement(spec, shell=shell, ahead=ahead)


def current() -> Confinement | None:
    return _current


def confined() -> bool:
    """Whether the kernel confines this process."""
    return _current is not None and _current.unconfined is None


def refused_after_approval(tool: str, exc: OSError) -> str:
    """What the model (and so the user) reads when an approved operation outside the run's rules is refused."""
    return (f"{tool}: the user approved this, but the sandbox refused it ({exc.strerror}: {exc.filename or 'path'}):"
            " this run may write only the project (Coding), its scratch dir and the [sandbox] writable_roots. "
            "It did not happen. To allow it, add the directory to [sandbox] writable_roots in config.toml, or send "
            "the turn with --full-yolo (no confinement); otherwise keep the change inside the project.")


def shell_argv(command: str) -> list[str]:
    """The argv that runs `command` under bash, through the exec helper when this worker is confined."""
    state = _current
    argv = ["bash", "-c", command]
    if state is None or state.unconfined is not None:
        return argv
    rules: list[str] = []
    for rule in state.shell:
        rules += (str(rule.access), rule.path)
    return [sys.executable, "-E", "-s", "-S", _HELPER, str(state.spec.abi), str(len(state.shell)), *rules, "--", *argv]


def shell_env() -> dict[str, str] | None:
    """The environment of a command (None: the worker's own): TMPDIR is the run's scratch dir when confined."""
    state = _current
    if state is None or state.unconfined is not None:
        return None
    return {**os.environ, "TMPDIR": state.spec.scratch_dir}
