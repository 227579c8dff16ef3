"""The code server over MCP (stdio), written with the SDK's low-level server API: it lists the six tools (all
annotated read-only) and answers each call in a thread, after bringing the index up to date.

An answer the server gives is a normal result — including "index building: N of M files" and "no definition named
X" — so the model reads it as it is. A call the server cannot take (an argument out of range, a path outside the
project) is an error result that starts with the tool's name and says what to send instead; a failure inside an
answer is logged and answered the same way, never the end of the server.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from .answers import CodeQueries, Refused
from .embeddings import EmbeddingsClient
from .index_store import IndexStore
from .indexer import IndexSettings, ProjectIndexer
from .tool_schemas import TOOLS

__all__ = ["ServerOptions", "build_queries", "serve"]

log = logging.getLogger("yagent.codeintel")

READ_ONLY = types.ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                                  open_world_hint=False)
INSTRUCTIONS = ("yagent's code intelligence for one project: outlines, definitions, callers and callees (tree-sitter) "
                "and ranked search (BM25, hybrid with embeddings when configured).")


@dataclass(frozen=True, slots=True)
class ServerOptions:
    root: str
    index: str
    max_file_bytes: int
    max_files: int
    exclude: tuple[str, ...] = ()
    embeddings_url: str = ""
    embeddings_model: str = ""
    embeddings_key: str = ""
    confined: bool = False


def build_queries(options: ServerOptions) -> tuple[ProjectIndexer, CodeQueries]:
    """The indexer (started) and the answers over it: what the server serves, and what tests drive directly."""
    store = IndexStore(Path(options.index), options.root)
    if store.problem:
        log.warning("%s", store.problem)
    client = None
    if options.embeddings_url:
        client = EmbeddingsClient(options.embeddings_url, options.embeddings_model, options.embeddings_key)
    indexer = ProjectIndexer(Path(options.root), store, IndexSettings(options.max_file_bytes, options.max_files,
                                                                       options.exclude), embeddings=client)
    indexer.start()
    embed = None
    name = ""
    if client is not None:
        def embed(text: str) -> bytes:
            return client.embed([text])[0]

        name = f"embeddings from {options.embeddings_model} (cosine similarity)"
    return indexer, CodeQueries(indexer, embed_query=embed, ranking_name=name)


def answer(queries: CodeQueries, tool: str, args: dict[str, Any]) -> tuple[str, bool]:
    """(text, is_error) for one call; runs in a thread."""
    try:
        queries.indexer.ensure_fresh()
        if tool == "semantic_search":
            return queries.semantic_search(_text(args, "query"), _text(args, "path", ""), _whole(args, "limit", 10)), \
                False
        if tool == "query_code_skeleton":
            paths = args.get("paths")
            if isinstance(paths, str):
                paths = [paths]
            if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
                raise Refused("`paths` is a list of files or directories, e.g. [\"src/app.py\"]")
            return queries.skeleton(paths, _whole(args, "offset", 0)), False
        if tool == "query_code_snippet":
            return queries.snippet(_text(args, "name"), _text(args, "path", ""), _whole(args, "offset", 0)), False
        if tool == "find_function_caller":
            return queries.callers(_text(args, "name"), _text(args, "path", ""), _whole(args, "offset", 0),
                                   _whole(args, "limit", 40)), False
        if tool == "find_function_callee":
            return queries.callees(_text(args, "name"), _text(args, "path", "")), False
        if tool == "query_call_graph":
            return queries.call_graph(_text(args, "name"), _text(args, "path", ""), _whole(args, "depth", 2),
                                      _text(args, "direction", "callees")), False
    except Refused as exc:
        return f"{tool}: {exc}", True
    except Exception as exc:  # a defect answering one call must cost that call, never the server
        log.exception("answering %s failed", tool)
        return f"{tool}: the code server failed to answer ({type(exc).__name__}: {exc}); try another tool", True
    return f"{tool}: the code server has no such tool", True


def _text(args: dict[str, Any], key: str, default: str | None = None) -> str:
    value = args.get(key, default)
    if value is None:
        raise Refused(f"`{key}` is required")
    if not isinstance(value, str) or len(value) > 4096:
        raise Refused(f"`{key}` must be text of at most 4096 characters")
    return value


def _whole(args: dict[str, Any], key: str, default: int) -> int:
    value = args.get(key, default)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or abs(value) > 10**9:
        raise Refused(f"`{key}` must be a whole number")
    return value


def serve(options: ServerOptions) -> None:
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="codeintel: %(message)s")
    log.info("serving %s (index in %s; %s)", options.root, options.index,
             "confined: reads the project, writes only its index" if options.confined else "unconfined")
    anyio.run(_serve, options)


async def _serve(options: ServerOptions) -> None:
    indexer, queries = build_queries(options)
    tools = [types.Tool(name=t.name, description=t.description, input_schema=t.parameters, annotations=READ_ONLY)
             for t in TOOLS]

    async def list_tools(_ctx: Any, _params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(_ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        text, is_error = await anyio.to_thread.run_sync(answer, queries, params.name, dict(params.arguments or {}))
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=is_error)

    server = Server("yagent-codeintel", instructions=INSTRUCTIONS, on_list_tools=list_tools,
                    on_call_tool=call_tool)
    try:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
    finally:
        indexer.stop()
        indexer.store.close()
