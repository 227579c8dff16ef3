"""`context_refs` of a delegation: notes and artifacts the parent stresses, inlined in full into the task.

This is emphasis, not admission: the child finds every note through the index anyway. A ref is a note's
handle (`note:repo/STEM`, or `repo/STEM`), `agent:NAME` for that agent's newest note (`agent:repo` and
`agent:repo_agent` name the same one), or an artifact (`artifact:ID`). Each ref counts once; a ref that
names nothing is counted as unresolved and shown in the result's header.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .artifact_store import ArtifactStore
from .handoff_parse import render_handoff
from .note_store import NoteRef, NoteStore, agent_dir_name

__all__ = ["MAX_REFS", "ContextPack", "resolve_refs"]

MAX_REFS = 10  # refs inlined per delegation; the rest are reported as over the limit
DEFAULT_PACK_CHARS = 40_000


@dataclass
class ContextPack:
    text: str = ""
    resolved: list[str] = field(default_factory=list)
    unresolved: list[str] = field(default_factory=list)
    over_limit: list[str] = field(default_factory=list)

    def header(self) -> str:
        """What the parent's tool result says about its refs ("" when it passed none)."""
        if not (self.resolved or self.unresolved or self.over_limit):
            return ""
        parts = [f"context_refs: {len(self.resolved)} inlined"]
        if self.unresolved:
            parts.append(f"{len(self.unresolved)} unresolved ({', '.join(self.unresolved)})")
        if self.over_limit:
            parts.append(f"{len(self.over_limit)} over the limit of {MAX_REFS} and left out")
        return "[" + "; ".join(parts) + "]"


def _agent_name(name: str) -> str:
    name = agent_dir_name(name)
    return name.removesuffix("_agent") or name


def _note_ref(store: NoteStore, ref: str) -> NoteRef | None:
    if ref.startswith("agent:"):
        wanted = _agent_name(ref.removeprefix("agent:"))
        mine = [r for r in store.refs() if _agent_name(r.agent) == wanted]
        return mine[-1] if mine else None
    agent, _, stem = ref.removeprefix("note:").rpartition("/")
    if agent:
        return NoteRef(agent_dir_name(agent), stem)
    return next((r for r in store.refs() if r.stem == stem), None)


def _clip(text: str, budget: int) -> str:
    if len(text) <= budget:
        return text
    keep = max(budget - 80, 200)
    return text[:keep] + f"\n[… {len(text) - keep} more characters: read it whole with read_note/read_artifact …]"


def resolve_refs(refs: list[str], notes: NoteStore, artifacts: ArtifactStore | None,
                 budget: int = DEFAULT_PACK_CHARS) -> ContextPack:
    """Inline what `refs` name, within `budget` characters split evenly; every item keeps an excerpt."""
    pack = ContextPack()
    seen: list[str] = []
    for raw in refs:
        ref = str(raw).strip()
        if ref and ref not in seen:
            seen.append(ref)
    wanted, pack.over_limit = seen[:MAX_REFS], seen[MAX_REFS:]
    blocks: list[tuple[str, str]] = []
    for ref in wanted:
        if ref.startswith("artifact:"):
            page = artifacts.read(ref, 0, budget) if artifacts is not None else None
            if page is None:
                pack.unresolved.append(ref)
                continue
            blocks.append((f"artifact:{page.artifact_id}", page.text))
        else:
            note_ref = _note_ref(notes, ref)
            note = notes.read(note_ref) if note_ref is not None else None
            if note is None:
                pack.unresolved.append(ref)
                continue
            blocks.append((note.ref.handle, render_handoff(note.handoff) + "\n\n" + note.body))
        pack.resolved.append(ref)
    if blocks:
        share = max(budget // len(blocks), 400)
        pack.text = "\n\n".join(f"=== {handle} (full text, stressed by the delegating agent) ===\n{_clip(body, share)}"
                                for handle, body in blocks)
    return pack
