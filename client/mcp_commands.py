"""`yagent mcp`, `yagent mcp restart NAME`, `yagent mcp approve|revoke [NAME…]`: the MCP servers yagentd owns.

The listing is every server of every project the daemon runs, plus what the current project would start
(configured, disabled, or declared in its .mcp.json and waiting for approval), each as the one status line the
daemon's log and the Director's prompt use (`ipc.mcp_status.render_status_lines`), with its last stderr lines.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from yagent.ipc import DaemonClient
from yagent.ipc.mcp_status import UNCONFINED_NOTE, render_status_lines
from yagent.ipc.messages import Ack, McpApprove, McpRestart, McpStatusReply, McpStatusRequest

from . import exit_codes
from .command_run import run_command as _call

__all__ = ["mcp_approve", "mcp_restart", "mcp_status"]


async def fetch_status(project: Path | None) -> McpStatusReply:
    async with DaemonClient() as client:
        reply = await client.request(McpStatusRequest(id=0, project=str(project) if project else ""),
                                     McpStatusReply)
    assert isinstance(reply, McpStatusReply)
    return reply


def status_text(reply: McpStatusReply) -> list[str]:
    """What `yagent mcp` (and `/mcp`) prints: the servers, their problems, and that they run unconfined."""
    lines = render_status_lines(reply.servers, verbose=True) if reply.servers else [
        "no MCP servers: declare them as [[mcp.servers]] in the config file, or in a project's .mcp.json"]
    lines += [f"problem: {p}" for p in reply.problems]
    lines.append(UNCONFINED_NOTE)
    return lines


def mcp_status(project: Path | None, as_json: bool) -> int:
    async def go() -> int:
        reply = await fetch_status(project)
        if as_json:
            print(json.dumps({"servers": [s.to_wire() for s in reply.servers], "problems": reply.problems,
                              "note": UNCONFINED_NOTE}, indent=2))
        else:
            print("\n".join(status_text(reply)))
        return exit_codes.OK

    return _call(go())


def _acked(request: Any, as_json: bool) -> int:
    async def go() -> int:
        async with DaemonClient() as client:
            ack = await client.request(request, Ack)
        assert isinstance(ack, Ack)
        print(json.dumps({"detail": ack.detail}) if as_json else ack.detail)
        return exit_codes.OK

    return _call(go())


def mcp_restart(name: str, project: Path | None, as_json: bool) -> int:
    return _acked(McpRestart(id=0, server=name, project=str(project) if project else ""), as_json)


def mcp_approve(names: list[str], project: Path, approve: bool, as_json: bool) -> int:
    return _acked(McpApprove(id=0, project=str(project), servers=names, approve=approve), as_json)
