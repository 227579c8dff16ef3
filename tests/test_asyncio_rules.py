"""Rules for asyncio code that no linter checks, on the source of every package."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("ipc", "daemon", "workers", "client")


def _wait_for_calls(path: Path) -> list[int]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute) and node.func.attr == "wait_for"
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "asyncio"]


def test_no_asyncio_wait_for_that_can_swallow_a_cancellation() -> None:
    # On Python 3.11, `asyncio.wait_for` returns the result instead of raising when the task is cancelled in
    # the same loop pass as its future completes: a Ctrl+C during a busy event stream was lost that way (the
    # client went on streaming). `async with asyncio.timeout(...)` always delivers the cancellation.
    found = [f"{path.relative_to(REPO)}:{line}" for package in PACKAGES
             for path in sorted((REPO / package).rglob("*.py")) for line in _wait_for_calls(path)]
    assert not found, "use `async with asyncio.timeout(...)` instead of asyncio.wait_for at: " + ", ".join(found)


def test_the_rule_sees_a_wait_for(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import asyncio\nasync def f(x):\n    return await asyncio.wait_for(x, 1)\n")
    assert _wait_for_calls(bad) == [3]
