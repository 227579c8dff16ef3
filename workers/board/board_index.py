"""The board's index: derived from disk on every model call, shown to that call only.

`build_index` lists the newest notes (front-matters only); `render_index` turns them into one line each.
The text goes into the messages of one LLM call and into a delegation's task prefix — never into the
conversation memory or the rollout: compression rewrites history, and a note reference that lived only
in a tool message would vanish with it. Built from the same files, it is the same text however often a
step is retried.

Budgets (`[blackboard]`): `index_max_notes` (0 = no index) and `index_line_chars` (0 = no trim). A line
over its budget loses its facts, last first, before its conclusion is cut; its handle always stays.
"""

from __future__ import annotations

from dataclasses import dataclass

from yagent.ipc.board_settings import BoardSettings

from .handoff_parse import Handoff
from .note_store import NoteRef, NoteStore

__all__ = ["INDEX_HEADER", "IndexEntry", "IndexLines", "IndexOptions", "build_index", "format_index_line",
           "render_index"]

INDEX_HEADER = "[Blackboard: hand-off notes of this task, newest last. read_note(ref) reads one in full.]"
_ELLIPSIS = "…"


@dataclass(frozen=True, slots=True)
class IndexOptions:
    max_notes: int  # 0 = no index
    line_chars: int  # 0 = no trim

    @classmethod
    def from_settings(cls, settings: BoardSettings) -> IndexOptions:
        """The one conversion from configuration: its zeros already mean "off" and "no trim"."""
        return cls(max(settings.index_max_notes, 0), max(settings.index_line_chars, 0))


@dataclass(frozen=True, slots=True)
class IndexEntry:
    ref: NoteRef
    handoff: Handoff
    artifacts: tuple[str, ...] = ()


def build_index(store: NoteStore, options: IndexOptions) -> list[IndexEntry]:
    """The newest `max_notes` notes, oldest first; an unreadable one still appears (as degraded)."""
    if options.max_notes <= 0:
        return []
    refs = store.refs()[-options.max_notes:]
    # None: gone or swapped for a link between the listing and the read.
    return [IndexEntry(ref, note.handoff, note.artifacts) for ref, note in zip(refs, store.heads(refs), strict=True)
            if note is not None]


def format_index_line(entry: IndexEntry, line_chars: int) -> str:
    """One line: handle, status, conclusion, then facts while they fit. The handle is never cut."""
    handoff = entry.handoff
    handle = " ".join([entry.ref.handle, *(f"artifact:{a}" for a in entry.artifacts)])
    status = handoff.status.value + (f", degraded={handoff.degraded}" if handoff.degraded else "")
    head = f"- {handle} [{status}]"
    conclusion = " " + handoff.conclusion
    facts = [f"{f.claim} ({f.where})" if f.where else f.claim for f in handoff.facts]
    if not line_chars:
        return head + conclusion + (" | facts: " + "; ".join(facts) if facts else "")
    if len(head) >= line_chars:
        return head  # over budget, but a line without its handle is a line nobody can follow
    line = head + conclusion
    if len(line) > line_chars:
        return line[: max(line_chars - len(_ELLIPSIS), len(head))] + _ELLIPSIS
    shown: list[str] = []
    for fact in facts:
        candidate = line + " | facts: " + "; ".join([*shown, fact])
        if len(candidate) > line_chars:
            break
        shown.append(fact)
    return line + (" | facts: " + "; ".join(shown) if shown else "")


class IndexLines:
    """Index lines made before, by note: a note is never rewritten, and `NoteStore.heads` hands out the same parsed
    head while its file is the same, so a line is made again only for a note that is new, or whose file changed
    (another `Handoff` object), or for another line budget. A third of an index's making at every model call."""

    __slots__ = ("_lines",)

    def __init__(self) -> None:
        self._lines: dict[NoteRef, tuple[Handoff, tuple[str, ...], int, str]] = {}

    def lines(self, entries: list[IndexEntry], line_chars: int) -> list[str]:
        kept, lines = self._lines, {}
        for entry in entries:
            made = kept.get(entry.ref)
            if made is None or made[0] is not entry.handoff or made[1] != entry.artifacts or made[2] != line_chars:
                made = (entry.handoff, entry.artifacts, line_chars, format_index_line(entry, line_chars))
            lines[entry.ref] = made
        self._lines = lines  # notes no longer shown are forgotten
        return [made[3] for made in lines.values()]


def render_index(entries: list[IndexEntry], options: IndexOptions, lines: IndexLines | None = None) -> str:
    """The index text; empty when there is nothing to show (no message is added then). `lines`: the lines made
    before, reused where they still apply."""
    if not entries or options.max_notes <= 0:
        return ""
    made = lines.lines(entries, options.line_chars) if lines is not None else [
        format_index_line(e, options.line_chars) for e in entries]
    return "\n".join([INDEX_HEADER, *made])
