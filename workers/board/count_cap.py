"""The per-board count cap: a board keeps its newest `max_notes` notes, oldest removed first.

Run by the worker that writes a note, inside its own board. Age is the file name (stems begin with
their UTC time), compared across every agent directory; paths would sort by agent first. Links are never
followed or removed, writes in progress (`.md.tmp`) are never counted, and the agent directories stay.
"""

from __future__ import annotations

import contextlib

from .note_store import NoteStore

__all__ = ["enforce_count_cap"]


def enforce_count_cap(store: NoteStore, max_notes: int) -> int:
    """Remove the oldest notes past `max_notes` (<= 0: nothing is removed); returns how many went."""
    if max_notes <= 0:
        return 0
    refs = store.refs()  # oldest first, regular files only (lstat)
    removed = 0
    for ref in refs[: max(len(refs) - max_notes, 0)]:
        with contextlib.suppress(FileNotFoundError):
            store.path(ref).unlink()
            removed += 1
    return removed
