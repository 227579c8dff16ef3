"""The fiction pipeline's router, row by row: a fixture for each row of the priority table makes exactly that row
fire (each also holds what later rows look at, so the order is shown too); then the loader's refusals of facts it
cannot read, and the one-shot holds."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from yagent.ipc.provider_config import parse_llm_config
from yagent.ipc.workflows import WORKFLOW_MODEL_ROLES
from yagent.workers.workflows.definition import FactError, Instruction, OnNone
from yagent.workers.workflows.fiction import FICTION
from yagent.workers.workflows.fiction_facts import load_holds, load_state, prepare
from yagent.workers.workflows.fiction_router import (
    AdvanceHold,
    ArcBoundary,
    Flow,
    HoldResolution,
    Phase,
    Situation,
    State,
    Tier,
    resolve_hold,
    route,
    situation,
    starts_forward_chapter,
)

# A flat book four chapters in, with everything later rows look at set so that they could fire too.
FLAT = State(phase=Phase.WRITING, flow=Flow.WRITING, tier=Tier.SHORT, foundation_missing=(), pending_rewrites=(),
             last_completed=4, outline_chapters=10)
LONG = dataclasses.replace(FLAT, tier=Tier.LONG, outline_chapters=0)
ARC_END = ArcBoundary(volume=1, arc=2, volume_end=True)

ROWS = {
    "1 complete": (dataclasses.replace(LONG, phase=Phase.COMPLETE, foundation_missing=("premise.md",),
                                       pending_rewrites=(2,), flow=Flow.STEERING), None, Situation.COMPLETE),
    "2 foundation, tier known": (dataclasses.replace(LONG, foundation_missing=("world.md", "arcs.toml"),
                                                     pending_rewrites=(2,)),
                                 ("architect_long", "Complete the book's foundation: write world.md, arcs.toml."),
                                 None),
    "2 foundation, tier undecided": (dataclasses.replace(FLAT, tier=Tier.UNDECIDED, foundation_missing=(
        "premise.md",), pending_rewrites=(2,)), None, Situation.PLANNER_NEEDED),
    "3 rewrites": (dataclasses.replace(FLAT, pending_rewrites=(3, 1), flow=Flow.REVIEWING),
                   ("writer", "Rewrite chapter 3 as the rewrite queue says."), None),
    "4 reviewing": (dataclasses.replace(LONG, flow=Flow.REVIEWING, boundary=ARC_END), None, Situation.REVIEWING),
    "5 steering": (dataclasses.replace(LONG, flow=Flow.STEERING, boundary=ARC_END), None, Situation.STEERING),
    "6 arc review": (dataclasses.replace(LONG, boundary=ARC_END, next_arc_skeleton=(2, 1), last_volume_done=True),
                     ("editor", "Review arc 2 of volume 1."), None),
    "7 arc summary": (dataclasses.replace(LONG, boundary=ARC_END, has_arc_review=True, next_arc_skeleton=(2, 1)),
                      ("editor", "Summarise arc 2 of volume 1."), None),
    "8 volume summary": (dataclasses.replace(LONG, boundary=ARC_END, has_arc_review=True, has_arc_summary=True,
                                             next_arc_skeleton=(2, 1)), ("editor", "Summarise volume 1."), None),
    "9 skeleton arc": (dataclasses.replace(LONG, boundary=ARC_END, has_arc_review=True, has_arc_summary=True,
                                           has_volume_summary=True, next_arc_skeleton=(2, 1)),
                       ("architect_long", "Expand arc 1 of volume 2 into chapters."), None),
    "10 volume end": (dataclasses.replace(LONG, boundary=ARC_END, has_arc_review=True, has_arc_summary=True,
                                          has_volume_summary=True, last_volume_done=True),
                      ("architect_long", "Decide how the book goes on: append the next volume, or complete it."),
                      None),
    "11 global review": (dataclasses.replace(FLAT, review_due=True, outline_chapters=4),
                         ("editor", "Review the book up to chapter 4."), None),
    "12 outline used up": (dataclasses.replace(FLAT, review_due=True, has_global_review=True, outline_chapters=4),
                           ("architect_short", "The outline is used up: extend it, or complete the book."), None),
    "13 next chapter": (dataclasses.replace(LONG, boundary=dataclasses.replace(ARC_END, volume_end=False),
                                            has_arc_review=True, has_arc_summary=True, review_due=True),
                        ("writer", "Write chapter 5."), None),
}


@pytest.mark.parametrize("row", list(ROWS))
def test_each_row_of_the_priority_table_fires_on_its_fixture(row: str) -> None:
    state, step, expected_situation = ROWS[row]
    got = route(state)
    if step is None:
        assert got is None, row
        assert situation(state) is expected_situation
        assert FICTION.no_step(state).action is FICTION.on_none[expected_situation]
    else:
        assert got is not None and (got.agent, got.task) == step, row
        assert got.reason  # every decision says why
    assert route(state) == got and state == ROWS[row][0]  # pure: the same answer again, the input untouched


def test_every_role_is_a_model_role_the_configuration_knows() -> None:
    assert {spec.model_role for spec in FICTION.roles.values()} == set(WORKFLOW_MODEL_ROLES)
    table = {"global": {"llm": {"use_provider": "p", "providers": {"p": {
        "api_base_url": "http://127.0.0.1:9/v1", "model": "m", "api_key": "k"}}}},
        "agents": {"llm": {role: {"use_provider": "p"} for role in WORKFLOW_MODEL_ROLES}}}
    assert parse_llm_config(table, {}).warnings == []


def test_the_definition_says_per_situation_what_happens_when_there_is_no_step() -> None:
    assert dict(FICTION.on_none) == {Situation.COMPLETE: OnNone.FINISH, Situation.PLANNER_NEEDED: OnNone.PLANNER,
                                     Situation.REVIEWING: OnNone.ASK_USER, Situation.STEERING: OnNone.ASK_USER}
    with pytest.raises(FactError, match="no action for the situation 'unknown'"):
        FICTION.no_step(FLAT)  # asking why there is no step when there is one is a caller's error, said


def test_a_writer_step_starts_a_forward_chapter_only_for_a_chapter_not_written_yet() -> None:
    assert starts_forward_chapter(Instruction("writer", "w", "r", 5), 4)
    assert not starts_forward_chapter(Instruction("writer", "rewrite", "r", 3), 4)
    assert not starts_forward_chapter(Instruction("editor", "e", "r"), 4) and not starts_forward_chapter(None, 4)
    assert [resolve_hold(AdvanceHold(5), n) for n in (4, 5, 6)] == [
        HoldResolution.KEEP, HoldResolution.CONSUME_AND_STOP, HoldResolution.CONSUME]


# -- the loader --------------------------------------------------------------------------------------------------


def _book(tmp_path: Path, *, tier: str = "short", completed: str = "1, 2", outline: int = 3) -> Path:
    directory = tmp_path / "project" / ".yagent" / "workflows" / "fiction"
    prepare(directory)
    (directory / "progress.toml").write_text(f'phase = "writing"\nflow = "writing"\ncompleted = [{completed}]\n')
    (directory / "planning.toml").write_text(f'tier = "{tier}"\n')
    for name in ("premise.md", "characters.md", "world.md"):
        (directory / "foundation" / name).write_text(f"# {name}\n")
    (directory / "foundation" / "outline.md").write_text("".join(f"{n}. Chapter {n}\n" for n in range(1, outline + 1)))
    return directory


def test_the_loader_reads_a_book_on_disk_into_the_state_the_router_routes(tmp_path: Path) -> None:
    directory = _book(tmp_path)
    state = load_state(directory)
    assert (state.tier, state.last_completed, state.outline_chapters, state.foundation_missing) == (
        Tier.SHORT, 2, 3, ())
    assert route(state) == Instruction("writer", "Write chapter 3.", "chapter 3 is next", 3)
    (directory / "foundation" / "world.md").unlink()
    assert route(load_state(directory)).task == "Complete the book's foundation: write world.md."
    (directory / "complete.md").write_text("It ends here.\n")
    assert load_state(directory).phase is Phase.COMPLETE
    # A long book: arcs.toml replaces the outline; a skeleton arc is expanded before its first chapter.
    long_book = _book(tmp_path / "long", tier="long", completed="1, 2, 3")
    (long_book / "foundation" / "arcs.toml").write_text(
        "[[volume]]\nnumber = 1\n[[volume.arc]]\nnumber = 1\nfirst = 1\nlast = 3\n"
        "[[volume.arc]]\nnumber = 2\nfirst = 4\nlast = 6\nskeleton = true\n")
    for kind in ("reviews", "summaries"):
        (long_book / kind / "arc-1-1.md").write_text("done\n")
    state = load_state(long_book)
    assert state.boundary == ArcBoundary(1, 1, False) and state.next_arc_skeleton == (1, 2)
    assert route(state).task == "Expand arc 2 of volume 1 into chapters."


DAMAGE = {
    "progress.toml torn in the middle": ("progress.toml", 'phase = "writ\x00\ncompleted = [1,', "not valid TOML"),
    "an unknown phase": ("progress.toml", 'phase = "drafting"\n', "is not one of"),
    "an unknown key": ("progress.toml", 'phase = "writing"\nchapters_done = 3\n', "unknown chapters_done"),
    "a gap in the chapters": ("progress.toml", "completed = [1, 3]\n", "2 is missing"),
    "a huge chapter number": ("progress.toml", "completed = [1e400]\n", "not valid TOML|whole number"),
    "a negative chapter": ("progress.toml", "completed = [-1]\n", "whole number"),
    "an unknown tier": ("planning.toml", 'tier = "epic"\n', "is not one of"),
    "no tier": ("planning.toml", "\n", "names no tier"),
    "an outline without chapters": ("foundation/outline.md", "Some notes, no numbered lines.\n", "lists no chapters"),
    "not UTF-8": ("foundation/outline.md", b"1. Caf\xe9\n", "not UTF-8"),
    "a rewrite of a chapter not written": ("rewrites.toml", "[[rewrite]]\nchapter = 9\nreason = 'x'\n",
                                           "only 2 are written"),
    "a hold without its chapter": ("holds.toml", "[[hold]]\n", "after_chapter = N"),
    "a hold of an unknown kind": ("holds.toml", "[[hold]]\nbefore_volume = 2\n", "unknown before_volume"),
}


@pytest.mark.parametrize("case", list(DAMAGE))
def test_a_fact_the_loader_cannot_read_is_an_error_naming_the_file_never_a_silent_keep_going(
        tmp_path: Path, case: str) -> None:
    directory = _book(tmp_path)
    name, content, message = DAMAGE[case]
    path = directory / name
    before = content.encode() if isinstance(content, str) else content
    path.write_bytes(before)
    with pytest.raises(FactError, match=message) as refused:
        load_state(directory)
        load_holds(directory)
    assert str(path) in str(refused.value)
    assert path.read_bytes() == before  # a reader never "repairs" what it cannot read


def test_missing_progress_a_linked_fact_and_an_oversized_one_are_refused_too(tmp_path: Path) -> None:
    directory = _book(tmp_path)
    (directory / "progress.toml").unlink()
    with pytest.raises(FactError, match=r"progress\.toml is missing"):
        load_state(directory)
    directory = _book(tmp_path / "b")
    outside = tmp_path / "elsewhere.md"
    outside.write_text("1. A chapter from somewhere else\n")
    os.symlink(outside, directory / "foundation" / "premise.md.link")
    (directory / "foundation" / "premise.md").unlink()
    os.rename(directory / "foundation" / "premise.md.link", directory / "foundation" / "premise.md")
    with pytest.raises(FactError, match="not a regular file"):
        load_state(directory)
    directory = _book(tmp_path / "c")
    (directory / "foundation" / "world.md").write_bytes(b"x" * (4 * 1024 * 1024 + 1))
    with pytest.raises(FactError, match="over 4 MiB"):
        load_state(directory)
