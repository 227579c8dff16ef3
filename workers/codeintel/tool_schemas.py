"""The code server's six tools as both sides declare them: the server lists them over MCP, and the worker registers
static tools of the same names and parameters (`workers/tools/code_intel.py`) whose calls reach the server through
the daemon. One table, so the two can never disagree. Plain data: importing it loads nothing else.
"""

from __future__ import annotations

from typing import Any

__all__ = ["TOOLS", "ToolDeclaration"]


class ToolDeclaration:
    __slots__ = ("brief", "description", "name", "parameters")

    def __init__(self, name: str, description: str, parameters: dict[str, Any], brief: str) -> None:
        self.name = name
        self.description = description
        self.parameters = parameters
        self.brief = brief


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required}


_NAME = {"type": "string", "description": "The function, method or class: `parse_config`, `Server.start` (class and "
                                          "method) or `pkg.mod.func` (module and function)."}
_PATH = {"type": "string", "description": "Optional: the file (or directory) of the definition you mean, relative to "
                                          "the project root, when several share the name."}
_OFFSET = {"type": "integer", "description": "Where the page starts (the previous answer says it). Default 0."}
_RESOLUTION = ("Each result says how its call was tied to the definition: `exact` (same file, same class, same "
               "package), `by import` (the caller imports it), `by name only` (only the name matches: check it).")

TOOLS: tuple[ToolDeclaration, ...] = (
    ToolDeclaration(
        "semantic_search",
        "Find code by what it does or what it is called: ranked search over the project's functions, classes and "
        "text (BM25 keyword relevance; hybrid with embeddings when [codeseek] embeddings_url is configured). Use it "
        "when you do not know where something lives; use search_by_regex for exact text.",
        _schema({"query": {"type": "string", "description": "Words for what you look for, e.g. \"retry with "
                                                             "backoff\" or \"parse duration\"."},
                 "path": {"type": "string", "description": "Optional: search only under this directory or file."},
                 "limit": {"type": "integer", "description": "How many results (1-50). Default 10."}},
                ["query"]),
        "Ranked search (BM25) over the project's functions, classes and text"),
    ToolDeclaration(
        "query_code_skeleton",
        "The outline of files or directories: every definition with its line, signature and first doc line, no "
        "bodies. Read it before reading a whole file, then read only the part you need (query_code_snippet or "
        "read_file with a line range).",
        _schema({"paths": {"type": "array", "items": {"type": "string"},
                           "description": "Files or directories, relative to the project root (\".\" for all)."},
                 "offset": _OFFSET},
                ["paths"]),
        "Definitions of files or directories with signatures, no bodies"),
    ToolDeclaration(
        "query_code_snippet",
        "The source of one definition (function, method, class) by name, with line numbers; says where else the "
        "name is defined.",
        _schema({"name": _NAME, "path": _PATH, "offset": _OFFSET}, ["name"]),
        "The source of one definition by name"),
    ToolDeclaration(
        "find_function_caller",
        "Every call site of a function or method across the project, with the calling function. Look this up "
        "before changing a function's signature or behaviour. " + _RESOLUTION,
        _schema({"name": _NAME, "path": _PATH, "offset": _OFFSET,
                 "limit": {"type": "integer", "description": "Call sites per page (1-200). Default 40."}},
                ["name"]),
        "Who calls a function, across files and modules"),
    ToolDeclaration(
        "find_function_callee",
        "What a function or method calls, each call tied to the definition it reaches in the project (or said to "
        "be a library's). " + _RESOLUTION,
        _schema({"name": _NAME, "path": _PATH}, ["name"]),
        "What a function calls, tied to definitions"),
    ToolDeclaration(
        "query_call_graph",
        "The call graph around a function: what it calls (or what calls it), transitively, to a depth of 1-4. "
        + _RESOLUTION,
        _schema({"name": _NAME, "path": _PATH,
                 "depth": {"type": "integer", "description": "Levels to follow (1-4). Default 2."},
                 "direction": {"type": "string", "enum": ["callees", "callers"],
                               "description": "`callees` (what it calls, the default) or `callers`."}},
                ["name"]),
        "Callers or callees of a function, several levels deep"),
)
