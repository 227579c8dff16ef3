"""How an MCP server's state is said: one function for the daemon's log, `yagent mcp` and the Director's prompt.

A server is in one `McpState` (starting / ready / degraded / offline / disabled). The line names the server,
its project, the state, and what matters in that state: the tool count and uptime when ready, the last error
and what to do otherwise; `verbose` adds the last lines the server wrote to stderr and the tools withheld.
"""

from __future__ import annotations

from collections.abc import Iterable

from .messages import McpServerStatus
from .vocabulary import McpState

__all__ = ["UNCONFINED_NOTE", "render_status_lines"]

# What `yagent mcp` says about every server it lists: they are the user's programs, with the user's rights.
UNCONFINED_NOTE = ("MCP servers are your own programs: yagentd runs them unconfined, with your rights and no "
                   "sandbox (agents' calls to them are checked; the servers themselves are not).")


def _duration(seconds: float) -> str:
    whole = max(0, int(seconds))
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m"
    if whole < 86400:
        return f"{whole // 3600}h{(whole % 3600) // 60:02d}m"
    return f"{whole // 86400}d{(whole % 86400) // 3600:02d}h"


def render_status_lines(servers: Iterable[McpServerStatus], *, verbose: bool = False,
                        project_names: bool = True) -> list[str]:
    """One line per server (more with `verbose`), in the order given; `project_names` False leaves the
    project out (the Director's prompt: its own project's servers only)."""
    lines: list[str] = []
    for s in servers:
        where = f" [{s.project}]" if project_names and s.project else ""
        state = McpState(s.state)
        head = f"{s.server}{where}: {state.value}"
        facts: list[str] = []
        if state is McpState.READY:
            facts.append(f"{s.tools} tool{'s' if s.tools != 1 else ''}")
            if s.uptime:
                facts.append(f"up {_duration(s.uptime)}")
        if s.pid:
            facts.append(f"pid {s.pid}")
        if s.restarts:
            facts.append(f"{s.restarts} restart{'s' if s.restarts != 1 else ''}")
        if s.required:
            facts.append("required")
        if facts:
            head += f" ({', '.join(facts)})"
        if s.last_error and state is not McpState.READY:
            head += f" — {s.last_error}"
        if s.fix and state is not McpState.READY:
            head += f"; {s.fix}"
        lines.append(head)
        if verbose:
            if s.target:
                lines.append(f"  {s.transport or 'stdio'}: {s.target} (from {s.source or 'config.toml'})")
            lines.extend(f"  withheld: {w}" for w in s.withheld)
            if s.stderr_tail:
                lines.append("  last stderr lines:")
                lines.extend(f"    {line}" for line in s.stderr_tail)
    return lines
