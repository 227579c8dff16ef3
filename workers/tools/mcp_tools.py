"""External tools: an MCP server's tools as dynamic specs `mcp__<server>__<tool>`, called through the daemon.

They never enter the static registry (nor the golden surfaces, nor the custom agents' palette): a run joins them
to its surface (`Surface.join` / `Surface.rejoin`), where the profile filter decides who holds them. Every one is
cold (in the deferred catalogue until `load_tool`). Read-only only when the server annotates it `readOnlyHint`
or the configuration lists it in `read_only` (the daemon says which: `McpTool.write`); anything else is a write —
FS_WRITE (so `deny` keeps it off the Director, Repo and DevOps), serial, and authorised like any write. The
daemon offers writes at all only for a server with `allow_write = true`.

A call goes to the daemon (`McpPort.call_mcp`), which calls the server: the project's one instance, shared by
every run of the project. Cancelling the tool call cancels it at the server.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import Any, Protocol, runtime_checkable

from yagent.ipc.messages import McpTool, McpToolsReply

from .result import ToolResult
from .spec import AuthPolicy, Effect, Frequency, Invocation, ToolSpec, Truncation

__all__ = ["MCP_PREFIX", "McpPort", "mcp_servers_of", "mcp_specs", "tool_name"]

MCP_PREFIX = "mcp__"
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_MAX_NAME = 64


@runtime_checkable
class McpPort(Protocol):
    """The run's way to its project's MCP servers (the worker's daemon channel implements it)."""

    async def list_mcp_tools(self, wait_for: list[str]) -> McpToolsReply: ...

    async def call_mcp(self, server: str, tool: str, arguments: dict[str, Any], *, call_id: str
                       ) -> tuple[str, bool]: ...


def tool_name(server: str, tool: str) -> str:
    """`mcp__<server>__<tool>`, made of what every provider takes and at most 64 characters; a tool name that
    had to be changed keeps a short digest of the original, so two such tools never share a name."""
    safe = _UNSAFE.sub("_", tool)
    name = f"{MCP_PREFIX}{server}__{safe}"
    if safe != tool or len(name) > _MAX_NAME:
        digest = hashlib.sha256(tool.encode()).hexdigest()[:6]
        name = f"{name[:_MAX_NAME - 7]}_{digest}"
    return name


def mcp_servers_of(names: Iterable[str]) -> list[str]:
    """The servers whose tools are among `names` (a run's surface), sorted."""
    return sorted({n[len(MCP_PREFIX):].split("__", 1)[0] for n in names if n.startswith(MCP_PREFIX) and "__" in
                   n[len(MCP_PREFIX):]})


def mcp_specs(tools: Iterable[McpTool]) -> list[ToolSpec]:
    """The specs of a listing (the daemon has already shaped the schemas and withheld what cannot be offered)."""
    specs: dict[str, ToolSpec] = {}
    for tool in tools:
        name = tool_name(tool.server, tool.name)
        if name in specs:
            continue
        specs[name] = _spec(name, tool)
    return list(specs.values())


def _spec(name: str, tool: McpTool) -> ToolSpec:
    server, original = tool.server, tool.name
    what = (tool.description or "").strip() or f"The {original} tool."
    kind = "may change things (not known to be read-only)" if tool.write else "read-only"
    description = f"{what}\n\n(External tool {original!r} of the MCP server {server!r}; {kind}.)"

    async def execute(inv: Invocation) -> ToolResult:
        port = inv.ctx.mcp
        if port is None:
            return ToolResult.error(f"{name}: this run has no connection to its MCP servers; nothing was called")
        text, is_error = await port.call_mcp(server, original, dict(inv.args), call_id=inv.call_id)
        return ToolResult.error(text) if is_error else ToolResult.ok(text)

    execute.__name__ = f"execute_{name}"
    common: dict[str, Any] = {"name": name, "description": description, "parameters": tool.input_schema,
                              "executor": execute, "frequency": Frequency.COLD, "truncation": Truncation.LATE,
                              "brief": f"{what.splitlines()[0][:160]} (MCP server {server})"}
    if tool.write:
        return ToolSpec(effects=Effect.EXTERNAL | Effect.FS_WRITE, mutates=True, serial=True,
                        auth=AuthPolicy.DANGEROUS, **common)
    return ToolSpec(effects=Effect.EXTERNAL, **common)
