"""Reading a note's hand-off back: `parse_handoff` never raises and never returns nothing.

Three tiers, best first: a schema-2 front-matter with a usable `handoff` is read as it is (leniently: a
field of the wrong type is left out, not fatal); a v1 note (a `summary`, no hand-off) gets a hand-off
synthesised from its summary and marked `degraded="v1"` — the file is never rewritten; anything else (no
front-matter, damaged JSON, a hand-off without a conclusion, a schema-2 note written without one) is
`degraded="absent"`, its conclusion the note's summary where it has one.
`render_handoff` fits a hand-off into a budget by dropping facts, never by cutting the conclusion.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from yagent.ipc.vocabulary import HandoffStatus

__all__ = [
    "DEGRADED_ABSENT",
    "DEGRADED_V1",
    "NOTE_STATUSES",
    "Fact",
    "Handoff",
    "parse_handoff",
    "render_handoff",
]

DEGRADED_V1 = "v1"  # synthesised from a v1 note's summary
DEGRADED_ABSENT = "absent"  # the note carried no readable hand-off
# The statuses a note may carry: the three an agent writes, and degraded (written by the replay side).
NOTE_STATUSES = (HandoffStatus.OK, HandoffStatus.PARTIAL, HandoffStatus.ERROR, HandoffStatus.DEGRADED)
# Caps on what one note contributes, so a huge or hostile front-matter cannot flood an index or a context.
MAX_CONCLUSION = 4_000
MAX_CLAIM = 1_000
MAX_FACTS = 64
MAX_QUESTIONS = 32
_ABSENT_CONCLUSION = "(this note carries no readable hand-off; read its body)"


@dataclass(frozen=True, slots=True)
class Fact:
    claim: str
    where: str


@dataclass(frozen=True, slots=True)
class Handoff:
    conclusion: str
    facts: tuple[Fact, ...] = ()
    open_questions: tuple[str, ...] = ()
    status: HandoffStatus = HandoffStatus.OK
    degraded: str = ""  # "" (read as written), DEGRADED_V1 or DEGRADED_ABSENT

    def to_json(self) -> dict[str, Any]:
        """The front-matter shape (schema 2); `degraded` is a reading, never written."""
        return {"conclusion": self.conclusion, "facts": [{"claim": f.claim, "where": f.where} for f in self.facts],
                "open_questions": list(self.open_questions), "status": self.status.value}


def _text(value: Any, cap: int) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return ""
    if isinstance(value, float) and not math.isfinite(value):
        return ""
    text = " ".join(str(value).split())
    return text if len(text) <= cap else text[: cap - 1] + "…"


def _facts(value: Any) -> tuple[Fact, ...]:
    if not isinstance(value, list):
        return ()
    facts = []
    for item in value[:MAX_FACTS]:
        if isinstance(item, dict):
            claim = _text(item.get("claim"), MAX_CLAIM)
            if claim:
                facts.append(Fact(claim, _text(item.get("where"), MAX_CLAIM)))
    return tuple(facts)


def _questions(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(q for q in (_text(v, MAX_CLAIM) for v in value[:MAX_QUESTIONS]) if q)


def _status(value: Any) -> HandoffStatus:
    # An unreadable status is partial, as the parent reads it (tools/handoff.handoff_status).
    return HandoffStatus(value) if value in {s.value for s in NOTE_STATUSES} else HandoffStatus.PARTIAL


def parse_handoff(front: Any) -> Handoff:
    """The hand-off of a note's front-matter (any value at all, e.g. what a damaged file decoded to)."""
    try:
        return _parse(front)
    except Exception:  # the promise is "never raises": a reader must always get a hand-off
        return Handoff(_ABSENT_CONCLUSION, status=HandoffStatus.PARTIAL, degraded=DEGRADED_ABSENT)


def _parse(front: Any) -> Handoff:
    if not isinstance(front, dict):
        return Handoff(_ABSENT_CONCLUSION, status=HandoffStatus.PARTIAL, degraded=DEGRADED_ABSENT)
    raw = front.get("handoff")
    if isinstance(raw, dict):
        conclusion = _text(raw.get("conclusion"), MAX_CONCLUSION)
        if conclusion:
            return Handoff(conclusion, _facts(raw.get("facts")), _questions(raw.get("open_questions")),
                           _status(raw.get("status")))
    summary = _text(front.get("summary"), MAX_CONCLUSION)
    schema = front.get("schema")
    v1 = not (isinstance(schema, int) and not isinstance(schema, bool) and schema >= 2)
    if summary and v1 and not isinstance(raw, dict):
        return Handoff(summary, status=HandoffStatus.OK, degraded=DEGRADED_V1)
    return Handoff(summary or _ABSENT_CONCLUSION, status=_status(front.get("status")), degraded=DEGRADED_ABSENT)


def _fact_line(fact: Fact) -> str:
    return f"- {fact.claim} ({fact.where or 'no location given'})"


def render_handoff(handoff: Handoff, budget: int = 0) -> str:
    """The hand-off as text within `budget` characters (0 = no limit): facts are dropped from the last one
    on until it fits; the conclusion is kept whole even when it alone is over the budget."""
    status = handoff.status.value + (f", degraded={handoff.degraded}" if handoff.degraded else "")
    head = [f"Status: {status}", f"Conclusion: {handoff.conclusion}"]
    tail = ["Open questions:", *(f"- {q}" for q in handoff.open_questions)] if handoff.open_questions else []
    facts = [_fact_line(f) for f in handoff.facts]
    while True:
        lines = [*head, *(["Facts:", *facts] if facts else []), *tail]
        text = "\n".join(lines)
        if not budget or len(text) <= budget:
            return text
        if facts:
            facts.pop()
            continue
        if tail:
            tail = []
            continue
        return text
