"""The first tier: tool results the model has read are cut, cheap ones first and oldest first, never a protected
result or one of the latest step, each cut recounting only the message it changed."""

from __future__ import annotations

from yagent.workers.agents.runtime import result_priority
from yagent.workers.context.rule_truncation import CHEAP, COSTLY, CUT_MARK, truncate_tool_results
from yagent.workers.context.token_ledger import TokenLedger
from yagent.workers.context.tokens import estimate_messages_tokens
from yagent.workers.llm import Message, ToolCall
from yagent.workers.tools import build_surface


def _step(call_id: str, tool: str, content: str) -> list[Message]:
    return [Message.assistant("", tool_calls=(ToolCall(call_id, tool, "{}"),)),
            Message.tool(call_id, content, name=tool)]


def _session() -> list[Message]:
    big = "line of output that goes on for a while\n" * 300  # ~2 700 tokens
    return [Message.system("sys"), Message.user("task"),
            *_step("c1", "read_file", "FILE " + big),  # costly
            *_step("c2", "deepthinking", "THOUGHT " + big),  # made by a model: protected
            *_step("c3", "run_bash", "BASH note:repo/findings-1 " + big + " artifact:20260101-000000-abcdef12"),
            *_step("c4", "grep", "GREP " + big),  # cheap
            *_step("c5", "run_bash", "LATEST " + big)]  # the latest step: the model has not read it


def _priority(name: str) -> int | None:
    return result_priority(build_surface("coding").resolve(name))


def test_tools_rank_by_what_their_specs_declare() -> None:
    assert _priority("run_bash") == CHEAP and _priority("grep") == CHEAP
    assert _priority("read_file") == COSTLY
    assert _priority("deepthinking") is None and _priority("design") is None and _priority("thinking") is None
    assert _priority("agent_exit") is None  # a short control result
    assert result_priority(None) == CHEAP  # a dynamic tool gone from the surface


def test_cheap_results_go_first_oldest_first_and_stop_once_enough_is_saved() -> None:
    messages, ledger = _session(), TokenLedger()
    before = ledger.total(messages)
    done = truncate_tool_results(messages, ledger, priority_of=_priority, keep_tokens=50, needed=3_000)
    contents = {m.tool_call_id: m.content for m in messages if m.role == "tool"}
    assert done.cut == 2 and CUT_MARK in contents["c3"] and CUT_MARK in contents["c4"]
    assert CUT_MARK not in contents["c1"]  # costly: not needed yet
    assert ledger.total(messages) == estimate_messages_tokens(messages) == before - done.saved
    # A cut result keeps its head, the references of what went, and how to see it again.
    assert contents["c3"].startswith("BASH note:repo/findings-1")
    assert "artifact:20260101-000000-abcdef12" in contents["c3"] and "grep again" in contents["c4"]


def test_protected_and_latest_results_are_never_cut_however_much_is_needed() -> None:
    messages, ledger = _session(), TokenLedger()
    done = truncate_tool_results(messages, ledger, priority_of=_priority, keep_tokens=50, needed=10**9)
    contents = {m.tool_call_id: m.content for m in messages if m.role == "tool"}
    assert done.cut == 3 and CUT_MARK in contents["c1"]
    assert CUT_MARK not in contents["c2"] and CUT_MARK not in contents["c5"]
    again = truncate_tool_results(messages, ledger, priority_of=_priority, keep_tokens=50, needed=10**9)
    assert again.cut == 0  # a cut result is not cut again


def test_each_cut_recounts_only_the_message_it_changed() -> None:
    counted: list[str] = []

    def estimate(message: Message) -> int:
        counted.append(message.tool_call_id or message.role)
        return len(message.content) // 4 + 4

    messages, ledger = _session(), TokenLedger(estimate)
    ledger.total(messages)
    counted.clear()
    truncate_tool_results(messages, ledger, priority_of=_priority, keep_tokens=50, needed=10**9)
    assert sorted(counted) == ["c1", "c3", "c4"]  # one recount per cut, nothing else
