"""The built-in long-form fiction workflow: a planner, two architects (long and short form), a writer and an
editor, routed by `fiction_router.route` over the facts `fiction_facts.load_state` reads.

Each role is a continuable sub-agent kept under its name: the writer of chapter 5 goes on from the
conversation in which it wrote chapter 4 (as long as its configuration is the same; else a new writer starts on
the whole task). Every role's prompt below is its stable system prompt; what a step asks is its task.
"""

from __future__ import annotations

from pathlib import Path

from yagent.workers.agents.prompts import HANDOFF_CONTRACT

from .definition import Instruction, OnNone, RoleSpec, WorkflowDefinition
from .fiction_facts import commit, load_holds, load_state, prepare, progress_line, record_answer, take_hold
from .fiction_router import (
    ARCHITECT_LONG,
    ARCHITECT_SHORT,
    EDITOR,
    PLANNER,
    WRITER,
    HoldResolution,
    Situation,
    State,
    resolve_hold,
    route,
    situation,
    starts_forward_chapter,
)

__all__ = ["FICTION"]

_WORKSPACE = """\
# Where things are
Paths are relative to the project root. The workflow keeps its facts in `.yagent/workflows/fiction/`:
`foundation/` (premise.md, characters.md, world.md, and the plan: outline.md for a short book, arcs.toml for a \
long one), `reviews/`, `summaries/`, `rewrites.toml` (chapters queued for a rewrite), `steering.md` (what the \
user said when asked). The book is `chapters/NNNN.md`, four digits (chapters/0007.md is chapter 7). Read with \
read_file and list_dir; write new files with create_file and change files with search_replace_in_file. Never \
edit progress.toml: yagent keeps it.

# Finishing
""" + HANDOFF_CONTRACT

_ARCS = """\
arcs.toml plans volumes of arcs of chapters, in order, every chapter in exactly one arc:
[[volume]]
number = 1
[[volume.arc]]
number = 1
first = 1
last = 12
skeleton = false   # true: only sketched; it is expanded before its first chapter is written"""

_ROLES = {
    PLANNER: RoleSpec(f"""\
You are the planner of yagent's fiction workflow. You decide what kind of book this is before anyone plans it:
long form (volumes of arcs of chapters: a saga, a long novel) or short form (one flat outline of chapters: a \
novella, a short novel). Read what the user asked (the task, steering.md if it exists), decide, and write \
`.yagent/workflows/fiction/planning.toml` holding exactly one line: tier = "long" or tier = "short". Say why in \
your report.

{_WORKSPACE}""", "planner"),
    ARCHITECT_SHORT: RoleSpec(f"""\
You are the short-form architect of yagent's fiction workflow. You plan a book as one flat outline. When the \
foundation is incomplete you write what is missing: foundation/premise.md, foundation/characters.md, \
foundation/world.md, and foundation/outline.md — one numbered line per chapter ("1. The storm — Mara finds the \
letter"). When the outline is used up you decide: extend outline.md with further numbered chapters, or write \
`.yagent/workflows/fiction/complete.md` saying why the book is complete.

{_WORKSPACE}""", "architect_short"),
    ARCHITECT_LONG: RoleSpec(f"""\
You are the long-form architect of yagent's fiction workflow. You plan a book as volumes of arcs of chapters. \
When the foundation is incomplete you write what is missing: foundation/premise.md, foundation/characters.md, \
foundation/world.md and foundation/arcs.toml. You expand an arc that is only a skeleton (set skeleton = false and \
describe its chapters in foundation/arc-V-A.md), and when the last planned volume has ended you decide: append \
the next volume to arcs.toml, or write `.yagent/workflows/fiction/complete.md` saying why the book is complete.

{_ARCS}

{_WORKSPACE}""", "architect_long"),
    WRITER: RoleSpec(f"""\
You are the writer of yagent's fiction workflow. You write one chapter per task, in the book's voice, true to \
the foundation, the plan, the summaries and what the user said in steering.md: a new chapter with create_file at \
chapters/NNNN.md, a rewrite by changing the existing file as rewrites.toml asks. Read the previous chapter's end \
before you begin a new one.

{_WORKSPACE}""", "writer"),
    EDITOR: RoleSpec(f"""\
You are the editor of yagent's fiction workflow. You review and summarise what was written: an arc's review in \
reviews/arc-V-A.md, its summary in summaries/arc-V-A.md, a volume's summary in summaries/volume-V.md, a review of \
a short book so far in reviews/global-NNNN.md (NNNN: the last chapter reviewed). A chapter that must be rewritten \
goes into rewrites.toml as [[rewrite]] with its chapter and a reason.

{_WORKSPACE}""", "editor"),
}

_QUESTIONS = {
    Situation.REVIEWING: "The fiction workflow is waiting while you review the book. What should change, if "
                         "anything? (Your answer goes to steering.md; writing goes on.)",
    Situation.STEERING: "The fiction workflow is steering: how should the book go on? (Your answer goes to "
                        "steering.md; writing goes on.)",
}


def _planner_task(state: State) -> str:
    missing = ", ".join(state.foundation_missing)
    return (f"Decide the book's tier (long or short form) so its architect can plan it; the foundation still lacks "
            f"{missing}.")


def _hold(directory: Path, state: State, instruction: Instruction) -> str | None:
    if not starts_forward_chapter(instruction, state.last_completed):
        return None
    for hold in load_holds(directory):
        resolution = resolve_hold(hold, state.last_completed)
        if resolution is HoldResolution.KEEP:
            continue
        take_hold(directory, hold)
        if resolution is HoldResolution.CONSUME_AND_STOP:
            return f"stopped after chapter {hold.after_chapter}, as holds.toml asked"
    return None


FICTION: WorkflowDefinition[State] = WorkflowDefinition(
    name="fiction",
    roles=_ROLES,
    load=load_state,
    route=route,
    situation=lambda state: situation(state).value,
    on_none={Situation.COMPLETE: OnNone.FINISH, Situation.PLANNER_NEEDED: OnNone.PLANNER,
             Situation.REVIEWING: OnNone.ASK_USER, Situation.STEERING: OnNone.ASK_USER},
    planner=PLANNER,
    planner_task=_planner_task,
    commit=commit,
    answered=record_answer,
    hold=_hold,
    prepare=prepare,
    progress=progress_line,
    question=lambda s: _QUESTIONS.get(s, f"The fiction workflow cannot go on ({s}). What should happen?"),
)

