"""parse_handoff never fails; the index's budgets keep their key-existence meanings, drop facts before a
conclusion is cut, and never lose a line's handle."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from yagent.ipc.board_settings import BoardSettings
from yagent.ipc.vocabulary import HandoffStatus
from yagent.workers.board import (
    DEGRADED_ABSENT,
    DEGRADED_V1,
    INDEX_HEADER,
    Fact,
    Handoff,
    IndexEntry,
    IndexOptions,
    NoteRef,
    NoteStore,
    board_index,
    build_index,
    format_index_line,
    parse_handoff,
    render_handoff,
    render_index,
)
from yagent.workers.board.board_index import IndexLines

_HOSTILE = [None, 0, 1.5, float("nan"), "text", b"bytes", [], [1, 2], {"handoff": None}, {"handoff": []},
            {"handoff": {"conclusion": None}}, {"handoff": {"conclusion": float("inf")}},
            {"handoff": {"conclusion": "c", "facts": "not a list", "open_questions": {"a": 1}, "status": ["ok"]}},
            {"handoff": {"conclusion": "c", "facts": [None, 3, {"claim": None}, {"where": "x"}]}},
            {"summary": None}, {"summary": float("nan")}, {"summary": {"deep": [1]}}, object()]


def test_parse_handoff_never_raises_and_never_returns_nothing() -> None:
    for value in _HOSTILE:
        handoff = parse_handoff(value)
        assert isinstance(handoff, Handoff) and handoff.conclusion, value
        assert handoff.status in HandoffStatus


def test_the_three_tiers_of_reading() -> None:
    v2 = parse_handoff({"schema": 2, "handoff": {"conclusion": "c", "status": "degraded",
                                                 "facts": [{"claim": "k", "where": "w"}, {"where": "no claim"}]}})
    assert (v2.degraded, v2.status, v2.facts) == ("", HandoffStatus.DEGRADED, (Fact("k", "w"),))
    assert parse_handoff({"summary": "old"}) == Handoff("old", degraded=DEGRADED_V1)
    assert parse_handoff({"handoff": {"conclusion": "  "}}).degraded == DEGRADED_ABSENT
    assert parse_handoff({"handoff": {"conclusion": "c", "status": "stopped"}}).status == HandoffStatus.PARTIAL


def test_render_drops_facts_not_the_conclusion() -> None:
    conclusion = "the conclusion " * 10
    handoff = Handoff(conclusion, tuple(Fact(f"fact {i}", f"a.py:{i}") for i in range(5)))
    full = render_handoff(handoff)
    assert "fact 4" in full
    some = render_handoff(handoff, budget=len(full) - 5)
    assert "fact 4" not in some and "fact 0" in some and conclusion in some
    tiny = render_handoff(handoff, budget=10)
    assert conclusion in tiny and "fact" not in tiny


def _entry(conclusion: str = "the parser is in src/parse.c", facts: int = 3) -> IndexEntry:
    return IndexEntry(NoteRef("repo", "20261203-120000-000000-0a0b0c0d"),
                      Handoff(conclusion, tuple(Fact(f"claim {i}", f"src/f{i}.c:{i}") for i in range(facts))))


def test_an_index_line_drops_facts_before_it_cuts_the_conclusion() -> None:
    entry = _entry()
    whole = format_index_line(entry, 0)
    assert "claim 2" in whole
    no_facts = format_index_line(entry, whole.index(" | facts:") + 3)
    assert no_facts.endswith("the parser is in src/parse.c") and "claim" not in no_facts
    some_facts = format_index_line(entry, len(whole) - 3)
    assert "claim 1" in some_facts and "claim 2" not in some_facts and len(some_facts) <= len(whole) - 3


def test_a_tiny_line_budget_still_keeps_the_handle() -> None:
    entry = _entry()
    for budget in (1, 5, 20, 40):
        line = format_index_line(entry, budget)
        assert "note:repo/20261203-120000-000000-0a0b0c0d" in line, budget


def test_a_conclusion_is_cut_only_once_every_fact_is_gone_and_the_line_keeps_its_budget() -> None:
    entry = _entry("a long conclusion " * 20)
    head = format_index_line(entry, 1)
    for budget in (len(head) + 10, len(head) + 100):
        line = format_index_line(entry, budget)
        assert line.startswith(head) and line.endswith("…") and len(line) <= budget and "claim" not in line


def test_line_chars_zero_means_no_trim() -> None:
    entry = _entry("x" * 5000, facts=40)
    assert format_index_line(entry, 0) == format_index_line(entry, 10**9)
    assert len(format_index_line(entry, 0)) > 5000


def _board(tmp_path: Path, notes: int) -> NoteStore:
    store = NoteStore(tmp_path / "notes")
    for i in range(notes):
        store.write("repo" if i % 2 else "coding", Handoff(f"conclusion {i}"), f"body {i}")
    return store


def test_index_max_notes_zero_is_off_and_the_newest_notes_are_shown(tmp_path: Path) -> None:
    store = _board(tmp_path, 5)
    assert build_index(store, IndexOptions(0, 240)) == []
    assert render_index(build_index(store, IndexOptions(0, 240)), IndexOptions(0, 240)) == ""
    shown = build_index(store, IndexOptions(3, 240))
    assert [e.handoff.conclusion for e in shown] == [s.handoff.conclusion for s in
                                                     (store.read(r) for r in store.refs()[-3:])]


def test_options_come_from_settings_with_their_zeros_meaning_off() -> None:
    assert IndexOptions.from_settings(BoardSettings()) == IndexOptions(30, 240)
    assert IndexOptions.from_settings(BoardSettings(index_max_notes=0, index_line_chars=0)) == IndexOptions(0, 0)


def test_the_index_is_the_same_text_however_often_it_is_built(tmp_path: Path) -> None:
    store = _board(tmp_path, 4)
    options = IndexOptions(10, 80)
    first = render_index(build_index(store, options), options)
    assert first.startswith(INDEX_HEADER) and first.count("\n- note:") == 4
    assert all(render_index(build_index(store, options), options) == first for _ in range(5))


def test_index_lines_are_made_again_only_for_what_changed_and_always_read_as_made_fresh(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kept lines are the very text a fresh index has: a new note gets its line, a note whose file was replaced in
    place (another process, same name) gets a new one, another budget new ones; the rest are not made again."""
    store = _board(tmp_path, 4)
    options, lines = IndexOptions(10, 80), IndexLines()
    made: list[str] = []
    real = board_index.format_index_line
    monkeypatch.setattr(board_index, "format_index_line",
                        lambda entry, chars: made.append(entry.handoff.conclusion) or real(entry, chars))

    def both() -> str:
        kept = render_index(build_index(store, options), options, lines)
        assert kept == render_index(build_index(store, options), options)  # a fresh index, line by line
        return kept

    both()
    made.clear()
    both()
    assert made == [f"conclusion {i}" for i in range(4)]  # only the fresh index made lines
    made.clear()
    store.write("coding", Handoff("conclusion 4"), "body 4")
    both()
    assert made.count("conclusion 4") == 2 and len(made) == 6  # the new note's line, and the fresh index's five
    made.clear()
    replaced = store.path(store.refs()[0])
    text = replaced.read_text().replace("conclusion 0", "conclusion zero")
    os.unlink(replaced)
    replaced.write_text(text)  # swapped under the same name: another file, another head
    assert "conclusion zero" in both()
    assert made[0] == "conclusion zero" and len(made) == 6  # that line alone, then the fresh index
    made.clear()
    options = IndexOptions(10, 40)
    both()
    assert len(made) == 10  # another budget: every line again (and the fresh index's)
