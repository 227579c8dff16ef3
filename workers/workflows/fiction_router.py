"""The long-form fiction pipeline's router: pure functions of the facts, nothing else.

`route(state)` gives the next step by the first row of the priority table that applies (top to bottom, rows
exclusive), or None when no step follows from the facts — `situation(state)` then says which situation that
is. No function here reads a file, the clock or anything but its arguments (`fiction_facts.py` loads the
facts; `tests/workflows/test_fiction_router.py` makes each row fire alone).

Priority table:
 1. the book is complete                                   → None (complete: the engine finishes)
 2. a foundation file is missing, the planning tier known  → the same tier's architect completes it
    …and the tier not decided yet                          → None (planner_needed: the planner decides)
 3. chapters wait to be rewritten                          → writer rewrites the first of them
 4. the flow is reviewing                                  → None (reviewing: the user is asked)
 5. the flow is steering                                   → None (steering: the user is asked)
 6. an arc just ended and has no review                    → editor reviews the arc
 7. …reviewed but not summarised                           → editor summarises the arc
 8. …a volume just ended and has no summary                → editor summarises the volume
 9. the next arc is only a skeleton                        → long architect expands it
10. the last planned volume just ended                     → long architect appends a volume or completes the book
11. (flat book) a global review is due                     → editor reviews the book so far
12. (flat book) the outline is used up                     → short architect extends it or completes the book
13. otherwise                                              → writer writes the next chapter
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from .definition import Instruction

__all__ = ["ARCHITECT_LONG", "ARCHITECT_SHORT", "EDITOR", "PLANNER", "WRITER", "AdvanceHold", "ArcBoundary",
           "Flow", "HoldResolution", "Phase", "Situation", "State", "Tier", "resolve_hold", "route", "situation",
           "starts_forward_chapter"]

ARCHITECT_LONG, ARCHITECT_SHORT, WRITER, EDITOR, PLANNER = (
    "architect_long", "architect_short", "writer", "editor", "planner")


class Phase(enum.StrEnum):
    PLANNING = "planning"
    WRITING = "writing"
    COMPLETE = "complete"


class Flow(enum.StrEnum):
    WRITING = "writing"
    REVIEWING = "reviewing"  # the user reviews what was written: nobody writes meanwhile
    STEERING = "steering"  # the user changes course: nobody writes until they have said how


class Tier(enum.StrEnum):
    UNDECIDED = ""
    LONG = "long"  # volumes of arcs of chapters (layered)
    SHORT = "short"  # one flat outline of chapters


class Situation(enum.StrEnum):
    """Why the router gave no step."""

    COMPLETE = "complete"
    PLANNER_NEEDED = "planner_needed"
    REVIEWING = "reviewing"
    STEERING = "steering"
    UNKNOWN = "unknown"  # the router gave a step: asking for a situation then is a caller's error


@dataclass(frozen=True)
class ArcBoundary:
    """Where the last completed chapter sits when it ends an arc (layered books only)."""

    volume: int
    arc: int
    volume_end: bool  # it ends its volume too


@dataclass(frozen=True)
class State:
    """Every fact the router reads, loaded once before a decision; nothing else is consulted."""

    phase: Phase
    flow: Flow
    tier: Tier
    foundation_missing: tuple[str, ...]
    pending_rewrites: tuple[int, ...]
    last_completed: int  # 0: no chapter yet
    boundary: ArcBoundary | None = None  # the last completed chapter ends this arc (layered)
    has_arc_review: bool = False
    has_arc_summary: bool = False
    has_volume_summary: bool = False
    next_arc_skeleton: tuple[int, int] | None = None  # (volume, arc) holding the next chapter, only sketched
    last_volume_done: bool = False  # layered: no chapter after the last completed one is planned
    review_due: bool = False  # flat: the last completed chapter is one a global review follows
    has_global_review: bool = False
    outline_chapters: int = 0  # flat: chapters the outline plans

    @property
    def layered(self) -> bool:
        return self.tier is Tier.LONG


def route(s: State) -> Instruction | None:
    """The next step the facts call for, by the first row that applies; None for a situation (`situation`)."""
    if s.phase is Phase.COMPLETE:  # 1
        return None
    if s.foundation_missing:  # 2
        if s.tier is Tier.UNDECIDED:
            return None
        architect = ARCHITECT_LONG if s.layered else ARCHITECT_SHORT
        files = ", ".join(s.foundation_missing)
        return Instruction(architect, f"Complete the book's foundation: write {files}.",
                           f"foundation incomplete ({files}); the {s.tier.value} architect planned it")
    if s.pending_rewrites:  # 3
        chapter = s.pending_rewrites[0]
        return Instruction(WRITER, f"Rewrite chapter {chapter} as the rewrite queue says.",
                           f"chapter {chapter} is queued for a rewrite", chapter)
    if s.flow is Flow.REVIEWING:  # 4
        return None
    if s.flow is Flow.STEERING:  # 5
        return None
    b = s.boundary
    if s.layered and b is not None:
        where = f"volume {b.volume}, arc {b.arc}"
        if not s.has_arc_review:  # 6
            return Instruction(EDITOR, f"Review arc {b.arc} of volume {b.volume}.",
                               f"{where} ended with chapter {s.last_completed} and has no review")
        if not s.has_arc_summary:  # 7
            return Instruction(EDITOR, f"Summarise arc {b.arc} of volume {b.volume}.",
                               f"{where} is reviewed but not summarised")
        if b.volume_end and not s.has_volume_summary:  # 8
            return Instruction(EDITOR, f"Summarise volume {b.volume}.",
                               f"volume {b.volume} ended with chapter {s.last_completed} and has no summary")
    if s.layered and s.next_arc_skeleton is not None:  # 9
        volume, arc = s.next_arc_skeleton
        return Instruction(ARCHITECT_LONG, f"Expand arc {arc} of volume {volume} into chapters.",
                           f"chapter {s.last_completed + 1} belongs to arc {arc} of volume {volume}, which is "
                           "only a skeleton")
    if s.layered and s.last_volume_done:  # 10
        return Instruction(ARCHITECT_LONG, "Decide how the book goes on: append the next volume, or complete it.",
                           f"chapter {s.last_completed} ends the last planned volume")
    if not s.layered and s.review_due and not s.has_global_review:  # 11
        return Instruction(EDITOR, f"Review the book up to chapter {s.last_completed}.",
                           f"a global review is due after chapter {s.last_completed}")
    if not s.layered and s.last_completed >= s.outline_chapters:  # 12
        return Instruction(ARCHITECT_SHORT, "The outline is used up: extend it, or complete the book.",
                           f"all {s.outline_chapters} outlined chapters are written")
    chapter = s.last_completed + 1  # 13
    return Instruction(WRITER, f"Write chapter {chapter}.", f"chapter {chapter} is next", chapter)


def situation(s: State) -> Situation:
    """Why `route` gave None: the situation's name, which the definition maps to an action."""
    if s.phase is Phase.COMPLETE:
        return Situation.COMPLETE
    if s.foundation_missing and s.tier is Tier.UNDECIDED:
        return Situation.PLANNER_NEEDED
    if s.foundation_missing or s.pending_rewrites:
        return Situation.UNKNOWN
    if s.flow is Flow.REVIEWING:
        return Situation.REVIEWING
    if s.flow is Flow.STEERING:
        return Situation.STEERING
    return Situation.UNKNOWN


def starts_forward_chapter(instruction: Instruction | None, last_completed: int) -> bool:
    """Whether the step begins a chapter not written yet (a rewrite goes back; other roles write none)."""
    return instruction is not None and instruction.agent == WRITER and instruction.chapter > last_completed


@dataclass(frozen=True)
class AdvanceHold:
    """A one-shot stop the user asked for: stop before the chapter after `after_chapter` is begun."""

    after_chapter: int


class HoldResolution(enum.Enum):
    KEEP = "keep"  # not reached yet
    CONSUME = "consume"  # passed already (asked for a chapter written before): it goes without a stop
    CONSUME_AND_STOP = "consume_and_stop"  # reached: it goes, and the engine stops here


def resolve_hold(hold: AdvanceHold, last_completed: int) -> HoldResolution:
    """What a hold means under these facts (the loader refuses one it cannot read: a fact it misses is an
    error, never read as "keep going")."""
    if last_completed < hold.after_chapter:
        return HoldResolution.KEEP
    if last_completed == hold.after_chapter:
        return HoldResolution.CONSUME_AND_STOP
    return HoldResolution.CONSUME
