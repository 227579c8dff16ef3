"""The board as a run uses it: a note per delegation with the full deliverable, artifacts past the
budget, context_refs, and the kill switches honoured by every reader and writer."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from yagent.ipc.board_settings import BoardSettings
from yagent.ipc.messages import RunOutcome
from yagent.ipc.state_layout import artifacts_dir, notes_dir
from yagent.ipc.state_retention import prune_boards
from yagent.ipc.vocabulary import HandoffStatus, RunStatus, StopReason
from yagent.workers.board import ARTIFACT_ID, DEGRADED_ABSENT, MAX_REFS, Handoff, NoteStore, TaskBoard

_LONG = "\n".join(f"finding {i}: the function handle_{i} in src/mod_{i}.py does step {i}" for i in range(300))


def _done(output: str = "The greeting is printed in app.py line 1.", handoff: dict | None = None,
          agent: str = "repo", **over) -> RunOutcome:
    fields = {"status": RunStatus.DONE, "stop_reason": StopReason.AGENT_EXIT, "output": output, "agent": agent,
              "handoff": handoff if handoff is not None else {"conclusion": "app.py:1", "status": HandoffStatus.OK,
                                                              "facts": [{"claim": "prints", "where": "app.py:1"}]},
              "data": {"exit": {"summary": "app.py line 1"}}}
    fields.update(over)
    return RunOutcome(**fields)


def _board(tmp_path: Path, environ: dict | None = None, **settings) -> TaskBoard:
    return TaskBoard(tmp_path, "task-1", BoardSettings(**settings), environ=environ or {})


def test_a_delegation_leaves_a_note_whose_body_is_the_whole_deliverable(tmp_path: Path) -> None:
    board = _board(tmp_path)
    record = board.record_delegation(_done(), "Where is the greeting printed?")
    assert record.note.startswith("note:repo/") and not record.artifact
    assert record.outcome.output == "The greeting is printed in app.py line 1."
    (ref,) = board.notes.refs()
    note = board.notes.read(ref)
    assert note.body == "The greeting is printed in app.py line 1." and note.task == "Where is the greeting printed?"
    assert note.handoff.conclusion == "app.py:1" and note.handoff.status == HandoffStatus.OK
    assert record.note in board.index_text()


def test_a_failed_child_is_an_error_note_and_a_paused_or_interrupted_one_leaves_none(tmp_path: Path) -> None:
    board = _board(tmp_path)
    failed = board.record_delegation(_done(status=RunStatus.FAILED, stop_reason=StopReason.MAX_STEPS,
                                           output="half done"), "t")
    assert board.notes.read(board.notes.refs()[0]).handoff.status == HandoffStatus.ERROR  # as the parent reads it
    assert failed.note
    for stop in (StopReason.PAUSED, StopReason.CANCELLED, StopReason.INTERRUPTED):
        assert not board.record_delegation(_done(status=RunStatus.FAILED, stop_reason=stop, output="",
                                                 handoff={}), "t").note
    assert not board.record_delegation(_done(status=RunStatus.INTERRUPTED, stop_reason=StopReason.INTERRUPTED,
                                             output="partial"), "t").note
    errored = board.record_delegation(_done(status=RunStatus.FAILED, stop_reason=StopReason.LLM_ERROR, output="",
                                            handoff={}, error="the provider refused"), "t")
    note = board.notes.read(board.notes.refs()[-1])
    assert errored.note and "the provider refused" in note.body and note.handoff.degraded == DEGRADED_ABSENT
    assert note.handoff.status == HandoffStatus.ERROR and note.handoff.conclusion == "app.py line 1"
    assert len(board.notes.refs()) == 2


def test_a_deliverable_over_the_budget_becomes_an_artifact_and_the_parent_keeps_the_summary(tmp_path: Path) -> None:
    board = _board(tmp_path, artifact_budget_tokens=500)
    record = board.record_delegation(_done(_LONG, handoff={"conclusion": "300 findings", "status": "ok",
                                                           "artifacts": ["19990101-000000-deadbeef"]}), "t")
    assert ARTIFACT_ID.match(record.artifact)
    shown = record.outcome.output
    assert shown.startswith("300 findings") and record.artifact in shown and "read_artifact" in shown
    assert len(shown) < 1000
    note = board.notes.read(board.notes.refs()[0])
    assert note.artifacts == (record.artifact,)  # the system's id, not the one the model reported
    assert note.body == _LONG
    first = board.read_artifact(record.artifact, 0, 1000)
    assert first.startswith(f"artifact:{record.artifact}, characters 0–1000 of {len(_LONG)}")
    assert "offset=1000" in first
    pages, offset = [], 0
    while True:
        page = board.artifacts.read(record.artifact, offset, 4096)
        pages.append(page.text)
        if page.next_offset is None:
            break
        offset = page.next_offset
    assert "".join(pages) == _LONG


def test_without_a_handoff_the_artifact_summary_is_the_start_of_the_text(tmp_path: Path) -> None:
    board = _board(tmp_path, summary_max_runes=60)
    record = board.record_delegation(_done(_LONG, handoff={}, data={}), "t")
    assert record.outcome.output.startswith(_LONG[:59] + "…")


def test_a_short_deliverable_and_a_zero_budget_stay_inline(tmp_path: Path) -> None:
    assert not _board(tmp_path / "a").record_delegation(_done(), "t").artifact
    assert not _board(tmp_path / "b", artifact_budget_tokens=0).record_delegation(_done(_LONG), "t").artifact


def test_the_count_cap_applies_as_notes_are_written(tmp_path: Path) -> None:
    board = _board(tmp_path, max_notes_per_board=3)
    for i in range(5):
        board.record_delegation(_done(f"report {i}"), "t")
    assert [board.notes.read(r).body for r in board.notes.refs()] == ["report 2", "report 3", "report 4"]


def test_a_board_that_cannot_be_written_never_fails_the_delegation(tmp_path: Path) -> None:
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "task-1").write_text("a file where the task's directory belongs")
    record = _board(tmp_path).record_delegation(_done(), "t")
    assert record.outcome == _done() and not record.note


def _planted(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A directory the run cannot reach, holding notes the count cap would remove were it the board: (it, contents)."""
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "repo").mkdir(parents=True)
    for i in range(3):
        (elsewhere / "repo" / f"20200101-000000-00000{i}-0000000{i}.md").write_text(f"---\n{{}}\n---\ndoc{i}\n")
    return elsewhere, _contents(elsewhere)


