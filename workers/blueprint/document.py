"""The blueprint's persisted layer as a file: `blueprint.md`, a JSON front-matter between two `---` lines (as the
hand-off notes have it) holding every entry, then the same entries rendered for people.

The front-matter is the record; the body is made from it and never read back. Entries are written in one stable
order with sorted keys, so the same entries always make the same bytes (a fold that changes nothing writes
nothing). Reading never repairs: a file that cannot be read is `damaged`, with why, and has no entries; the one
writer (`store.py`) keeps such a file aside before it writes a new one.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, replace
from typing import Any

__all__ = ["FIELDS", "MAX_DOCUMENT_BYTES", "SCHEMA", "SECTIONS", "Blueprint", "Entry", "entry_id", "parse_document",
           "render_document"]

SCHEMA = 1
SECTIONS = ("repo", "module")
# What a claim may be about: in a module, and about the repository as a whole.
FIELDS = {"module": ("purpose", "owns", "invariants", "gotchas", "conventions"),
          "repo": ("overview", "layout", "conventions", "build", "testing")}
MAX_DOCUMENT_BYTES = 4 * 1024 * 1024
_FENCE = "---"
_ORDER = {name: i for i, name in enumerate(SECTIONS)}


def entry_id(section: str, module: str, field_name: str, claim: str) -> str:
    """An entry's id: derived from its content, so the same claim folded twice is the same entry."""
    raw = "\0".join((section, module, field_name, " ".join(claim.split())))
    return hashlib.sha256(raw.encode("utf-8", "surrogateescape")).hexdigest()[:10]


@dataclass(frozen=True, slots=True)
class Entry:
    id: str
    section: str  # repo | module
    module: str  # the module's path ("." for section repo)
    field: str
    claim: str
    where: str  # the anchor as written: path, path:line, path:symbol, or anything else
    anchor: str  # how `where` was verified when written: path | line | symbol | unverifiable
    fingerprint: str  # the section's structural fingerprint when written: another one now means stale
    run: str = ""  # the Repo run that wrote it
    written_at: str = ""  # UTC date it was last written
    orphaned_since: str = ""  # UTC date its module was first found gone ("" while it exists)

    def sort_key(self) -> tuple[Any, ...]:
        return (_ORDER.get(self.section, 9), self.module, self.field, self.where, self.claim)

    def with_changes(self, **changes: Any) -> Entry:
        return replace(self, **changes)


@dataclass
class Blueprint:
    project: str = ""
    entries: list[Entry] = field(default_factory=list)
    damaged: str = ""  # why the file on disk could not be read ("" when it could, or there is none)


def render_document(blueprint: Blueprint) -> str:
    """The file's text: front-matter, then the entries for people."""
    entries = sorted(blueprint.entries, key=Entry.sort_key)
    front = {"schema": SCHEMA, "project": blueprint.project, "entries": [asdict(e) for e in entries]}
    lines = [_FENCE, json.dumps(front, ensure_ascii=False, sort_keys=True, indent=1), _FENCE,
             f"# Repository blueprint of {blueprint.project or 'this project'}", "",
             "What yagent's Repo agent recorded about this repository, each claim with where it can be checked. "
             "`yagent blueprint` shows it beside the structure derived from the files now, marking what went stale.",
             ""]
    heading = None
    for entry in entries:
        title = "## The repository" if entry.section == "repo" else f"## Module `{entry.module}`"
        if title != heading:
            lines += [title, ""] if heading is None else ["", title, ""]
            heading = title
        gone = f" (module gone since {entry.orphaned_since})" if entry.orphaned_since else ""
        lines.append(f"- **{entry.field}**: {entry.claim} — `{entry.where}`{gone}")
    return "\n".join(lines) + "\n"


def _strict_json(text: str) -> Any:
    def refuse(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)


def parse_document(raw: bytes) -> Blueprint:
    """The blueprint a file's bytes hold; `damaged` says why when they hold none that can be trusted."""
    if len(raw) > MAX_DOCUMENT_BYTES:
        return Blueprint(damaged=f"the file is larger than {MAX_DOCUMENT_BYTES // (1024 * 1024)} MiB")
    text = raw.decode("utf-8", "replace")
    if not text.startswith(_FENCE + "\n"):
        return Blueprint(damaged="it has no front-matter")
    end = text.find("\n" + _FENCE + "\n", len(_FENCE))
    if end < 0:
        return Blueprint(damaged="its front-matter does not end (the file is cut)")
    try:
        front = _strict_json(text[len(_FENCE) + 1:end])
    except ValueError as exc:
        return Blueprint(damaged=f"its front-matter is not JSON ({exc})")
    if not isinstance(front, dict) or front.get("schema") != SCHEMA or not isinstance(front.get("entries"), list):
        return Blueprint(damaged=f"its front-matter is not a schema-{SCHEMA} blueprint")
    entries: list[Entry] = []
    names = set(Entry.__dataclass_fields__)
    for item in front["entries"]:
        if not isinstance(item, dict) or set(item) != names or not all(isinstance(v, str) for v in item.values()):
            return Blueprint(damaged="an entry of its front-matter is not one yagent writes")
        entries.append(Entry(**item))
    project = front.get("project")
    return Blueprint(project=project if isinstance(project, str) else "", entries=entries)
