"""One run's skills: the account it started with, its catalogue, and what `use_skill` has loaded so far.

A skill's text is read again when it is used (it may have changed since the run started), with the same checks
as the account's (`ipc.skill_files`). A page the run already holds is not injected twice: the answer says where
it is instead — unless the file changed since, when the new text is given and says so. What was loaded is
recorded in the rollout's turn context (`loaded_record`), and a resumed run takes it back (`restore`) for what
its history still holds, so it neither loses a skill nor is given it a second time.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from yagent.ipc.skill_account import Skill, SkillAccount, account_lines, where_to_put_skills
from yagent.ipc.skill_files import SkillFileError, list_skill_files, read_skill_text, shown_path
from yagent.ipc.skill_front_matter import FrontMatter, one_line, read_front_matter

from ..context.rule_truncation import CUT_MARK
from .catalogue import Catalogue, catalogue_budget, render_catalogue

__all__ = ["DEFAULT_PAGE", "MAX_PAGE", "USE_SKILL", "SkillShelf", "SkillUnavailable"]

USE_SKILL = "use_skill"
DEFAULT_PAGE = 12_000  # characters of instructions per answer: a whole skill, usually
MAX_PAGE = 48_000  # below the tool result's own cap (LATE: 64 000), so a page is never cut mid-way
_HEADER = "Skill: "  # the first words of every answer that carries a skill's text (a resume looks for them)
_MAX_FACT_CHARS = 300
_MAX_FACTS = 20


class SkillUnavailable(LookupError):
    """`use_skill` could not give what was asked; the message is what the model reads (it says what to do)."""


@dataclass(slots=True)
class _Loaded:
    digest: str
    offsets: set[int] = field(default_factory=set)


class SkillShelf:
    """The `use_skill` port of one run (`tools.context.SkillShelfPort`) and its system prompt's catalogue."""

    def __init__(self, account: SkillAccount, *, model: str = "", budget: int | None = None) -> None:
        self.account = account
        self.catalogue: Catalogue = render_catalogue(account.skills if account.enabled else (),
                                                     budget if budget is not None else catalogue_budget(model))
        self._loaded: dict[str, _Loaded] = {}

    # -- what the run starts with -------------------------------------------------------------------------

    def prompt_section(self) -> str:
        """The catalogue for the system prompt; "" when there is no skill."""
        return self.catalogue.text

    def account_lines(self) -> list[str]:
        return account_lines(self.account)

    # -- use_skill ------------------------------------------------------------------------------------------

    def use(self, name: str, offset: int = 0, limit: int | None = None) -> str:
        """The answer to `use_skill`: the skill's text from `offset` (or the list of skills for no name);
        `SkillUnavailable` saying what to do when there is nothing to give."""
        if not self.account.enabled:
            raise SkillUnavailable("Skills are turned off for this run ([skills] enabled = false in config.toml); "
                                   "work without them.")
        name = name.strip()
        if not name:
            return self.listing()
        skill = self.account.get(name)
        if skill is None:
            raise SkillUnavailable(self._unknown(name))
        try:
            text, digest = read_skill_text(skill.path, within=skill.root_real)
        except SkillFileError as exc:
            raise SkillUnavailable(f"Skill {name} cannot be read now: {shown_path(skill.path)} {exc}. Work without "
                                   "it, and tell the user.") from None
        front = read_front_matter(text)
        body = front.body.strip("\n")
        limit = DEFAULT_PAGE if limit is None else max(1, min(limit, MAX_PAGE))
        if offset > 0 and offset >= len(body):
            raise SkillUnavailable(f"Skill {name} has {len(body)} characters of instructions; offset {offset} is past "
                                   "their end. Use offset 0 to read them from the start.")
        loaded = self._loaded.get(name)
        changed = loaded is not None and loaded.digest != digest
        if loaded is not None and not changed and offset in loaded.offsets:
            return (f"Skill {name} is already loaded in this run: its text from character {offset} is in an earlier "
                    "use_skill result above. Follow it from there (another offset reads a part not shown yet).")
        if loaded is None or changed:
            loaded = self._loaded[name] = _Loaded(digest)
        loaded.offsets.add(offset)
        return self._answer(skill.name, front, body, offset, limit, changed=changed, skill=skill)

    def listing(self) -> str:
        """Every skill with its whole description (what the catalogue may have shortened or left out)."""
        if not self.account.skills:
            return "There are no skills yet. " + where_to_put_skills(self.account.project_root)
        lines = [f"{len(self.account.skills)} skills (call use_skill with a name to load one):"]
        for skill in self.account.skills:
            loaded = " (loaded)" if skill.name in self._loaded else ""
            lines.append(f"- {skill.name}{loaded}: {skill.description or '(no description)'} [{skill.scope}]")
        return "\n".join(lines)

    def _unknown(self, name: str) -> str:
        if not self.account.skills:
            return f"There is no skill {name!r}: there are no skills at all. " + where_to_put_skills(
                self.account.project_root)
        known = ", ".join(s.name for s in self.account.skills)
        return f"There is no skill {one_line(name, 80)!r}. The skills are: {known}. Call use_skill with one of them."

    def _answer(self, name: str, front: FrontMatter, body: str, offset: int, limit: int, *, changed: bool,
                skill: Skill) -> str:
        lines = [f"{_HEADER}{name} ({skill.scope}, {shown_path(skill.path)})"]
        if changed:
            lines.append("Its file changed since it was loaded earlier in this run: this is the new text.")
        if offset == 0:
            lines.append(f"Description: {front.description or '(none)'}")
            lines += _facts(front.fields)
            lines += [f"Problem: {p}" for p in skill.problems]
            if skill.folder:
                lines += _files(os.path.dirname(skill.path))
        page = body[offset:offset + limit]
        end = offset + len(page)
        if not body.strip():
            lines.append("Instructions: none beyond the description above (the file holds no more text).")
        elif offset == 0 and end == len(body):
            lines += ["Instructions:", page]
        else:
            lines += [f"Instructions, characters {offset}–{end} of {len(body)}:", page]
            if end < len(body):
                lines.append(f"[{len(body) - end} more characters: call use_skill with name={name!r} and "
                             f"offset={end}]")
        return "\n".join(lines)

    # -- the rollout record -------------------------------------------------------------------------------

    def loaded_record(self) -> list[dict[str, Any]]:
        """What this run has loaded, for the rollout's turn context."""
        return [{"name": n, "digest": self._loaded[n].digest, "offsets": sorted(self._loaded[n].offsets)}
                for n in sorted(self._loaded)]

    def restore(self, record: Any, history: Sequence[Any]) -> list[str]:
        """Take back what a stopped run had loaded (`record`, its turn context's `loaded_skills`), keeping only the
        pages its `history` still holds an answer for; returns the names restored."""
        held = _answered_pages(history)
        restored: list[str] = []
        for entry in record if isinstance(record, list) else []:
            if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
                continue
            name, recorded = entry["name"], entry.get("offsets")
            if not isinstance(recorded, list):  # a damaged record restores nothing of that skill
                continue
            offsets = {o for o in recorded if type(o) is int and (name, o) in held}
            if offsets:
                self._loaded[name] = _Loaded(str(entry.get("digest", "")), offsets)
                restored.append(name)
        return restored


    def retain(self, history: Sequence[Any]) -> list[str]:
        """After a compaction: forget every page `history` no longer holds whole (summarised away, or cut by the
        first tier), so the model may load it again instead of being told it is above; returns the skills
        forgotten entirely."""
        held = _answered_pages(history)
        forgotten: list[str] = []
        for name, loaded in list(self._loaded.items()):
            loaded.offsets = {o for o in loaded.offsets if (name, o) in held}
            if not loaded.offsets:
                del self._loaded[name]
                forgotten.append(name)
        return forgotten


