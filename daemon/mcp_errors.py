"""What the MCP manager's callers catch, in a module that imports nothing heavy: the MCP SDK (pydantic, httpx2)
is loaded only when a first server starts, so a daemon without MCP servers never pays for it."""

from __future__ import annotations

__all__ = ["McpUnavailable"]


class McpUnavailable(Exception):
    """A call or listing a server cannot take now (not ready, gone, a required one that did not come up); the
    message says why and what to do."""
