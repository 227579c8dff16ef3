"""A real MCP server for the tests, written with the SDK's low-level server API, run as its own process:

    python -m tests.mcp.toolbox_server [--mode MODE] [--state DIR] [--page-size N]

Tools: `echo` and `add` (annotated readOnlyHint), `write_note` (no annotations: a write), `slow` (read-only,
sends progress every 0.1 s for `seconds`, writes `cancelled` into the state dir when the client cancels it),
`crash` (exits the process mid-call), `big` (a result of `size` characters), `grow` (read-only; adds a tool
and sends tools/list_changed). The list is served in pages of `--page-size` tools.

Modes: `normal`; `never-init` (reads stdin, answers nothing); `changes-while-listed` (its first tools/list
switches to a second tool set and sends list_changed before it answers with the first set's page);
`junk-stdout` (prints a non-JSON line on stdout first); `exit-at-start` (exits 3 after a line on stderr);
`linger` (a child process `sleep` in its group, and it keeps running when its stdin closes, like a server that
ignores the end of its client — only a kill of its group ends it; the child's pid goes to `child`).
At start it writes `env.json` (its environment) and `pid` into the state dir, when one is given.
`--http TOKEN` serves streamable HTTP on 127.0.0.1 instead (its port goes to `port`), answering only requests
that carry `Authorization: Bearer TOKEN` (the headers it saw go to `headers`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import anyio
import mcp_types as types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.stdio import stdio_server

READ_ONLY = types.ToolAnnotations(read_only_hint=True)


def _tool(name: str, description: str, properties: dict, annotations: types.ToolAnnotations | None = READ_ONLY,
          required: list[str] | None = None) -> types.Tool:
    return types.Tool(name=name, description=description, annotations=annotations,
                      input_schema={"type": "object", "properties": properties, "required": required or []})


BASE_TOOLS = [
    _tool("echo", "Echo the text back.", {"text": {"type": "string", "description": "what to echo"}},
          required=["text"]),
    _tool("add", "Add two integers.", {"a": {"type": "integer", "description": "first"},
                                       "b": {"type": "integer", "description": "second"}}, required=["a", "b"]),
    _tool("write_note", "Write a note file in the server's working directory.",
          {"text": {"type": "string", "description": "the note"}}, annotations=None, required=["text"]),
    _tool("slow", "Wait, reporting progress.", {"seconds": {"type": "number", "description": "how long"}}),
    _tool("crash", "Exit the server process in the middle of the call.", {}),
    _tool("big", "Return a long text.", {"size": {"type": "integer", "description": "characters"}}),
    _tool("grow", "Add a tool named `extra` and announce it.", {}),
]
SECOND_SET = [_tool("second_echo", "Echo from the second tool set.",
                    {"text": {"type": "string", "description": "what to echo"}})]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", default="normal")
    parser.add_argument("--state", default="")
    parser.add_argument("--page-size", type=int, default=3)
    parser.add_argument("--http", default="", metavar="TOKEN")
    args = parser.parse_args()
    state = Path(args.state) if args.state else None
    if state is not None:
        state.mkdir(parents=True, exist_ok=True)
        (state / "env.json").write_text(json.dumps(dict(os.environ)))
        (state / "pid").write_text(str(os.getpid()))
    if args.mode == "never-init":
        for _line in sys.stdin:  # reads everything, answers nothing
            pass
        return
    if args.mode == "exit-at-start":
        print("toolbox: refusing to start (exit-at-start mode)", file=sys.stderr, flush=True)
        sys.exit(3)
    if args.mode == "junk-stdout":
        print("this line is not JSON-RPC", flush=True)
    if args.mode == "linger":
        child = subprocess.Popen(["sleep", "1000"], stdin=subprocess.DEVNULL)
        if state is not None:
            (state / "child").write_text(str(child.pid))
    if args.http:
        _serve_http(args.mode, state, max(1, args.page_size), args.http)
        return
    anyio.run(_serve, args.mode, state, max(1, args.page_size))
    if args.mode == "linger":
        while True:
            time.sleep(1000)


def _serve_http(mode: str, state: Path | None, page_size: int, token: str) -> None:
    import socket

    import uvicorn

    server = _server(mode, state, page_size)
    app = server.streamable_http_app()

    async def guarded(scope, receive, send) -> None:  # the bearer token, checked before anything MCP
        if scope["type"] == "http":
            headers = {k.decode(): v.decode() for k, v in scope["headers"]}
            if state is not None:
                (state / "headers").write_text(json.dumps(headers))
            if headers.get("authorization") != f"Bearer {token}":
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b"unauthorized"})
                return
        await app(scope, receive, send)

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    if state is not None:
        (state / "port").write_text(str(sock.getsockname()[1]))
    async def run() -> None:
        async with app.router.lifespan_context(app):
            await uvicorn.Server(uvicorn.Config(guarded, log_level="warning", lifespan="off")).serve(sockets=[sock])

    anyio.run(run)


async def _serve(mode: str, state: Path | None, page_size: int) -> None:
    server = _server(mode, state, page_size)
    options = server.create_initialization_options(NotificationOptions(tools_changed=True))
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, options)


def _server(mode: str, state: Path | None, page_size: int) -> Server:
    tools = list(BASE_TOOLS)
    listings = 0

    async def list_tools(ctx, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        nonlocal tools, listings
        listings += 1
        if state is not None:
            (state / "listings").write_text(str(listings))
        start = int(params.cursor) if params and params.cursor else 0
        served = tools
        if mode == "changes-while-listed" and listings == 1:
            tools = list(SECOND_SET)  # the set changes while this (older) listing is under way
            await ctx.session.send_tool_list_changed()
        page = served[start:start + page_size]
        more = start + page_size < len(served)
        return types.ListToolsResult(tools=page, next_cursor=str(start + page_size) if more else None)

    async def call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        nonlocal tools
        args = params.arguments or {}
        name = params.name
        if name in ("echo", "second_echo"):
            return _text(str(args.get("text", "")))
        if name == "add":
            return _text(str(int(args["a"]) + int(args["b"])))
        if name == "write_note":
            Path("note.txt").write_text(str(args.get("text", "")))
            return _text("written")
        if name == "slow":
            seconds = float(args.get("seconds", 1.0))
            began = time.monotonic()
            if state is not None:
                (state / "slow-started").write_text("yes")
            try:
                step = 0
                while time.monotonic() - began < seconds:
                    step += 1
                    await ctx.session.report_progress(step, None, None)
                    await anyio.sleep(0.1)
            except anyio.get_cancelled_exc_class():
                if state is not None:
                    (state / "cancelled").write_text("yes")
                raise
            return _text(f"slept {seconds}s")
        if name == "crash":
            if state is not None:
                (state / "crashing").write_text("yes")
            os._exit(7)
        if name == "big":
            return _text("x" * int(args.get("size", 1000)))
        if name == "grow":
            tools = [*tools, _tool("extra", "A tool added at run time.", {})]
            await ctx.session.send_tool_list_changed()
            return _text("grown")
        if name == "extra":
            return _text("extra here")
        return types.CallToolResult(content=[types.TextContent(type="text", text=f"no tool {name}")], is_error=True)

    return Server("toolbox", on_list_tools=list_tools, on_call_tool=call_tool)


def _text(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


if __name__ == "__main__":
    main()
