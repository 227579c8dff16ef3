"""How the CLI reads its words: `yagent answer TASK [REQUEST_ID] VALUE…`, the values a question takes, limits."""

from __future__ import annotations

import pytest

from yagent.client.cli import build_parser
from yagent.client.task_commands import _runs_tree, accepted_answers, split_answer_args
from yagent.ipc.messages import Question, RunSummary, TaskSummary
from yagent.ipc.vocabulary import QuestionKind, StopReason


def test_the_first_word_is_a_request_id_only_when_it_looks_like_one() -> None:
    pending = ["r4a911317b56.1"]
    assert split_answer_args(["r4a911317b56.1", "once"], pending) == ("r4a911317b56.1", "once")
    # A stale id is still an id: the daemon says it is not pending, rather than it becoming the answer.
    assert split_answer_args(["r0123456789a.2", "yes"], pending) == ("r0123456789a.2", "yes")
    assert split_answer_args(["yes", "please"], pending) == (None, "yes please")
    assert split_answer_args(["once"], pending) == (None, "once")


def test_questions_with_a_fixed_set_of_answers_say_which() -> None:
    assert accepted_answers(Question(request_id="r1.1", kind=QuestionKind.AUTHORIZE, prompt="p")) == [
        "once", "session", "project", "deny"]
    assert accepted_answers(Question(request_id="r1.1", kind="confirm", prompt="p")) == ["yes", "no"]
    assert accepted_answers(Question(request_id="r1.1", kind="select", prompt="p", options=["a", "b"])) == ["a", "b"]
    assert accepted_answers(Question(request_id="r1.1", kind="input", prompt="p")) is None


@pytest.mark.parametrize("limit", ["0", "-1", "many"])
def test_ps_refuses_a_limit_that_lists_nothing(limit: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["ps", "-n", limit])
    assert exit_info.value.code == 2
    assert "argument -n/--limit" in capsys.readouterr().err


def test_the_runs_tree_names_a_stop_reason_only_when_it_adds_something() -> None:
    summary = TaskSummary(task="t1", project="/p", title="x", state="cancelled", created_at=0.0, updated_at=0.0,
                          runs=[RunSummary(run="r1", agent="director", status="cancelled", stop_reason="cancelled"),
                                RunSummary(run="r2", agent="repo", status="failed", stop_reason=StopReason.IDLE_TIMEOUT,
                                           parent="r1")])
    assert _runs_tree(summary) == ["└ director r1 cancelled", "  └ repo r2 failed (idle_timeout)"]
