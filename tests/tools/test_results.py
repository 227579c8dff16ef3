"""ToolResult helpers: truncation by declared priority, path extraction by declared format."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from yagent.workers.tools import (
    REGISTRY,
    AuthPolicy,
    Effect,
    Invocation,
    ResultPaths,
    ToolCall,
    ToolResult,
    ToolSpec,
    Truncation,
    build_surface,
    extract_result_paths,
    invoke_tool,
    truncate_for_model,
)

from .doubles import make_ctx


def _spec(truncation: Truncation) -> ToolSpec:
    async def big(_inv: Invocation) -> ToolResult:
        return ToolResult.ok("x" * 100_000)

    return ToolSpec(name=f"big_{truncation.value}", description="d", parameters={"type": "object"},
                    effects=Effect.FS_READ, executor=big, auth=AuthPolicy.NEVER, truncation=truncation,
                    page_hint="ask for less")


@pytest.mark.parametrize(("truncation", "cap"), [(Truncation.EARLY, 24_000), (Truncation.LATE, 64_000),
                                                  (Truncation.NEVER, None)])
def test_results_are_capped_by_declared_priority(
    project: Path, tmp_path: Path, truncation: Truncation, cap: int | None
) -> None:
    spec = _spec(truncation)
    surface = build_surface("repo", extra_specs=[spec])
    result = asyncio.run(invoke_tool(surface, ToolCall("c", spec.name), make_ctx(project, tmp_path)))
    if cap is None:
        assert len(result.content) == 100_000
    else:
        body, marker = result.content.split("\n[truncated: ")
        assert len(body) == cap
        assert marker == f"showing {cap} of 100000 characters; ask for less]"


def test_short_results_are_untouched() -> None:
    result = ToolResult.ok("short")
    assert truncate_for_model(result, REGISTRY.get("run_bash")) is result


@pytest.mark.parametrize(
    ("mode", "content", "paths"),
    [
        (ResultPaths.JSON, json.dumps({"path": "a.py", "created": True}), ["a.py"]),
        (ResultPaths.JSON, json.dumps({"source": "a", "destination": "b/c"}), ["a", "b/c"]),
        (ResultPaths.JSON, "not json", []),
        (ResultPaths.RG, "src/a.py:3:x = 1\nsrc/a.py:9:y\nb.txt:1:z\n[3 matches in 2 files]", ["src/a.py", "b.txt"]),
        (ResultPaths.BARE, "src/\nsrc/a.py\n[2 more entries not shown]", ["src", "src/a.py"]),
        (ResultPaths.HEADER, "File: docs/my file.md  (lines 1-3 of 3)\n     1\tx", ["docs/my file.md"]),
        (ResultPaths.HEADER, "no header", []),
        (ResultPaths.NONE, "File: a.py", []),
    ],
)
def test_extract_result_paths(mode: ResultPaths, content: str, paths: list[str]) -> None:
    assert extract_result_paths(mode, content) == paths


def test_every_declared_result_format_parses_a_real_result(project: Path, tmp_path: Path) -> None:
    (project / "a.py").write_text("hello = 1\n")
    ctx = make_ctx(project, tmp_path)
    surface = build_surface("coding")
    samples = {
        "read_file": {"path": "a.py"},
        "list_dir": {},
        "search_by_regex": {"pattern": "hello"},
        "search_replace_in_file": {"path": "a.py", "search": "hello", "replace": "hi"},
        "create_file": {"path": "b.py", "content": "x"},
    }
    for name, args in samples.items():
        spec = surface.resolve(name)
        assert spec is not None
        result = asyncio.run(invoke_tool(surface, ToolCall("c", name, args), ctx))
        assert not result.is_error, result.content
        assert extract_result_paths(spec.result_paths, result.content), f"{name}: no path recovered"
