"""Code intelligence: `semantic_search`, `query_code_skeleton`, `query_code_snippet`, `find_function_caller`,
`find_function_callee`, `query_call_graph` — static read-only tools whose calls the built-in code server answers.

They are declared here like any tool (so surfaces, prompts and the golden file name them, and profiles decide who
holds them through `Effect.CODE_INDEX`: Repo and Coding), never as `mcp__codeintel__…` duplicates. A call goes to
the daemon as an MCP call for the server `codeintel` of the run's project (`ToolContext.code_index`, the worker's
channel); the server shapes the answer. When the server cannot be reached (starting, restarting, turned off) the
model is told so and what to use meanwhile.
"""

from __future__ import annotations

from yagent.ipc.codeintel_settings import CODE_SERVER_NAME
from yagent.workers.codeintel.tool_schemas import TOOLS

from .registry import register
from .result import ToolResult
from .spec import AuthPolicy, Effect, Executor, Frequency, Invocation, ResultPaths, ToolSpec, Truncation

__all__ = ["CODE_TOOL_NAMES"]

CODE_TOOL_NAMES = tuple(t.name for t in TOOLS)
# Deferred until loaded: the call graph and callees are asked for less often than search, outlines and callers.
_COLD = frozenset({"find_function_callee", "query_call_graph"})
_RESULT_PATHS = {"query_code_snippet": ResultPaths.HEADER, "query_code_skeleton": ResultPaths.HEADER}
_LATE = frozenset({"query_code_snippet", "query_code_skeleton"})  # source text: cut last


def _executor(tool: str) -> Executor:
    async def execute(inv: Invocation) -> ToolResult:
        port = inv.ctx.code_index
        if port is None:
            return ToolResult.error(f"{tool}: this run has no connection to the code server; use search_by_regex "
                                    "and read_file instead")
        text, is_error = await port.call_mcp(CODE_SERVER_NAME, tool, dict(inv.args), call_id=inv.call_id)
        if is_error and not text.startswith(f"{tool}:"):  # the server did not answer: the daemon said why
            return ToolResult.error(f"{tool}: the code server could not answer ({text}). Use search_by_regex and "
                                    "read_file meanwhile, or try again in a moment; `yagent mcp` shows its state.")
        return ToolResult.error(text) if is_error else ToolResult.ok(text)

    execute.__name__ = f"execute_{tool}"
    return execute


for _tool in TOOLS:
    register(ToolSpec(
        name=_tool.name,
        description=_tool.description,
        parameters=_tool.parameters,
        effects=Effect.FS_READ | Effect.CODE_INDEX,
        executor=_executor(_tool.name),
        frequency=Frequency.COLD if _tool.name in _COLD else Frequency.HOT,
        auth=AuthPolicy.NEVER,
        truncation=Truncation.LATE if _tool.name in _LATE else Truncation.EARLY,
        result_paths=_RESULT_PATHS.get(_tool.name, ResultPaths.RG),
        brief=_tool.brief,
        page_hint="page with `offset`, or narrow with `path`",
    ))
