"""Keeping what the user allowed at an authorisation prompt, for the runs after the one that asked.

The worker that asked holds the answer for the rest of its run. What outlasts the run is kept here, by the daemon,
as it relays the answer: "allow for the session" for the task's later runs (the registry's `task_approvals`, handed
to each run as `RunSpec.session_grants`), "allow for the project" besides in the approvals file every run reads
(`ipc/approval_grants.py`). Workers write neither — a confined one cannot even write the approvals directory — so
no run can approve anything for another: what is kept is what a person answered, for the project of the run
that asked.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from pathlib import Path
from typing import Any

from yagent.ipc.approval_grants import add_project_grants, grant_keys
from yagent.ipc.messages import Question
from yagent.ipc.state_files import StateFileError
from yagent.ipc.vocabulary import QuestionKind

from .registry import Registry

__all__ = ["MAX_KEYS", "TaskApprovals", "kept_keys"]

log = logging.getLogger(__name__)

# Keys one answer may keep: a prompt names a tool and the few paths one call touches. A question naming more was
# not written by yagent's tools; its answer holds for the asking run alone.
MAX_KEYS = 64
_MAX_KEY = 4096  # characters of one key (a path is at most PATH_MAX)


def kept_keys(question: Question, answer: dict[str, Any]) -> tuple[list[str], bool] | str | None:
    """What an answer keeps: (its approval keys, whether for the project too); None when it keeps nothing (not an
    authorisation prompt, or not a session or project answer); a string saying why, for a prompt whose details
    cannot be kept."""
    if question.kind is not QuestionKind.AUTHORIZE or answer.get("cancelled"):
        return None
    value = str(answer.get("value", "")).strip().lower()
    if value not in ("session", "project"):
        return None
    details = question.details
    tool, dangerous, paths = details.get("tool"), details.get("dangerous", ""), details.get("outside_paths")
    if not isinstance(tool, str) or not tool or not isinstance(dangerous, str) or not isinstance(paths, list):
        return "its prompt names no tool, reason and list of paths"
    if not all(isinstance(p, str) and os.path.isabs(p) for p in paths):
        return "its prompt names a path that is not absolute"
    keys = grant_keys(tool, bool(dangerous), paths)
    if not keys:
        return None  # nothing dangerous and nothing outside: there was nothing to approve beyond this call
    if len(keys) > MAX_KEYS or any(len(k) > _MAX_KEY or "\x00" in k for k in keys):
        return f"its prompt names more than {MAX_KEYS} approvals, or one too long"
    return keys, value == "project"


class TaskApprovals:
    """One task's session approvals, read from the registry when first needed, and the keeping of new ones."""

    def __init__(self, registry: Registry, task_id: str, approvals_file: Path) -> None:
        self._registry = registry
        self._task = task_id
        self._file = approvals_file
        self._session: list[str] | None = None

    def session(self) -> list[str]:
        """The keys a new run of the task starts with."""
        if self._session is None:
            try:
                self._session = self._registry.task_approvals(self._task)
            except sqlite3.DatabaseError as exc:  # the run starts asking again; a later run tries the read again
                log.warning("task %s: its session approvals were not read: %s", self._task, exc)
                return []
        return list(self._session)

    def keep(self, project_root: str, question: Question, answer: dict[str, Any]) -> list[str]:
        """The user answered `question` with `answer`: keep what it allowed beyond the asking run; what could not be
        kept, for the task's clients (it holds for the asking run all the same). Never raises."""
        kept = kept_keys(question, answer)
        if kept is None:
            return []
        if isinstance(kept, str):
            return [f"the approval was not kept for later runs ({kept}); it holds for the run that asked"]
        keys, for_project = kept
        problems = []
        session = self.session()
        new = [k for k in keys if k not in session]
        if new:
            try:
                self._registry.add_task_approvals(self._task, new)
            except sqlite3.DatabaseError as exc:
                problems.append(f"the approval of {', '.join(new)} was not kept for the task's later runs ({exc}); "
                                "they will ask again")
            else:
                if self._session is not None:
                    self._session.extend(new)
        if for_project:
            try:
                if kept_aside := add_project_grants(self._file, project_root, keys):
                    problems.append(kept_aside)
            except OSError as exc:
                why = exc.strerror if isinstance(exc, StateFileError) else \
                    f"{exc.filename or self._file}: {exc.strerror or exc}"
                problems.append(f"the approval of {', '.join(keys)} for {project_root} was not saved, so other tasks "
                                f"will ask again (it holds for this task): {why}")
        return problems
