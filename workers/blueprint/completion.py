"""The one place the blueprint is written: a Repo run's completion, from its `agent_exit` `blueprint[]` entries.

`commit_blueprint` derives the structure now, checks the entries (`checks.py`) against it and against the files the
run actually read (`tools.read_log.ReadLog`), folds the accepted ones in (`fold.py`) under the store's lock, and
writes the file only when its bytes change (`store.py`). Whatever happened — nothing submitted, everything refused,
a write that failed — comes back as one line, the account: the parent's tool result and the run's note both carry
it (`BLUEPRINT_ACCOUNT`), so a model whose claims were refused is told, and so is the next delegation; it is never
part of the hand-off's conclusion.
"""

from __future__ import annotations

import datetime
import logging
from pathlib import Path
from typing import Any

from .checks import check_submissions
from .derivation import Derived, derive
from .document import render_document
from .fold import fold
from .store import BlueprintStore

__all__ = ["commit_blueprint"]

log = logging.getLogger(__name__)


def commit_blueprint(directory: Path, project_root: Path, submitted: Any, evidence: set[str], *, run: str,
                     today: str | None = None, derived: Derived | None = None) -> str:
    """Fold a Repo run's entries into the project's blueprint; the account line."""
    items = submitted if isinstance(submitted, list) else ([] if submitted is None else [submitted])
    if not items:
        return "nothing submitted: this run's agent_exit held no blueprint entries; the blueprint is unchanged"
    derived = derived or derive(project_root)
    checked = check_submissions(items, derived, evidence)
    read = len({m for m in evidence if m}) if evidence else 0
    parts = [f"submitted {checked.submitted}"]
    store = BlueprintStore(directory)
    day = today or datetime.datetime.now(datetime.UTC).date().isoformat()
    if checked.accepted:
        try:
            with store.locked():
                current = store.read()
                folded, account = fold(current, checked.accepted, derived, today=day, run=run,
                                       project=project_root.name)
                changed = store.write(render_document(folded))
        except OSError as exc:
            log.warning("the blueprint in %s could not be written: %s", directory, exc)
            return f"submitted {checked.submitted}, none written: the blueprint could not be written ({exc})"
        parts.append(f"written {account.written}" if changed else "written 0 (the blueprint held them already)")
        if account.unchanged:
            parts.append(f"{account.unchanged} unchanged")
        if account.conflicts:
            parts.append(f"{account.conflicts} dropped for another entry on the same module and field")
        if account.superseded:
            parts.append(f"{account.superseded} superseded")
        if account.unknown_supersedes:
            parts.append(f"supersedes named no entry: {', '.join(account.unknown_supersedes[:3])}")
        if current.damaged:
            parts.append(f"the old file could not be read ({current.damaged}) and was replaced (its bytes, where "
                         "they could be read, are kept in revisions/)")
    else:
        parts.append("written 0")
    if checked.rejected:
        parts.append(f"rejected {len(checked.rejected)}: {checked.account()}")
    parts.append(f"evidence: {read} file{'s' if read != 1 else ''} read")
    return ", ".join(parts)
