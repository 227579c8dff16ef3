"""The skills catalogue in a run's system prompt: a line per skill, `name: description`, within a budget.

The budget is about 2 % of the model's context window (`CATALOGUE_SHARE`, the window from the shipped model
catalog; `DEFAULT_CONTEXT_WINDOW` for a model it does not know), at least `MIN_BUDGET_TOKENS`. Over it, every
description is cut to the longest length that fits (each cut one ends in "…"), then to the names alone; only
then are skills left out, from the end of the list. The catalogue says what it shortened and how many it
left out, and `use_skill` without a name lists every skill in full.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from yagent.ipc.skill_account import Skill
from yagent.workers.context.tokens import count_tokens
from yagent.workers.llm import lookup_model

__all__ = ["CATALOGUE_SHARE", "DEFAULT_CONTEXT_WINDOW", "MIN_BUDGET_TOKENS", "MIN_DESCRIPTION_CHARS", "Catalogue",
           "catalogue_budget", "render_catalogue"]

CATALOGUE_SHARE = 0.02
DEFAULT_CONTEXT_WINDOW = 128_000
MIN_BUDGET_TOKENS = 200
MIN_DESCRIPTION_CHARS = 24  # shorter than this a description says nothing; the names alone come next
CUT = "…"

_HEADING = "# Skills"
_INTRO = ("Procedures the user wrote down for tasks like these. When one fits what you are about to do, call "
          "use_skill with its name first and follow it; use_skill with no name lists every skill in full.")


@dataclass(frozen=True, slots=True)
class Catalogue:
    text: str  # "" when there is no skill
    budget: int  # tokens
    tokens: int
    shortened: int = 0  # descriptions cut (all of them, when only the names fit)
    left_out: tuple[str, ...] = ()  # skills not listed at all

    @property
    def note(self) -> str:
        """What was cut to fit the budget, for the run's log ("" when nothing was)."""
        if not self.shortened and not self.left_out:
            return ""
        parts = []
        if self.shortened:
            parts.append(f"{self.shortened} description{'s' if self.shortened != 1 else ''} shortened")
        if self.left_out:
            parts.append(f"{len(self.left_out)} skill{'s' if len(self.left_out) != 1 else ''} left out "
                         f"({', '.join(self.left_out)})")
        return (f"the skills catalogue keeps to {self.budget} tokens (about {CATALOGUE_SHARE:.0%} of the model's "
                f"context window): " + " and ".join(parts) + "; use_skill lists every skill")


def catalogue_budget(model: str) -> int:
    """Tokens the catalogue may take for `model`."""
    info = lookup_model(model) if model else None
    window = info.context_window if info is not None and info.context_window > 0 else DEFAULT_CONTEXT_WINDOW
    return max(MIN_BUDGET_TOKENS, int(window * CATALOGUE_SHARE))


def render_catalogue(skills: Sequence[Skill], budget: int, measure: Callable[[str], int] = count_tokens
                     ) -> Catalogue:
    """The catalogue of `skills` (in this order) in at most `budget` tokens, by `measure`."""
    if not skills:
        return Catalogue("", budget, 0)
    longest = max(len(s.description) for s in skills)

    def fits(cap: int | None, keep: int) -> tuple[str, int] | None:
        text = _text(skills, cap, keep)
        tokens = measure(text)
        return (text, tokens) if tokens <= budget else None

    whole = fits(None, len(skills))
    if whole is not None:
        return Catalogue(whole[0], budget, whole[1])
    if longest > MIN_DESCRIPTION_CHARS and fits(MIN_DESCRIPTION_CHARS, len(skills)) is not None:
        low, high = MIN_DESCRIPTION_CHARS, longest - 1  # low fits, longest does not
        while low < high:
            middle = (low + high + 1) // 2
            if fits(middle, len(skills)) is not None:
                low = middle
            else:
                high = middle - 1
        text, tokens = fits(low, len(skills))  # type: ignore[misc]
        return Catalogue(text, budget, tokens, shortened=sum(1 for s in skills if len(s.description) > low))
    keep = len(skills)
    while keep > 0:
        found = fits(0, keep)
        if found is not None:
            return Catalogue(found[0], budget, found[1], shortened=keep,
                             left_out=tuple(s.name for s in skills[keep:]))
        keep -= 1
    text = _text(skills, 0, 0)
    return Catalogue(text, budget, measure(text), shortened=0, left_out=tuple(s.name for s in skills))


def _text(skills: Sequence[Skill], cap: int | None, keep: int) -> str:
    lines = [_HEADING, _INTRO]
    for skill in skills[:keep]:
        lines.append(f"- {skill.name}" + (f": {_cut(skill.description, cap)}" if cap != 0 and skill.description
                                          else ""))
    note = []
    if cap is not None:
        note.append("names only, without their descriptions" if cap == 0 else f"descriptions cut at {cap} "
                    f"characters end in {CUT}")
    if keep < len(skills):
        note.append(f"{len(skills) - keep} more skill{'s' if len(skills) - keep != 1 else ''} not listed here")
    if note:
        lines.append(f"(Shortened to fit: {'; '.join(note)}. use_skill with no name lists them all in full.)")
    return "\n".join(lines)


def _cut(text: str, cap: int | None) -> str:
    if cap is None or len(text) <= cap:
        return text
    return text[:cap - 1].rstrip() + CUT
