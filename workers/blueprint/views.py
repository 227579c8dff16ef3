"""What the blueprint shows, where: the modules-and-edges shape in a system prompt, `read_blueprint`'s answer, a
delegation's module prose, and `yagent blueprint`.

Every view joins the derived layer (computed now) with the persisted entries: an entry whose module is gone is
shown nowhere (an orphan), one whose stored fingerprint differs from its section's now is marked stale (its prose
kept), one whose `where` could not be checked is marked unverifiable. The shape carries structure only — modules,
file counts, edges, entry points — never prose, and stays within its token budget, saying what it cut.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from .derivation import REPO, Derived
from .document import Blueprint, Entry

__all__ = ["STATES", "Shown", "delegation_prose", "human_view", "read_view", "shape_text", "visible"]

STATES = ("fresh", "stale", "unverifiable", "all")
Counter = Callable[[str], int]


@dataclass(frozen=True, slots=True)
class Shown:
    entry: Entry
    stale: bool

    @property
    def marks(self) -> str:
        marks = (["stale: the structure changed since (delegate_repo to refresh)"] if self.stale else []) + (
            ["unverifiable anchor"] if self.entry.anchor == "unverifiable" else [])
        return f" [{'; '.join(marks)}]" if marks else ""

    def line(self) -> str:
        return f"- {self.entry.field}: {self.entry.claim} — {self.entry.where}{self.marks} (id {self.entry.id})"


def visible(blueprint: Blueprint, derived: Derived) -> list[Shown]:
    """The entries a reader may see, each with whether it went stale; orphans are left out."""
    shown = []
    for entry in blueprint.entries:
        now = derived.fingerprint_of(entry.section, entry.module)
        if not now:  # its module is gone
            continue
        shown.append(Shown(entry, stale=now != entry.fingerprint))
    return shown


def _module_line(derived: Derived, module: str, notes: dict[str, tuple[int, int]]) -> str:
    facts = derived.modules[module]
    edges = f" → {', '.join(facts.imports)}" if facts.imports else ""
    mains = f"; entry: {', '.join(facts.entry_points)}" if facts.entry_points else ""
    annotated, stale = notes.get(module, (0, 0))
    mark = f" [{annotated} notes{f', {stale} stale' if stale else ''}]" if annotated else ""
    return f"- {module} ({len(facts.files)} files, {'/'.join(facts.languages)}){edges}{mains}{mark}"


def _notes(shown: list[Shown]) -> dict[str, tuple[int, int]]:
    notes: dict[str, tuple[int, int]] = {}
    for s in shown:
        count, stale = notes.get(s.entry.module, (0, 0))
        notes[s.entry.module] = (count + 1, stale + s.stale)
    return notes


def shape_text(derived: Derived, blueprint: Blueprint, *, max_tokens: int, count: Counter) -> str:
    """The modules-and-edges shape for a system prompt, within `max_tokens` ("" for none)."""
    if max_tokens <= 0 or not derived.modules:
        return ""
    shown = visible(blueprint, derived)
    notes = _notes(shown)
    # The most depended-on modules first: what the rest is built on is worth the budget most.
    order = sorted(derived.modules, key=lambda m: (-len(derived.modules[m].imported_by), m))
    head = (f"# Repository map (derived from the project's files now: {len(derived.modules)} modules, "
            f"{derived.source_files} source files, {len(derived.edges)} import edges)")
    lines: list[str] = []
    budget = max_tokens - count(head) - 40
    for module in order:
        line = _module_line(derived, module, notes)
        cost = count(line) + 1
        if cost > budget:
            break
        lines.append(line)
        budget -= cost
    cut = len(order) - len(lines)
    tail = []
    if derived.entry_points or derived.manifests:
        tail.append(f"Top level: {', '.join([*derived.manifests, *derived.entry_points][:12])}")
    if cut:
        head += f"; {cut} modules not shown, cut at [blueprint] index_max_tokens"
    if derived.partial:
        head += f"; partial: {derived.partial} files past the first {len(derived.files)} were not walked"
    annotated = len(notes)
    stale = sum(1 for _m, (_n, s) in notes.items() if s)
    if annotated:
        tail.append(f"{annotated} modules have notes: read_blueprint gives them" +
                    (f"; {stale} annotated but stale (delegate_repo to refresh)" if stale else ""))
    text = "\n".join([head, *lines, *tail])
    while count(text) > max_tokens and lines:  # the footer's cost, paid by the last module line
        lines.pop()
        text = "\n".join([head, *lines, *tail])
    return text


def _matches(s: Shown, section: str, module: str, field: str, state: str) -> bool:
    e = s.entry
    if section and e.section != section:
        return False
    if module and e.module != module.strip("/"):
        return False
    if field and e.field != field:
        return False
    if state == "stale":
        return s.stale
    if state == "fresh":
        return not s.stale
    if state == "unverifiable":
        return e.anchor == "unverifiable"
    return True


def read_view(derived: Derived, blueprint: Blueprint, *, section: str = "", module: str = "", field: str = "",
              state: str = "all", offset: int = 0, limit: int = 20, budget: int = 2000,
              count: Counter = len) -> str:
    """`read_blueprint`'s answer: the derived facts of the module asked for, then its entries, narrowed and paged."""
    parts: list[str] = []
    if blueprint.damaged:
        parts.append(f"(the persisted blueprint cannot be read: {blueprint.damaged}; only the derived structure is "
                     "shown — a Repo run writes it anew)")
    if module:
        facts = derived.modules.get(module.strip("/"))
        if facts is None:
            return "\n".join([*parts, f"{module} is not a module of this project (a directory with source files). "
                                      f"Modules: {', '.join(sorted(derived.modules)[:40])}"])
        parts.append(f"module {facts.path}: {len(facts.files)} files ({', '.join(facts.files[:30])}"
                     f"{', …' if len(facts.files) > 30 else ''}); imports {', '.join(facts.imports) or 'nothing'}; "
                     f"imported by {', '.join(facts.imported_by) or 'nothing'}"
                     + (f"; entry points: {', '.join(facts.entry_points)}" if facts.entry_points else "")
                     + (f"; manifests: {', '.join(facts.manifests)}" if facts.manifests else ""))
    chosen = [s for s in visible(blueprint, derived) if _matches(s, section, module, field, state)]
    if not blueprint.entries and not blueprint.damaged:
        parts.append("no notes yet: the blueprint is written when a Repo run finishes with blueprint entries in "
                     "agent_exit (delegate_repo to explore a module and record what it found). The structure above "
                     "is derived from the files now" if module else
                     "no notes yet: the blueprint is written when a Repo run finishes with blueprint entries in "
                     "agent_exit (delegate_repo to record one). Ask with `module` for a module's derived facts.")
        return "\n".join(parts)
    page = chosen[offset:offset + max(1, limit)]
    used = sum(count(p) for p in parts)
    lines = []
    for s in page:
        line = s.line() if module or s.entry.section == "repo" else f"[{s.entry.module}] {s.line()[2:]}"
        if used + count(line) > budget and lines:
            break
        lines.append(line)
        used += count(line)
    after = offset + len(lines)
    more = f"\n(entries {offset + 1}-{after} of {len(chosen)}; offset={after} for the next page)" \
        if after < len(chosen) else ""
    if not lines:
        lines = [f"no entry matches (of {len(visible(blueprint, derived))} visible)"]
    return "\n".join([*parts, *lines]) + more


