"""Code intelligence end to end: a real daemon starts the built-in code server for the project, and the Repo agent's
static code tools reach it through the daemon; only the model is scripted."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import stat
from pathlib import Path

import pytest

from tests.agent_harness import MARKERS, run_turn, tool_messages
from tests.daemon_harness import of_type, wait_until
from tests.fake_provider import Step, ToolCallSpec
from yagent.daemon.registry import project_id_for
from yagent.ipc.vocabulary import EventType, McpState

pytestmark = pytest.mark.e2e


def _exit(summary: str) -> ToolCallSpec:
    return ToolCallSpec("agent_exit", {"summary": summary, "handoff": {"conclusion": summary, "status": "ok"}})


def _code_server(daemon, project: Path) -> dict | None:
    shown = json.loads(daemon.cli("mcp", "--json", cwd=project).stdout)
    return next((s for s in shown["servers"] if s["server"] == "codeintel" and s["project"] == str(project)), None)


def _indexed_files(index: Path) -> int:
    if not index.exists():
        return 0
    db = sqlite3.connect(f"file:{index}?mode=ro", uri=True)
    try:
        return db.execute("SELECT count(*) FROM files").fetchone()[0]
    except sqlite3.Error:
        return 0
    finally:
        db.close()


def test_the_repo_agent_asks_the_code_server_through_the_daemon(fake, make_agent_daemon, project: Path) -> None:
    (project / "pkg").mkdir()
    (project / "pkg" / "__init__.py").write_text("")
    (project / "pkg" / "util.py").write_text('def helper(x):\n    """Help."""\n    return x\n')
    (project / "app.py").write_text("from pkg.util import helper\n\n\ndef go():\n    return helper(2)\n")
    daemon = make_agent_daemon("[codeseek]\nenabled = true\n")
    fake.script("director", MARKERS["director"], [
        Step(text="ok", tool_calls=[ToolCallSpec("agent_exit", {"summary": "ok"})]),
        Step(tool_calls=[ToolCallSpec("delegate_repo", {"task": "Who calls helper?"})]),
        Step(text="go calls it", tool_calls=[ToolCallSpec("agent_exit", {"summary": "go calls helper"})]),
    ])
    fake.script("repo", MARKERS["repo"], [
        Step(tool_calls=[ToolCallSpec("find_function_caller", {"name": "helper"}),
                         ToolCallSpec("query_code_skeleton", {"paths": ["pkg/util.py"]})]),
        Step(text="go in app.py calls helper.", tool_calls=[_exit("app.py:5 calls helper")]),
    ])
    run_turn(daemon, project, "Hi.")  # the project's first turn starts its code server
    wait_until(lambda: (s := _code_server(daemon, project)) and s["state"] == McpState.READY, 60, "the code server")
    index = daemon.home / "data" / "codeintel" / project_id_for(project) / "index.db"
    wait_until(lambda: _indexed_files(index) == 4, 60, "the project's four files (README.md too) in the index")

    _, events = run_turn(daemon, project, "Who calls helper?")
    assert of_type(events, EventType.TURN_FINISHED)[-1].data["status"] == "done"
    first, second = fake.requests_for("repo")[:2]
    offered = {t["function"]["name"] for t in first.body["tools"]}
    assert {"semantic_search", "query_code_skeleton", "find_function_caller"} <= offered
    assert not any(name.startswith("mcp__codeintel") for name in offered)  # static tools, not MCP duplicates
    assert "# Code intelligence" in first.body["messages"][0]["content"]
    answers = [m["content"] for m in tool_messages(second)]
    assert any("app.py:5: in go: return helper(2)  [by import]" in a for a in answers), answers
    assert any(a.startswith("File: pkg/util.py  (python, 3 lines, 1 definitions)") and "Help." in a for a in answers)

    server = _code_server(daemon, project)
    assert server is not None and server["source"] == "built-in" and server["tools"] == 6
    text = daemon.cli("mcp", cwd=project).stdout
    assert "codeintel" in text and "confined: reads the project, writes only its index" in text
    assert stat.S_IMODE(os.stat(index).st_mode) == 0o600 and stat.S_IMODE(os.stat(index.parent).st_mode) == 0o700

    os.kill(server["pid"], signal.SIGKILL)  # the daemon restarts it like any server; its index stays sound
    wait_until(lambda: (s := _code_server(daemon, project)) and s["restarts"] == 1 and s["state"] == McpState.READY,
               60, "the code server restarted")
    db = sqlite3.connect(f"file:{index}?mode=ro", uri=True)
    assert db.execute("PRAGMA quick_check").fetchall() == [("ok",)]
    db.close()
