"""External tools end to end: a real daemon owns a real MCP server, a real Director worker calls its tool through
the daemon, only the model is scripted."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.agent_harness import MARKERS, run_turn, tool_messages
from tests.daemon_harness import of_type
from tests.fake_provider import Step, ToolCallSpec
from tests.mcp.servers import toolbox_table
from yagent.ipc.vocabulary import EventType

pytestmark = pytest.mark.e2e


def test_the_director_loads_and_calls_an_mcp_tool_through_the_daemon(fake, make_agent_daemon, project: Path,
                                                                      tmp_path: Path) -> None:
    daemon = make_agent_daemon(toolbox_table("tb", tmp_path / "tb", extra="required = true"))
    fake.script("director", MARKERS["director"], [
        Step(tool_calls=[ToolCallSpec("load_tool", {"names": ["mcp__tb__echo"]})]),
        Step(tool_calls=[ToolCallSpec("mcp__tb__echo", {"text": "hello from the model"})]),
        Step(text="done", tool_calls=[ToolCallSpec("agent_exit", {"summary": "done"})]),
    ])
    _, events = run_turn(daemon, project, "Echo something.")
    assert of_type(events, EventType.TURN_FINISHED)[-1].data["status"] == "done"
    requests = fake.requests_for("director")
    system = requests[0].body["messages"][0]["content"]
    assert "mcp__tb__echo" in system and "tb: ready" in system
    tools = {t["function"]["name"] for t in requests[2].body["tools"]}
    assert "mcp__tb__echo" in tools
    assert tool_messages(requests[2])[-1]["content"] == "hello from the model"