def _contents(directory: Path) -> dict[str, str]:
    return {str(p.relative_to(directory)): p.read_text() for p in sorted(directory.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("linked", ["notes", "notes/repo", "artifacts"])
def test_a_board_directory_planted_as_a_link_is_refused_and_its_target_left_alone(tmp_path: Path, caplog,
                                                                                  linked: str) -> None:
    elsewhere, before = _planted(tmp_path)
    link = tmp_path / "tasks" / "task-1" / linked
    link.parent.mkdir(parents=True)
    link.symlink_to(elsewhere / "repo" if linked == "notes/repo" else elsewhere, target_is_directory=True)
    board = _board(tmp_path, max_notes_per_board=1, artifact_budget_tokens=500)

    record = board.record_delegation(_done(_LONG), "t")  # over the budget: an artifact, then the note

    assert record.outcome == _done(_LONG) and not record.note and not record.artifact  # the parent keeps it inline
    assert _contents(elsewhere) == before  # nothing written there, nothing removed
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warned) == 1 and f"{link} is a symbolic link" in warned[0] and "remove it" in warned[0]
    assert board.index_text() == "" and board.notes.refs() == []  # nor read through it: its notes are not the board's


def test_a_screenshot_is_not_stored_through_an_artifacts_link(tmp_path: Path) -> None:
    elsewhere, before = _planted(tmp_path)
    link = artifacts_dir(tmp_path, "task-1")
    link.parent.mkdir(parents=True)
    link.symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(OSError, match=re.escape(f"{link} is a symbolic link")):  # the browser tool: "not stored"
        _board(tmp_path).put_image(b"\x89PNG\r\n", ".png")
    assert _contents(elsewhere) == before


def _distinct_notes(board: TaskBoard, count: int) -> list[str]:
    return [board.record_delegation(_done(f"body {i}", handoff={"conclusion": f"c{i}", "status": "ok"},
                                          agent="coding"), "t").note for i in range(count)]


def test_context_refs_inline_at_most_the_limit_of_distinct_refs(tmp_path: Path) -> None:
    assert MAX_REFS == 10
    board = _board(tmp_path)
    handles = _distinct_notes(board, 13)
    assert len(set(handles)) == 13  # distinct fixtures: a dedup cannot make the limit pass by itself
    task, header = board.delegation_task("do it", [*handles, handles[0]])  # and a repeat counts once
    assert header == "[context_refs: 10 inlined; 3 over the limit of 10 and left out]"
    assert all(task.count(f"=== {h} (full text") == 1 for h in handles[:10])
    assert not any(f"=== {h} (full text" in task for h in handles[10:])
    assert task.endswith("Your task:\ndo it")


def test_agent_refs_resolve_in_both_spellings_and_misses_are_counted(tmp_path: Path) -> None:
    board = _board(tmp_path)
    board.record_delegation(_done("old repo body"), "t")
    board.record_delegation(_done("new repo body"), "t")
    for ref in ("agent:repo", "agent:repo_agent"):
        task, header = board.delegation_task("go", [ref])
        assert "new repo body" in task and "old repo body" not in task, ref
        assert header == "[context_refs: 1 inlined]"
    task, header = board.delegation_task("go", ["agent:coding", "note:repo/20990101-000000-00000000",
                                                "artifact:nope", "agent:repo"])
    assert header.startswith("[context_refs: 1 inlined; 3 unresolved (agent:coding, note:repo/")


def test_a_stressed_note_over_the_pack_budget_keeps_an_excerpt(tmp_path: Path) -> None:
    from yagent.workers.board import resolve_refs

    board = _board(tmp_path)
    handle = board.record_delegation(_done(_LONG), "t").note
    pack = resolve_refs([handle], board.notes, board.artifacts, budget=2_000)
    assert len(pack.text) < 2_500 and "finding 0:" in pack.text and "more characters" in pack.text


def test_the_blackboard_switch_stops_every_reader_and_writer(tmp_path: Path) -> None:
    on = _board(tmp_path)
    handle = on.record_delegation(_done(_LONG), "t").note
    artifact = on.notes.read(on.notes.refs()[0]).artifacts[0]
    off = _board(tmp_path, environ={"YAGENT_BLACKBOARD": "0"})
    assert off.record_delegation(_done(), "t") .note == "" and len(on.notes.refs()) == 1
    assert off.index_text() == "" and off.index_messages() == []
    assert off.delegation_task("go", [handle]) == ("go", "[context_refs ignored: the blackboard is switched off]")
    for read in (lambda: off.read_note(handle), off.list_notes, lambda: off.read_artifact(artifact)):
        with pytest.raises(LookupError, match="YAGENT_BLACKBOARD=0"):
            read()


def test_the_artifact_switch_keeps_deliverables_inline_and_refuses_reads(tmp_path: Path) -> None:
    board = _board(tmp_path, environ={"YAGENT_ARTIFACT_DISABLE": "1"})
    record = board.record_delegation(_done(_LONG), "t")
    assert record.note and not record.artifact and record.outcome.output == _LONG
    assert not artifacts_dir(tmp_path, "task-1").exists()
    with pytest.raises(LookupError, match="YAGENT_ARTIFACT_DISABLE=1"):
        board.read_artifact("20261203-120000-0a0b0c0d")


def test_the_prune_honours_the_same_switch_as_the_board(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _board(tmp_path).record_delegation(_done(), "t")
    monkeypatch.setenv("YAGENT_BLACKBOARD", "0")
    assert prune_boards(tmp_path, ttl=1, artifact_retention=1, keep=lambda _t: False, now=10**12).boards == []
    assert NoteStore(notes_dir(tmp_path, "task-1")).refs()


def test_read_note_pages_its_body_and_list_notes_has_no_bodies(tmp_path: Path) -> None:
    board = _board(tmp_path, artifact_budget_tokens=0)
    handle = board.record_delegation(_done(_LONG), "the task").note
    first = board.read_note(handle, 0, 500)
    assert "Conclusion: app.py:1" in first and "characters 0–500" in first and "offset=500" in first
    assert board.read_note(handle.removeprefix("note:"), 500, 10**6).rstrip().endswith(_LONG[-40:])
    listing = board.list_notes()
    assert handle in listing and "finding" not in listing and "prints" not in listing
    with pytest.raises(LookupError, match="list_notes"):
        board.read_note("note:repo/20990101-000000-00000000")
    assert Handoff  # the public name the board writes