def _facts(fields: Mapping[str, Any]) -> list[str]:
    lines = []
    tools = fields.get("allowed-tools", fields.get("allowed_tools"))
    if tools is not None:
        lines.append(f"Allowed tools (advice from the skill's author; yagent does not enforce it): {_shown(tools)}")
    other = [k for k in fields if k not in ("name", "description", "allowed-tools", "allowed_tools")]
    for key in other[:_MAX_FACTS]:
        lines.append(f"{one_line(key, 60)}: {_shown(fields[key])}")
    if len(other) > _MAX_FACTS:
        lines.append(f"({len(other) - _MAX_FACTS} more front-matter keys not shown)")
    return lines


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return one_line(value, _MAX_FACT_CHARS)
    try:
        text = json.dumps(value, ensure_ascii=False, default=repr)
    except (TypeError, ValueError, RecursionError):  # an integer of thousands of digits, say
        text = f"(a {type(value).__name__} too large to show)"
    return one_line(text, _MAX_FACT_CHARS)


def _files(folder: str) -> list[str]:
    files = list_skill_files(folder)
    if not files.names:
        return []
    lines = [f"Files beside SKILL.md in {shown_path(folder)}/ (read them with read_file when the instructions "
             "refer to them):"]
    lines += [f"  {name}" for name in files.names]
    if files.more:
        lines.append("  … and more (list the folder to see them all)")
    return lines


def _answered_pages(history: Iterable[Any]) -> set[tuple[str, int]]:
    """(skill, offset) of every `use_skill` call in `history` whose result carries that skill's text, whole (a
    result the first compression tier cut holds only its start)."""
    calls: dict[str, tuple[str, int]] = {}
    held: set[tuple[str, int]] = set()
    for message in history:
        if getattr(message, "role", "") == "assistant":
            for call in getattr(message, "tool_calls", ()):
                if call.name != USE_SKILL:
                    continue
                try:
                    args = json.loads(call.arguments or "{}")
                except ValueError:
                    continue
                if isinstance(args, dict) and isinstance(args.get("name"), str):
                    offset = args.get("offset", 0)
                    calls[call.id] = (args["name"].strip(), offset if type(offset) is int and offset > 0 else 0)
        elif getattr(message, "role", "") == "tool" and message.tool_call_id in calls:
            name, offset = calls[message.tool_call_id]
            if message.content.startswith(f"{_HEADER}{name} ") and CUT_MARK not in message.content:
                held.add((name, offset))
    return held