def delegation_prose(derived: Derived, blueprint: Blueprint, task: str, *, budget: int, count: Counter) -> str:
    """What the blueprint says of the modules whose paths appear word for word in a delegated task ("" for none)."""
    shown = [s for s in visible(blueprint, derived) if s.entry.section == "module"]
    named = {m for m in {s.entry.module for s in shown} if m != REPO and re.search(
        rf"(?<![\w/.-]){re.escape(m)}(?![\w-])", task)}
    if not named:
        return ""
    lines = ["# What the repository blueprint says of the modules this task names"]
    used = count(lines[0])
    for s in sorted((s for s in shown if s.entry.module in named), key=lambda s: s.entry.sort_key()):
        line = f"[{s.entry.module}] {s.line()[2:]}"
        if used + count(line) > budget:
            lines.append("(more: read_blueprint)")
            break
        lines.append(line)
        used += count(line)
    return "\n".join(lines)


def human_view(derived: Derived, blueprint: Blueprint, *, module: str = "") -> str:
    """`yagent blueprint`: the structure derived now, then every visible note, stale and unverifiable marked."""
    out = [f"{derived.root}: {len(derived.modules)} modules, {derived.source_files} source files, "
           f"{len(derived.edges)} import edges (derived in {derived.seconds * 1000:.0f} ms)"]
    if derived.partial:
        out.append(f"! partial: {derived.partial} files past the first {len(derived.files)} were not walked")
    if blueprint.damaged:
        out.append(f"! the persisted blueprint cannot be read: {blueprint.damaged}")
    shown = visible(blueprint, derived)
    notes = _notes(shown)
    for name in sorted(derived.modules):
        if module and name != module.strip("/"):
            continue
        out.append(_module_line(derived, name, notes))
        out += [f"    {s.line()[2:]}" for s in shown if s.entry.section == "module" and s.entry.module == name]
    repo = [s for s in shown if s.entry.section == "repo"]
    if repo and not module:
        out.append("the repository:")
        out += [f"    {s.line()[2:]}" for s in repo]
    hidden = len(blueprint.entries) - len(shown)
    if hidden:
        out.append(f"({hidden} notes of modules that are gone are hidden; they are removed 90 days after)")
    if not blueprint.entries and not blueprint.damaged:
        out.append("no notes yet: a Repo run writes them (ask the Director to explore a module)")
    return "\n".join(out)
