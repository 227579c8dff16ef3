"""How tests configure real MCP servers: the toolbox written with the SDK (`toolbox_server.py`) and the
third-party `mcp-server-git` (installed from PyPI by the `test` extra)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

TOOLBOX = Path(__file__).resolve().parent / "toolbox_server.py"


def toolbox_table(name: str, state: Path, *, mode: str = "normal", extra: str = "", page_size: int = 3) -> str:
    """A `[[mcp.servers]]` block running the toolbox with its state directory `state`."""
    args = [str(TOOLBOX), "--state", str(state), "--mode", mode, "--page-size", str(page_size)]
    return (f"\n[[mcp.servers]]\nname = {json.dumps(name)}\ncommand = {json.dumps(sys.executable)}\n"
            f"args = {json.dumps(args)}\n{extra}\n")


def git_server_table(name: str, repo: Path, extra: str = "") -> str:
    """A `[[mcp.servers]]` block running mcp-server-git on `repo`."""
    args = ["-m", "mcp_server_git", "--repository", str(repo)]
    return (f"\n[[mcp.servers]]\nname = {json.dumps(name)}\ncommand = {json.dumps(sys.executable)}\n"
            f"args = {json.dumps(args)}\n{extra}\n")
