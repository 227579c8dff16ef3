"""`mcp_status`, `mcp_restart`, `mcp_approve`: the MCP servers the daemon owns, as `yagent mcp` shows and steers
them."""

from __future__ import annotations

import logging
from pathlib import Path

from yagent.ipc.messages import Ack, McpApprove, McpRestart, McpStatusReply, McpStatusRequest
from yagent.ipc.vocabulary import ErrorCode

from ..registry import project_id_for
from . import CommandError, DaemonView, command

log = logging.getLogger(__name__)


def _root(text: str) -> Path | None:
    if not text:
        return None
    path = Path(text)
    if not path.is_absolute():
        raise CommandError(ErrorCode.BAD_PROJECT, f"project path {text!r} must be absolute")
    return path.resolve()


@command(McpStatusRequest)
async def mcp_status(daemon: DaemonView, msg: McpStatusRequest) -> McpStatusReply:
    root = _root(msg.project)
    servers, problems = daemon.mcp.statuses(project_id_for(root) if root else "", str(root) if root else "")
    servers.sort(key=lambda s: (s.project, s.server))
    return McpStatusReply(id=msg.id, servers=servers, problems=problems)


@command(McpRestart)
async def mcp_restart(daemon: DaemonView, msg: McpRestart) -> Ack:
    root = _root(msg.project)
    project_id = daemon.registry.ensure_project(root).id if root else ""
    done = daemon.mcp.restart(msg.server, project_id, str(root) if root else "")
    if not done:
        where = f" for {root}" if root else ""
        raise CommandError(ErrorCode.BAD_REQUEST, f"no MCP server {msg.server!r} is configured{where} (or it is "
                                                  "disabled or not approved); `yagent mcp` lists them")
    log.info("MCP server %s restarted on request in %s", msg.server, ", ".join(done))
    return Ack(id=msg.id, detail=f"restarting {msg.server} in {', '.join(done)}")


@command(McpApprove)
async def mcp_approve(daemon: DaemonView, msg: McpApprove) -> Ack:
    root = _root(msg.project)
    if root is None or not root.is_dir():
        raise CommandError(ErrorCode.BAD_PROJECT, f"project directory {msg.project!r} does not exist")
    project = daemon.registry.ensure_project(root)
    try:
        changed = daemon.mcp.approve(project.id, str(root), list(msg.servers), msg.approve)
    except KeyError as exc:
        raise CommandError(ErrorCode.BAD_REQUEST, f"{root}/.mcp.json declares no server {exc.args[0]}; "
                                                  "`yagent mcp` lists what it declares") from None
    if not changed:
        raise CommandError(ErrorCode.BAD_REQUEST, f"{root}/.mcp.json declares no server yagent can start; "
                                                  "`yagent mcp` says why")
    verb = "approved" if msg.approve else "no longer approved"
    log.info("MCP servers %s of %s/.mcp.json %s", ", ".join(changed), root, verb)
    return Ack(id=msg.id, detail=f"{verb}: {', '.join(changed)}")
