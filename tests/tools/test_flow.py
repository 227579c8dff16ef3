"""agent_exit, ask_user_for_help and the reasoning tools, through the production invoke path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from yagent.ipc.messages import RunOutcome
from yagent.ipc.vocabulary import HandoffStatus, QuestionKind, RunStatus, StopReason
from yagent.workers.tools import AskReply, YoloLevel
from yagent.workers.tools.handoff import format_for_parent

from .doubles import ScriptedAsker, ScriptedDelegator, ScriptedLLM, call_tool, make_ctx

HANDOFF = {
    "conclusion": "The cache is never invalidated.",
    "facts": [{"claim": "no TTL is set", "where": "src/cache.py:42"}],
    "open_questions": ["Is a TTL of 60 s acceptable?"],
    "status": "partial",
}


def test_agent_exit_echoes_every_argument_verbatim(project: Path, tmp_path: Path) -> None:
    args = {
        "summary": "Found the bug.",
        "handoff": HANDOFF,
        "blueprint": [{"module": "cache", "purpose": "memoises lookups"}],  # a parameter the schema omits
    }
    result = call_tool(make_ctx(project, tmp_path), "agent_exit", json.dumps(args), agent="repo")
    assert result.stop_run and not result.is_error
    assert result.data == args
    assert json.loads(result.content) == {"finished": True, "summary": "Found the bug."}


def test_agent_exit_data_is_a_copy(project: Path, tmp_path: Path) -> None:
    args = {"summary": "s", "handoff": {"conclusion": "c", "status": "ok", "facts": []}}
    result = call_tool(make_ctx(project, tmp_path), "agent_exit", args, agent="chat")
    args["handoff"]["facts"].append("mutated later")
    assert result.data is not None and result.data["handoff"]["facts"] == []


@pytest.mark.parametrize(
    ("args", "answer", "expected"),
    [
        ({"kind": "confirm", "question": "Delete the cache dir?"}, AskReply("yes"), "The user answered: yes"),
        ({"kind": "select", "question": "Which DB?", "options": ["sqlite", "postgres"]}, AskReply("postgres"),
         "The user answered: postgres"),
        ({"kind": "input", "question": "Port?", "default": "8080"}, AskReply("9090"), "The user answered: 9090"),
    ],
)
def test_ask_user_for_help_kinds(
    project: Path, tmp_path: Path, args: dict, answer: AskReply, expected: str
) -> None:
    asker = ScriptedAsker(answer)
    result = call_tool(make_ctx(project, tmp_path, asker=asker), "ask_user_for_help", args)
    assert result.content == expected and result.data["answer"] == answer.value
    [question] = asker.questions
    assert question.kind is QuestionKind(args["kind"]) and question.prompt == args["question"]
    assert question.options == tuple(args.get("options", ())) and question.default == args.get("default")


def test_ask_user_for_help_edge_cases(project: Path, tmp_path: Path) -> None:
    asker = ScriptedAsker(AskReply("", dismissed=True))
    ctx = make_ctx(project, tmp_path, asker=asker)
    dismissed = call_tool(ctx, "ask_user_for_help", {"kind": "confirm", "question": "Go?"})
    assert "without answering" in dismissed.content and dismissed.data["dismissed"]
    one_option = call_tool(ctx, "ask_user_for_help", {"kind": "select", "question": "?", "options": ["a"]})
    assert one_option.is_error and len(asker.questions) == 1
    bad_kind = call_tool(ctx, "ask_user_for_help", {"kind": "multi", "question": "?"})
    assert bad_kind.is_error and "must be one of" in bad_kind.content
    headless = call_tool(make_ctx(project, tmp_path), "ask_user_for_help", {"kind": "input", "question": "?"})
    assert headless.is_error and "No user is attached" in headless.content


def test_ask_user_for_help_is_gone_under_full_yolo(project: Path, tmp_path: Path) -> None:
    ctx = make_ctx(project, tmp_path, asker=ScriptedAsker(), yolo=YoloLevel.FULL)
    result = call_tool(ctx, "ask_user_for_help", {"kind": "confirm", "question": "?"})
    assert result.is_error and result.content.startswith("Unknown tool 'ask_user_for_help'")


def test_thinking_records_without_side_effects(project: Path, tmp_path: Path) -> None:
    result = call_tool(make_ctx(project, tmp_path), "thinking", {"thought": "check the tests first"})
    assert result.content == "Thought recorded." and result.data == {"thought": "check the tests first"}
    assert list(project.iterdir()) == []


def test_deepthinking_drafts_then_critiques(project: Path, tmp_path: Path) -> None:
    llm = ScriptedLLM(replies=["draft: use a lock", "final: use a lock, and a timeout"])
    result = call_tool(make_ctx(project, tmp_path, llm=llm), "deepthinking",
                       {"question": "How to avoid the race?", "context": "two writers"})
    assert result.content == "final: use a lock, and a timeout" and result.data == {"draft": "draft: use a lock"}
    first, second = llm.prompts
    assert "How to avoid the race?" in first["prompt"] and "two writers" in first["prompt"]
    assert "draft: use a lock" in second["prompt"] and first["system"] != second["system"]
    assert {p["tool"] for p in llm.prompts} == {"deepthinking"}


@pytest.mark.parametrize(
    ("tool", "args", "must_contain"),
    [
        ("design", {"goal": "add caching", "constraints": "no new deps"}, ["add caching", "no new deps"]),
        ("micro_agent", {"task": "write a regex for ISO dates", "input": "2024-01-02"},
         ["ISO dates", "2024-01-02"]),
    ],
)
def test_side_model_tools(project: Path, tmp_path: Path, tool: str, args: dict, must_contain: list[str]) -> None:
    llm = ScriptedLLM(replies=["the answer"])
    result = call_tool(make_ctx(project, tmp_path, llm=llm), tool, args)
    assert result.content == "the answer"
    [prompt] = llm.prompts
    assert prompt["tool"] == tool and all(text in prompt["prompt"] for text in must_contain)


@pytest.mark.parametrize("tool", ["deepthinking", "design", "micro_agent"])
def test_side_model_tools_without_a_model(project: Path, tmp_path: Path, tool: str) -> None:
    args = {"deepthinking": {"question": "q"}, "design": {"goal": "g"}, "micro_agent": {"task": "t"}}[tool]
    result = call_tool(make_ctx(project, tmp_path), tool, args)
    assert result.is_error and "no side model" in result.content


class LLMRateLimitError(Exception):
    """Stands in for the engine's error class (the tool layer must not import the LLM package)."""


