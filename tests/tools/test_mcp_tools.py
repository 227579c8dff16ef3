"""External tools as dynamic specs: names, who holds them, what needs authorisation, what a listing replaces."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from yagent.ipc.messages import McpTool, McpToolsReply
from yagent.workers.tools import REGISTRY, AuthDecision, Effect, ToolCall, build_surface, invoke_tool
from yagent.workers.tools.errors import ToolDeclarationError
from yagent.workers.tools.mcp_tools import MCP_PREFIX, mcp_servers_of, mcp_specs, tool_name
from yagent.workers.tools.validation import check_spec

from .doubles import ScriptedAuthorizer, make_ctx

SCHEMA = {"type": "object", "properties": {"text": {"type": "string", "description": "t"}}, "required": ["text"]}


def _tools() -> list[McpTool]:
    return [McpTool(server="docs", name="search", description="Search the docs.", input_schema=SCHEMA, write=False),
            McpTool(server="docs", name="publish", description="Publish a page.", input_schema=SCHEMA, write=True)]


class Port:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []

    async def list_mcp_tools(self, wait_for: list[str]) -> McpToolsReply:
        return McpToolsReply(id=0, generation=1, tools=_tools())

    async def call_mcp(self, server: str, tool: str, arguments: dict[str, Any], *, call_id: str) -> tuple[str, bool]:
        self.calls.append((server, tool, arguments))
        return f"{tool} ran", False


def test_names_are_ones_every_provider_takes_and_two_tools_never_share_one() -> None:
    assert tool_name("docs", "search") == "mcp__docs__search"
    odd = [tool_name("docs", n) for n in ("get.page", "get/page", "x" * 80, "y" * 80)]
    assert all(len(n) <= 64 and n.startswith("mcp__docs__") for n in odd)
    assert len(set(odd)) == 4
    assert mcp_servers_of(["mcp__docs__search", "mcp__git__log", "read_file", "mcp__broken"]) == ["docs", "git"]


def test_reads_reach_every_agent_that_holds_external_tools_and_writes_only_coding() -> None:
    specs = mcp_specs(_tools())
    assert all(not check_spec(s) for s in specs)  # the rules every declaration passes
    assert all(s.is_cold for s in specs)
    write = next(s for s in specs if s.name == "mcp__docs__publish")
    assert Effect.FS_WRITE in write.effects and write.is_serial and write.needs_auth
    held = {agent: set(build_surface(agent, extra_specs=specs).names()) & {s.name for s in specs}
            for agent in ("director", "repo", "devops", "coding", "chat")}
    assert held == {"director": {"mcp__docs__search"}, "repo": {"mcp__docs__search"},
                    "devops": {"mcp__docs__search"}, "coding": {"mcp__docs__search", "mcp__docs__publish"},
                    "chat": set()}
    assert not [n for n in REGISTRY.names() if n.startswith(MCP_PREFIX)]  # the static registry never holds them


def test_a_new_listing_replaces_the_old_one_and_unloads_what_left() -> None:
    surface = build_surface("coding", extra_specs=mcp_specs(_tools()))
    surface.materialize(["mcp__docs__search", "mcp__docs__publish"])
    kept = [t for t in _tools() if t.name == "search"]
    surface.rejoin(MCP_PREFIX, mcp_specs([*kept, McpTool(server="docs", name="new", input_schema=SCHEMA,
                                                            write=False)]))
    assert {n for n in surface.names() if n.startswith(MCP_PREFIX)} == {"mcp__docs__search", "mcp__docs__new"}
    assert surface.is_loaded("mcp__docs__search") and not surface.is_loaded("mcp__docs__new")
    assert "mcp__docs__publish" not in surface.materialized()


def test_a_listing_the_surface_refuses_still_takes_away_the_tools_that_left() -> None:
    surface = build_surface("coding", extra_specs=mcp_specs(_tools()))
    assert surface.resolve("mcp__docs__publish") is not None and "load_tool" in surface.names()
    shadowing = dataclasses.replace(mcp_specs(_tools())[0], name="read_file")  # a static tool's name: refused
    with pytest.raises(ToolDeclarationError):
        surface.rejoin(MCP_PREFIX, [shadowing])
    assert surface.resolve("mcp__docs__publish") is None and surface.resolve("mcp__docs__search") is None
    assert not [n for n in surface.names() if n.startswith(MCP_PREFIX)]


def test_a_write_asks_authorisation_naming_the_call_and_a_denial_calls_nothing(tmp_path: Path) -> None:
    port = Port()
    surface = build_surface("coding", extra_specs=mcp_specs(_tools()))
    surface.materialize(["mcp__docs__search", "mcp__docs__publish"])
    denier = ScriptedAuthorizer(AuthDecision.DENY)
    ctx = make_ctx(tmp_path, tmp_path, authorizer=denier, mcp=port)
    refused = asyncio.run(invoke_tool(surface, ToolCall("c1", "mcp__docs__publish", {"text": "hi"}), ctx))
    assert refused.is_error and port.calls == []
    asked = denier.requests[0]
    assert "third-party MCP tool" in asked.dangerous_reason and '{"text": "hi"}' in asked.summary
    read = asyncio.run(invoke_tool(surface, ToolCall("c2", "mcp__docs__search", {"text": "q"}), ctx))
    assert read.content == "search ran" and port.calls == [("docs", "search", {"text": "q"})]
    allower = ScriptedAuthorizer(AuthDecision.ALLOW_ONCE)
    ctx = make_ctx(tmp_path, tmp_path, authorizer=allower, mcp=port)
    done = asyncio.run(invoke_tool(surface, ToolCall("c3", "mcp__docs__publish", {"text": "hi"}), ctx))
    assert done.content == "publish ran" and port.calls[-1] == ("docs", "publish", {"text": "hi"})
    bad = asyncio.run(invoke_tool(surface, ToolCall("c4", "mcp__docs__search", {"text": 5}), ctx))
    assert bad.is_error and len(port.calls) == 2  # arguments are checked against the schema before any call


def test_without_a_port_a_call_is_an_error_result(tmp_path: Path) -> None:
    surface = build_surface("director", extra_specs=mcp_specs(_tools()))
    surface.materialize(["mcp__docs__search"])
    result = asyncio.run(invoke_tool(surface, ToolCall("c1", "mcp__docs__search", {"text": "q"}),
                                     make_ctx(tmp_path, tmp_path)))
    assert result.is_error and "no connection to its MCP servers" in result.content
