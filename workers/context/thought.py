"""The `<thought>` block contract: parse, normalise, validate.

A reply carries one block before its tool calls:

    <thought>
    goal: …
    step: …
    reason: …
    plan:
    - [x] done   - [>] doing   - [ ] todo
    </thought>

Parsing never raises: a malformed block yields None (or a plan with problems) and the caller decides.
Key aliases ("current goal", "reasoning", "plan update", …) are folded to the four fixed keys, and
marker variants (`X`, `-`, `*`, `1.`) are tolerated. `read_thought` also says what makes a reply's block
untrustworthy (never closed, several blocks, an empty goal or reason, more than one `[>]`): the thinklink
counts those and the loop makes them visible.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["ThoughtPlan", "ThoughtReading", "parse_thought", "read_thought", "strip_thought"]

_BLOCK = re.compile(r"<thought>(.*?)</thought>", re.DOTALL | re.IGNORECASE)
_OPENING = re.compile(r"<thought>", re.IGNORECASE)
_KEY = re.compile(r"^\s*([A-Za-z][A-Za-z _-]*?)\s*[:：]\s*(.*)$")
_ITEM = re.compile(r"^\s*(?:[-*•]|\d+[.)])?\s*\[\s*([xX>\-~ ]?)\s*\]\s*(.*)$")
_BARE_ITEM = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+(.*)$")

_ALIASES = {
    "goal": "goal", "current goal": "goal", "objective": "goal", "overall goal": "goal",
    "step": "step", "last step": "step", "previous step": "step", "progress": "step",
    "reason": "reason", "reasoning": "reason", "why": "reason", "rationale": "reason",
    "plan": "plan", "plan update": "plan", "updated plan": "plan", "todo": "plan",
}
_STATUS = {"x": "done", "X": "done", ">": "doing", "-": "doing", "~": "doing", " ": "todo", "": "todo"}


@dataclass
class ThoughtPlan:
    goal: str = ""
    step: str = ""
    reason: str = ""
    plan: list[tuple[str, str]] = field(default_factory=list)  # (done | doing | todo, text)

    def problems(self) -> list[str]:
        found = []
        if not self.goal:
            found.append("goal is empty")
        if not self.reason:
            found.append("reason is empty")
        doing = sum(1 for status, _ in self.plan if status == "doing")
        if doing > 1:
            found.append(f"{doing} plan items are marked [>] (at most one may be in progress)")
        return found

    @property
    def valid(self) -> bool:
        return not self.problems()


def parse_thought(text: str) -> ThoughtPlan | None:
    """The first `<thought>` block of a reply, or None when there is none."""
    match = _BLOCK.search(text or "")
    if match is None:
        return None
    plan = ThoughtPlan()
    current: str | None = None
    for raw in match.group(1).splitlines():
        line = raw.rstrip()
        if not line.strip():
            continue
        item = _ITEM.match(line)
        if current == "plan" and item:
            plan.plan.append((_STATUS.get(item.group(1), "todo"), item.group(2).strip()))
            continue
        key = _KEY.match(line)
        if key and key.group(1).strip().lower() in _ALIASES:
            current = _ALIASES[key.group(1).strip().lower()]
            value = key.group(2).strip()
            if current == "plan":
                if value:
                    plan.plan.append(("todo", value))
            else:
                setattr(plan, current, value)
            continue
        if current == "plan":
            bare = _BARE_ITEM.match(line)
            plan.plan.append(("todo", (bare.group(1) if bare else line).strip()))
        elif current is not None:
            setattr(plan, current, f"{getattr(plan, current)} {line.strip()}".strip())
    return plan


@dataclass(frozen=True, slots=True)
class ThoughtReading:
    """What a reply's thought block says, and why it cannot be taken as the contract says (if it cannot)."""

    plan: ThoughtPlan | None  # the first complete block; None when there is none
    problems: tuple[str, ...] = ()
    written: bool = False  # the reply opened a block at all

    @property
    def failed(self) -> bool:
        return bool(self.problems)


def read_thought(text: str) -> ThoughtReading:
    """The reply's block with its problems; a reply without any block has none (not every agent writes one)."""
    opened = len(_OPENING.findall(text or ""))
    if not opened:
        return ThoughtReading(None)
    plan = parse_thought(text)
    problems: list[str] = []
    if plan is None:
        problems.append("the <thought> block is never closed with </thought>")
    else:
        problems += plan.problems()
        if opened > 1:
            problems.append(f"{opened} thought blocks in one reply (only the first is read)")
    return ThoughtReading(plan, tuple(problems), written=True)


def strip_thought(text: str) -> str:
    """The reply without its thought block (what the user should read)."""
    return _BLOCK.sub("", text or "").strip()