_SIDE_ARGS = {"deepthinking": {"question": "q"}, "design": {"goal": "g"}, "micro_agent": {"task": "t"}}


@pytest.mark.parametrize("tool", ["deepthinking", "design", "micro_agent"])
def test_a_failing_side_model_is_an_error_result_the_model_can_act_on(
    project: Path, tmp_path: Path, tool: str, caplog: pytest.LogCaptureFixture
) -> None:
    error = LLMRateLimitError("provider 'cheap' (gpt-4o-mini): HTTP 429 rate limited")
    result = call_tool(make_ctx(project, tmp_path, llm=ScriptedLLM(replies=[error])), tool, _SIDE_ARGS[tool])
    assert result.is_error
    assert "HTTP 429" in result.content and "LLMRateLimitError" in result.content
    assert "unexpectedly" not in result.content  # a provider failure is an expected outcome, not a tool bug
    assert "your own" in result.content  # and the model is told what to do instead
    assert not [r for r in caplog.records if r.exc_info]  # no traceback logged as if the tool were broken


@pytest.mark.parametrize("tool", ["deepthinking", "design", "micro_agent"])
def test_an_empty_side_model_reply_is_an_error_not_an_empty_result(project: Path, tmp_path: Path, tool: str) -> None:
    """A reasoning model that spends its whole output budget thinking answers with no text at all."""
    replies: list[str | Exception] = ["  \n", "  \n"]
    result = call_tool(make_ctx(project, tmp_path, llm=ScriptedLLM(replies=replies)), tool, _SIDE_ARGS[tool])
    assert result.is_error and "no text" in result.content


def test_deepthinking_keeps_the_draft_when_the_critique_fails(project: Path, tmp_path: Path) -> None:
    llm = ScriptedLLM(replies=["draft: use a lock", LLMRateLimitError("HTTP 429")])
    result = call_tool(make_ctx(project, tmp_path, llm=llm), "deepthinking", {"question": "How to avoid the race?"})
    assert not result.is_error
    assert "draft: use a lock" in result.content and "not reviewed" in result.content and "HTTP 429" in result.content
    assert result.data == {"draft": "draft: use a lock", "reviewed": False}


def test_delegation_goes_through_the_delegator(project: Path, tmp_path: Path) -> None:
    child = RunOutcome(run="d1", agent="repo", status=RunStatus.DONE, stop_reason=StopReason.AGENT_EXIT,
                       output="repo report", handoff=HANDOFF)
    delegator = ScriptedDelegator(child)
    ctx = make_ctx(project, tmp_path, delegator=delegator)
    result = call_tool(ctx, "delegate_repo", {"task": "map the cache", "context": "see src/cache.py"},
                       agent="director", call_id="call_7")
    assert result.content == format_for_parent(child) and "repo report" in result.content and not result.is_error
    assert delegator.calls == [{"agent": "repo", "task": "map the cache", "call_id": "call_7",
                                "context": "see src/cache.py", "replay": False}]
    assert result.data == {"agent": "repo", "status": "partial", "handoff": HANDOFF, "stop_reason": "agent_exit",
                           "run": "d1"}


def test_failed_delegation_is_an_error_result(project: Path, tmp_path: Path) -> None:
    delegator = ScriptedDelegator(RunOutcome(run="d2", agent="devops", status=RunStatus.FAILED,
                                             stop_reason=StopReason.IDLE_TIMEOUT, error="no progress for 60s"))
    ctx = make_ctx(project, tmp_path, delegator=delegator)
    result = call_tool(ctx, "delegate_devops", {"task": "check disk"}, agent="repo")
    assert result.is_error and result.data["stop_reason"] == StopReason.IDLE_TIMEOUT
    assert result.data["status"] == HandoffStatus.ERROR
    assert "did not finish: idle_timeout" in result.content
    assert delegator.calls[0]["context"] == ""  # no context handed over


def test_a_child_the_daemon_stopped_reads_as_stopped_not_as_an_error(project: Path, tmp_path: Path) -> None:
    delegator = ScriptedDelegator(RunOutcome(run="d3", agent="repo", status=RunStatus.CANCELLED,
                                             stop_reason=StopReason.CANCELLED, output="half of it"))
    result = call_tool(make_ctx(project, tmp_path, delegator=delegator), "delegate_repo", {"task": "map"},
                       agent="director")
    assert not result.is_error and result.data["status"] == "stopped"
    assert "Partial output:\nhalf of it" in result.content


def test_delegation_without_a_channel(project: Path, tmp_path: Path) -> None:
    result = call_tool(make_ctx(project, tmp_path), "delegate_chat", {"task": "explain"}, agent="director")
    assert result.is_error and "no channel" in result.content
