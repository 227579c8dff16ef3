"""Authorisation vocabulary and the memory of what the user already allowed.

Session-scope approvals live in memory for the life of the guard; project-scope approvals are persisted
under `authorized_projects` in the settings JSON file (default `$YAGENT_HOME/settings.json`):

    {"authorized_projects": {"/abs/project/root": ["inside:delete_file", "outside:/etc/hosts"]}}

`inside:<tool>` approves that tool's dangerous operations inside the project; `outside:<path>` approves
touching that path (and anything beneath it) with any tool.

Every run's worker may write the approvals directory (the model's commands may not), so what sits at the file's name
is not trusted to be yagent's (`ipc/state_files.py`): a link or a pipe there grants nothing, and an approval for the
project is then kept for the session only; a warning says so, naming the file.
"""

from __future__ import annotations

import enum
import json
import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from yagent.ipc.atomic_file import write_atomic
from yagent.ipc.state_files import StateFileError, read_state_bytes, state_lock

# How much the user pre-approved for a run (`--yolo` / `--full-yolo`): the one enum the daemon and clients use.
from yagent.ipc.vocabulary import YoloLevel as YoloLevel

SETTINGS_KEY = "authorized_projects"

# The most of the approvals file read: a few keys per project, so even thousands of projects stay far below it,
# while a file a run blew up cannot cost every authorisation check that much memory and time.
SETTINGS_LIMIT = 4 << 20

log = logging.getLogger(__name__)


class AuthDecision(enum.Enum):
    ALLOW_ONCE = "allow_once"
    ALLOW_SESSION = "allow_session"
    ALLOW_PROJECT = "allow_project"
    DENY = "deny"

    @property
    def allowed(self) -> bool:
        return self is not AuthDecision.DENY


@dataclass(frozen=True)
class AuthRequest:
    """One question to the user: may this call go ahead?"""

    tool: str
    summary: str  # what the call does, e.g. `delete_file src/old.py` or the shell command
    project_root: str
    outside_paths: tuple[str, ...] = ()
    # Why the call is dangerous inside the project; empty when it is not.
    dangerous_reason: str = ""

    @property
    def dangerous_inside(self) -> bool:
        return bool(self.dangerous_reason)

    @property
    def reasons(self) -> list[str]:
        """Human-readable reasons, for the prompt and for a refusal message."""
        reasons = [self.dangerous_reason] if self.dangerous_reason else []
        if self.outside_paths:
            reasons.append(f"it touches paths outside the project root {self.project_root}")
        return reasons

    def grants(self) -> list[str]:
        """The approval keys an `allow_session` / `allow_project` answer records."""
        keys = [f"inside:{self.tool}"] if self.dangerous_inside else []
        return keys + [f"outside:{p}" for p in self.outside_paths]


@runtime_checkable
class Authorizer(Protocol):
    """Asks the user (through the daemon and any attached client) to allow one operation."""

    async def authorize(self, request: AuthRequest) -> AuthDecision: ...


class ApprovalStore:
    """Session approvals in memory plus project approvals persisted in the settings file."""

    def __init__(self, project_root: Path, settings_path: Path | None, session_grants: Iterable[str] = ()):
        self._root = str(project_root)
        self._settings_path = settings_path
        self._session: set[str] = set(session_grants)
        self._lock = threading.Lock()
        self._warned = False  # about an approvals file that cannot be read: every check would say it again

    def session_grants(self) -> frozenset[str]:
        """What was approved for the session, so a worker can hand it to the next run of the task."""
        return frozenset(self._session)

    def covers(self, request: AuthRequest) -> bool:
        """True when every approval the request needs was granted before (session or project)."""
        granted = self._session | self._project_grants()
        return all(_granted(key, granted) for key in request.grants())

    def remember(self, request: AuthRequest, decision: AuthDecision) -> None:
        if decision is AuthDecision.ALLOW_SESSION:
            with self._lock:
                self._session.update(request.grants())
        elif decision is AuthDecision.ALLOW_PROJECT:
            with self._lock:
                self._session.update(request.grants())
            try:
                self._persist(request.grants())
            except OSError as exc:  # the user's answer stands for this session: only its keeping for later failed
                why = exc.strerror if isinstance(exc, StateFileError) else \
                    f"{exc.filename or self._settings_path}: {exc.strerror or exc}"
                log.warning("the approval of %s for %s was not saved, so later runs will ask again (it holds for this "
                            "session): %s", ", ".join(request.grants()), self._root, why)

    def _project_grants(self) -> set[str]:
        if self._settings_path is None:
            return set()
        try:
            data = _read_settings(self._settings_path)
        except OSError as exc:  # grants nothing, and must neither hang nor fail the call being checked
            if not self._warned:
                self._warned = True
                log.warning("the saved project approvals were not read, so none apply: %s", _problem(exc))
            return set()
        projects = data.get(SETTINGS_KEY)
        entry = projects.get(self._root) if isinstance(projects, dict) else None
        return {g for g in entry if isinstance(g, str)} if isinstance(entry, list) else set()

    def _persist(self, grants: list[str]) -> None:
        if self._settings_path is None:
            return
        path = self._settings_path
        path.parent.mkdir(parents=True, exist_ok=True)
        # Several workers of one user may approve at once: without the lock one approval would be lost.
        with state_lock(path.with_name(path.name + ".lock")):
            data = _read_settings(path)
            projects = data.get(SETTINGS_KEY)
            if not isinstance(projects, dict):
                projects = {}
            current = projects.get(self._root)
            merged = list(current) if isinstance(current, list) else []
            merged.extend(g for g in grants if g not in merged)
            projects[self._root] = merged
            data[SETTINGS_KEY] = projects
            write_atomic(path, (json.dumps(data, indent=2, sort_keys=True) + "\n").encode(), mode=0o600)


def _granted(key: str, granted: set[str]) -> bool:
    if key in granted:
        return True
    if not key.startswith("outside:"):
        return False
    path = Path(key[len("outside:") :])
    # Approving a directory approves what lies beneath it.
    return any(f"outside:{parent}" in granted for parent in path.parents)


def _read_settings(path: Path) -> dict[str, Any]:
    """The settings: empty when missing or damaged; an OSError (StateFileError for a planted one) when unreadable."""
    try:
        data = json.loads(read_state_bytes(path, SETTINGS_LIMIT))
    except (FileNotFoundError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _problem(exc: OSError) -> str:
    if isinstance(exc, StateFileError):  # its message names the file and what to do
        return exc.strerror
    return f"{exc.filename}: {exc.strerror or exc}; make it a readable file of yours, or remove it"
