"""The thinklink: the `<thought>` contract read tolerantly, failures counted, an append-only log per run that a
reader takes back as written (a torn or damaged line skipped and named, never repaired)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from yagent.workers.context import thinklink
from yagent.workers.context.thinklink import ThinkLink, read_thinklink
from yagent.workers.context.thought import read_thought
from yagent.workers.llm import Message

ALIASED = """Working on it.
<thought>
Current Goal: ship the parser
Last step: read the spec
Reasoning: the spec names four keys
Plan update:
1. [X] read the spec
* [>] write the parser
- [ ] test it
- [-] also this
</thought>
then calls"""


def test_aliases_and_marker_variants_are_folded_to_the_contract() -> None:
    reading = read_thought(ALIASED)
    plan = reading.plan
    assert plan is not None
    assert (plan.goal, plan.step, plan.reason) == ("ship the parser", "read the spec", "the spec names four keys")
    assert plan.plan == [("done", "read the spec"), ("doing", "write the parser"), ("todo", "test it"),
                         ("doing", "also this")]
    assert reading.problems == ("2 plan items are marked [>] (at most one may be in progress)",)


def test_each_way_a_block_can_be_out_of_shape_is_a_named_problem_and_no_block_is_none() -> None:
    assert read_thought("a plain answer").problems == () and not read_thought("a plain answer").written
    assert read_thought("<thought>\ngoal: g\nreason: r\n").problems == (
        "the <thought> block is never closed with </thought>",)
    assert read_thought("<thought>\nstep: s\n</thought>").problems == ("goal is empty", "reason is empty")
    twice = "<thought>\ngoal: g\nreason: r\n</thought> and <thought>\ngoal: h\nreason: r\n</thought>"
    assert read_thought(twice).problems == ("2 thought blocks in one reply (only the first is read)",)
    assert read_thought("<thought>\ngoal: g\nreason: r\nplan:\n- [>] one\n</thought>").problems == ()


def test_replies_are_logged_as_they_come_failures_counted_and_a_reader_gets_them_back(tmp_path: Path) -> None:
    path = tmp_path / "thinklink" / "r1.jsonl"
    link = ThinkLink(path)
    link.record_input("Fix the parser.")
    link.record_reply(ALIASED, at_step=1)
    link.record_reply("<thought>\ngoal: only a goal\n</thought>", at_step=2)
    link.record_reply("no block at all", at_step=3)
    link.record_reply("<thought>\ngoal: g", at_step=4)  # never closed: counted, nothing to keep
    assert link.parse_failures == 3
    assert [e.kind for e in link.entries] == ["input", "thought", "thought"]
    assert link.latest_plan() is not None and link.latest_plan().goal == "only a goal"
    entries, problems = read_thinklink(path)
    assert problems == [] and [e.to_json() for e in entries] == [e.to_json() for e in link.entries]
    assert oct(os.stat(path).st_mode & 0o777) == "0o600"


def test_absorbing_a_history_adds_its_inputs_and_blocks_once_without_the_project_instructions() -> None:
    link = ThinkLink()
    history = [Message.system("sys"),
               Message.user("Do X.\n\n# Project instructions (AGENTS.md, CLAUDE.md, YAGENT.md)\n\nTabs."),
               Message.assistant("<thought>\ngoal: X\nreason: asked\nplan:\n- [>] x\n</thought>"),
               Message.tool("c1", "result")]
    assert link.absorb(history) == 2
    assert link.absorb(history) == 0  # already there
    assert link.inputs() == ["Do X."]


def test_a_torn_last_line_and_a_damaged_middle_line_are_skipped_and_named(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    good = json.dumps({"kind": "input", "at_step": 0, "text": "hello"})
    path.write_text(f"{good}\n{{not json\n{good.replace('hello', 'again')}\n{good[:20]}")
    entries, problems = read_thinklink(path)
    assert [e.text for e in entries] == ["hello", "again"]
    assert len(problems) == 2 and ":2: damaged line" in problems[0] and ":4: torn last line" in problems[1]
    assert path.read_text().endswith(good[:20])  # a reader never repairs


def test_a_log_that_cannot_be_written_is_reported_once_and_the_entries_stay_in_memory(tmp_path: Path) -> None:
    blocker = tmp_path / "thinklink"
    blocker.write_text("a file where the directory should be")
    reported: list[str] = []
    link = ThinkLink(blocker / "r.jsonl", on_problem=reported.append)
    link.record_input("one")
    link.record_input("two")
    assert link.inputs() == ["one", "two"] and len(reported) == 1 and "cannot be written" in reported[0]


def test_a_link_planted_where_the_log_goes_is_not_followed(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.txt"
    target.write_text("precious\n")
    (tmp_path / "tl").mkdir()
    os.symlink(target, tmp_path / "tl" / "r.jsonl")
    reported: list[str] = []
    ThinkLink(tmp_path / "tl" / "r.jsonl", on_problem=reported.append).record_input("x")
    assert target.read_text() == "precious\n" and reported


def test_held_entries_are_kept_in_memory_at_once_and_written_in_order_at_release(tmp_path: Path) -> None:
    path = tmp_path / "thinklink" / "r1.jsonl"
    link = ThinkLink(path)
    link.hold()
    link.record_input("Fix the parser.")
    link.record_reply(ALIASED, at_step=1)
    assert link.inputs() == ["Fix the parser."] and not path.parent.exists()  # nothing on disk yet
    link.release()
    link.record_input("And the lexer.")  # written as it comes again
    entries, problems = read_thinklink(path)
    assert problems == [] and [e.to_json() for e in entries] == [e.to_json() for e in link.entries]
    assert [e.kind for e in entries] == ["input", "thought", "input"]
    link.release()  # nothing held: nothing written twice
    assert len(read_thinklink(path)[0]) == 3


def test_a_thinklink_dir_planted_as_a_link_is_refused_and_its_target_left_alone(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "doc0.md").write_text("precious\n")
    link = tmp_path / "thinklink"
    link.symlink_to(elsewhere, target_is_directory=True)
    reported: list[str] = []
    log = ThinkLink(link / "r1.jsonl", on_problem=reported.append)
    log.record_input("one")
    log.record_input("two")
    assert sorted(p.name for p in elsewhere.iterdir()) == ["doc0.md"] and (elsewhere / "doc0.md").read_text() == \
        "precious\n"
    assert log.inputs() == ["one", "two"] and len(reported) == 1 and f"{link} is a symbolic link" in reported[0]


def test_a_pipe_where_the_log_goes_is_reported_not_waited_on(tmp_path: Path) -> None:
    path = tmp_path / "thinklink" / "r1.jsonl"
    path.parent.mkdir()
    os.mkfifo(path)  # no reader ever comes: a blocking open for writing would wait for ever
    reported: list[str] = []
    log = ThinkLink(path, on_problem=reported.append)
    log.record_input("one")
    assert log.inputs() == ["one"] and len(reported) == 1 and f"{path} is a named pipe" in reported[0]


def test_a_log_planted_as_a_link_a_pipe_or_a_huge_file_reads_as_no_thinklink_saying_why(tmp_path: Path,
                                                                                        monkeypatch) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "X.jsonl").write_text(json.dumps({"kind": "input", "at_step": 0, "text": "a secret"}) + "\n")
    logs = tmp_path / "thinklink"
    logs.mkdir()
    (logs / "linked.jsonl").symlink_to(elsewhere / "X.jsonl")
    os.mkfifo(logs / "pipe.jsonl")  # no writer ever comes: a blocking read would wait for ever
    (logs / "huge.jsonl").write_text(json.dumps({"kind": "input", "at_step": 0, "text": "x" * 100}) + "\n")
    for name, said in (("linked", "is a symbolic link"), ("pipe", "is a named pipe"), ("huge", "more than the 64")):
        if name == "huge":
            monkeypatch.setattr(thinklink, "MAX_LOG_BYTES", 64)  # the bound, made small enough to pass
        entries, problems = read_thinklink(logs / f"{name}.jsonl")
        assert entries == [] and len(problems) == 1, name
        assert f"{logs / name}.jsonl" in problems[0] and said in problems[0], problems
    assert (elsewhere / "X.jsonl").read_text().endswith('"a secret"}\n')


def test_a_log_in_a_thinklink_directory_planted_as_a_link_is_not_read(tmp_path: Path) -> None:
    elsewhere = tmp_path / "other-task-thinklink"
    elsewhere.mkdir()
    (elsewhere / "r1.jsonl").write_text(json.dumps({"kind": "input", "at_step": 0, "text": "a secret"}) + "\n")
    (tmp_path / "thinklink").symlink_to(elsewhere, target_is_directory=True)
    entries, problems = read_thinklink(tmp_path / "thinklink" / "r1.jsonl")
    assert entries == [] and len(problems) == 1 and "thinklink: not a directory of yagent's" in problems[0]
