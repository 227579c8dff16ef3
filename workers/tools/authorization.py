"""Authorisation vocabulary and the memory of what the user already allowed.

Session-scope approvals live in memory for the life of the guard, seeded with those the task's earlier runs were
given (the daemon keeps them: `RunSpec.session_grants`). Project-scope approvals are read from the approvals file
(`ipc/approval_grants.py`) at every check, so an approval given to another run meanwhile counts. A worker never
writes either: the daemon records what the user answered as it relays the answer, and a confined worker cannot
write the approvals directory. What sits at the file's name is read with care all the same: a link, a pipe or a
file too large grants nothing, and a warning names it once.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from yagent.ipc.approval_grants import ApprovalsDamaged, covered, grant_keys, project_grants
from yagent.ipc.state_files import StateFileError

# How much the user pre-approved for a run (`--yolo` / `--full-yolo`): the one enum the daemon and clients use.
from yagent.ipc.vocabulary import YoloLevel as YoloLevel

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
        return grant_keys(self.tool, self.dangerous_inside, self.outside_paths)


@runtime_checkable
class Authorizer(Protocol):
    """Asks the user (through the daemon and any attached client) to allow one operation."""

    async def authorize(self, request: AuthRequest) -> AuthDecision: ...


class ApprovalStore:
    """Session approvals in memory plus the project approvals of the approvals file (read, never written)."""

    def __init__(self, project_root: Path, settings_path: Path | None, session_grants: Iterable[str] = ()):
        self._root = str(project_root)
        self._settings_path = settings_path
        self._session: set[str] = set(session_grants)
        self._lock = threading.Lock()
        self._warned = False  # about an approvals file that cannot be read: every check would say it again

    def session_grants(self) -> frozenset[str]:
        """What was approved for the session so far."""
        return frozenset(self._session)

    def covers(self, request: AuthRequest) -> bool:
        """True when every approval the request needs was granted before (session or project)."""
        granted = self._session | self._project_grants()
        return all(covered(key, granted) for key in request.grants())

    def remember(self, request: AuthRequest, decision: AuthDecision) -> None:
        """The user's answer holds for the rest of this run; keeping it for later runs (the task's, for a session
        answer, the project's, for a project one) is the daemon's, which saw the answer go by."""
        if decision in (AuthDecision.ALLOW_SESSION, AuthDecision.ALLOW_PROJECT):
            with self._lock:
                self._session.update(request.grants())

    def _project_grants(self) -> set[str]:
        if self._settings_path is None:
            return set()
        try:
            return project_grants(self._settings_path, self._root)
        except (OSError, ApprovalsDamaged) as exc:  # grants nothing, and must neither hang nor fail the call checked
            if not self._warned:
                self._warned = True
                log.warning("the saved project approvals were not read, so none apply: %s", _problem(exc))
            return set()


def _problem(exc: OSError | ApprovalsDamaged) -> str:
    if isinstance(exc, ApprovalsDamaged):
        return str(exc)
    if isinstance(exc, StateFileError):  # its message names the file and what to do
        return exc.strerror
    return f"{exc.filename}: {exc.strerror or exc}; make it a readable file of yours, or remove it"
