"""The board's tools and the delegation tool's board half, through the production call path."""

from __future__ import annotations

from pathlib import Path

from tests.tools.doubles import ScriptedDelegator, call_tool, make_ctx
from yagent.ipc.board_settings import BoardSettings
from yagent.ipc.messages import RunOutcome
from yagent.ipc.vocabulary import RunStatus, StopReason
from yagent.workers.board import INDEX_HEADER, TaskBoard
from yagent.workers.tools import build_surface

_LONG = " ".join(f"word{i}" for i in range(3000))


def _child(output: str, agent: str = "repo") -> RunOutcome:
    return RunOutcome(status=RunStatus.DONE, stop_reason=StopReason.AGENT_EXIT, output=output, agent=agent,
                      handoff={"conclusion": f"{agent} concluded", "status": "ok"})


def _ctx(tmp_path: Path, delegator: ScriptedDelegator, environ: dict | None = None):
    board = TaskBoard(tmp_path / "home", "task-1", BoardSettings(), environ=environ or {})
    return make_ctx(tmp_path, tmp_path, delegator=delegator, board=board), board


def test_a_delegation_writes_its_note_and_the_next_one_gets_the_index_before_its_task(tmp_path: Path) -> None:
    delegator = ScriptedDelegator(outcome=_child("the answer"))
    ctx, board = _ctx(tmp_path, delegator)
    first = call_tool(ctx, "delegate_repo", {"task": "find it"}, agent="director")
    assert delegator.calls[0]["task"] == "find it"  # an empty board adds nothing
    (ref,) = board.notes.refs()
    assert ref.handle in first.content and first.data["note"] == ref.handle
    call_tool(ctx, "delegate_chat", {"task": "explain it"}, agent="director")
    second_task = delegator.calls[1]["task"]
    assert second_task.startswith(INDEX_HEADER) and ref.handle in second_task
    assert second_task.endswith("Your task:\nexplain it")


def test_a_long_deliverable_reaches_the_parent_as_its_summary_and_artifact_id(tmp_path: Path) -> None:
    ctx, _board = _ctx(tmp_path, ScriptedDelegator(outcome=_child(_LONG)))
    result = call_tool(ctx, "delegate_repo", {"task": "list words"}, agent="director")
    artifact = result.data["artifact"]
    assert "repo concluded" in result.content and f"artifact:{artifact}" in result.content
    assert "word2999" not in result.content
    page = call_tool(ctx, "read_artifact", {"id": artifact, "offset": 0, "limit": 50}, agent="director")
    assert not page.is_error and "word0 word1" in page.content and "offset=50" in page.content


def test_context_refs_header_counts_what_did_not_resolve(tmp_path: Path) -> None:
    delegator = ScriptedDelegator(outcome=_child("first report"))
    ctx, _board = _ctx(tmp_path, delegator)
    call_tool(ctx, "delegate_repo", {"task": "a"}, agent="director")
    result = call_tool(ctx, "delegate_chat", {"task": "b", "context_refs": ["agent:repo_agent", "agent:devops"]},
                       agent="director")
    assert result.content.startswith("[context_refs: 1 inlined; 1 unresolved (agent:devops)]")
    assert "first report" in delegator.calls[1]["task"]


def test_read_note_and_list_notes_through_the_tools(tmp_path: Path) -> None:
    ctx, _board = _ctx(tmp_path, ScriptedDelegator(outcome=_child("body text here")))
    handle = call_tool(ctx, "delegate_repo", {"task": "a"}, agent="director").data["note"]
    note = call_tool(ctx, "read_note", {"ref": handle}, agent="repo")
    assert not note.is_error and "Conclusion: repo concluded" in note.content and "body text here" in note.content
    listing = call_tool(ctx, "list_notes", {}, agent="coding")
    assert handle in listing.content and "body text here" not in listing.content
    missing = call_tool(ctx, "read_note", {"ref": "note:repo/nothing"}, agent="director")
    assert missing.is_error and "list_notes" in missing.content


def test_the_tools_say_so_without_a_board_or_with_it_switched_off(tmp_path: Path) -> None:
    bare = make_ctx(tmp_path, tmp_path)
    assert "no hand-off board" in call_tool(bare, "list_notes", {}, agent="director").content
    ctx, _ = _ctx(tmp_path, ScriptedDelegator(outcome=_child("x")), environ={"YAGENT_BLACKBOARD": "0"})
    off = call_tool(ctx, "list_notes", {}, agent="director")
    assert off.is_error and "YAGENT_BLACKBOARD=0" in off.content


def test_chat_does_not_read_the_board_and_the_readers_do() -> None:
    assert "read_note" not in build_surface("chat").names()
    for agent in ("director", "coding", "repo", "devops"):
        assert {"read_note", "list_notes", "read_artifact"} <= set(build_surface(agent).names()), agent
