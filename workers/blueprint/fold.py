"""Folding checked entries into the persisted blueprint: a pure function of (what is on disk, what was accepted, the
derived layer, today's date), so the same inputs give the same bytes whatever order the entries came in, and
folding the same entries again changes nothing (`NoOp`).

- An entry's id is derived from its content (`document.entry_id`); a module and field hold one claim: a new
  non-empty claim for them replaces the old one. Two entries of one run for the same module and field: the one
  with the greater id is kept (any rule would do; this one does not depend on order), and the account says so.
- `supersedes` removes the entry with that id; an id that names nothing is counted, never a failure.
- An entry re-submitted word for word keeps its date but takes today's fingerprint and anchor: confirming a claim
  makes it fresh again. Staleness itself is never stored: it is the stored fingerprint compared with the derived
  one, whenever the blueprint is read.
- Orphans: an entry whose module is gone is hidden (no view shows it) and dated; it comes back with its module,
  and is removed `ORPHAN_DAYS` after it was first found gone.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field

from .checks import Submission
from .derivation import Derived
from .document import Blueprint, Entry, entry_id

__all__ = ["ORPHAN_DAYS", "FoldAccount", "fold"]

ORPHAN_DAYS = 90


@dataclass
class FoldAccount:
    written: int = 0  # accepted entries that changed the blueprint
    unchanged: int = 0  # accepted entries it held already, word for word
    conflicts: int = 0  # entries dropped for another of the same run on the same module and field
    superseded: int = 0
    unknown_supersedes: list[str] = field(default_factory=list)
    orphans_removed: int = 0


def _days_between(earlier: str, later: str) -> int:
    try:
        return (datetime.date.fromisoformat(later) - datetime.date.fromisoformat(earlier)).days
    except ValueError:
        return 0


def fold(current: Blueprint, accepted: list[Submission], derived: Derived, *, today: str, run: str = "",
         project: str = "") -> tuple[Blueprint, FoldAccount]:
    """The blueprint with `accepted` folded in, and what the fold did."""
    account = FoldAccount()
    entries: dict[tuple[str, str, str], Entry] = {}
    for entry in current.entries:
        gone = entry.section == "module" and entry.module not in derived.modules
        since = (entry.orphaned_since or today) if gone else ""
        if gone and _days_between(since, today) >= ORPHAN_DAYS:
            account.orphans_removed += 1
            continue
        entries[(entry.section, entry.module, entry.field)] = entry.with_changes(orphaned_since=since)
    by_id = {e.id: key for key, e in entries.items()}
    for sub in sorted(accepted, key=lambda s: s.supersedes):
        if not sub.supersedes:
            continue
        key = by_id.get(sub.supersedes)
        if key is not None and key in entries:
            del entries[key]
            account.superseded += 1
        else:
            account.unknown_supersedes.append(sub.supersedes)
    chosen: dict[tuple[str, str, str], tuple[str, Submission]] = {}
    for sub in accepted:
        key = (sub.section, sub.module, sub.field)
        sid = entry_id(sub.section, sub.module, sub.field, sub.claim)
        held = chosen.get(key)
        if held is not None:
            account.conflicts += 1
            if held[0] >= sid:
                continue
        chosen[key] = (sid, sub)
    for key, (sid, sub) in sorted(chosen.items()):
        fingerprint = derived.fingerprint_of(sub.section, sub.module)
        old = entries.get(key)
        if old is not None and old.id == sid and old.where == sub.where:
            refreshed = old.with_changes(fingerprint=fingerprint, anchor=sub.anchor, orphaned_since="")
            account.unchanged += refreshed == old
            account.written += refreshed != old
            entries[key] = refreshed
            continue
        entries[key] = Entry(id=sid, section=sub.section, module=sub.module, field=sub.field, claim=sub.claim,
                             where=sub.where, anchor=sub.anchor, fingerprint=fingerprint, run=run, written_at=today)
        account.written += 1
    folded = Blueprint(project=project or current.project, entries=sorted(entries.values(), key=Entry.sort_key))
    return folded, account
