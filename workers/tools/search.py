"""search_by_regex: ripgrep when it is on PATH, a Python walk otherwise, with one output shape.

Both back-ends skip hidden files, files excluded by `.gitignore`, `.ignore` or `.rgignore`, files over
10 MB and binary files (a NUL byte in the first 64 KiB), visit files in `rg --sort path`
order, cut long lines the same way and format each hit as `path:line:text`.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import re
import shutil
import signal
from dataclasses import dataclass
from pathlib import Path

from .file_read import not_found
from .ignore import glob_matches, walk_files
from .limits import MAX_FILE_BYTES, SEARCH_DEFAULT_RESULTS, SEARCH_LINE_CHARS, SEARCH_MAX_RESULTS
from .registry import register
from .result import ToolResult
from .spec import AuthPolicy, Effect, Invocation, ResultPaths, ToolSpec, Truncation


@dataclass(frozen=True)
class Hit:
    path: Path
    line: int
    text: str


@dataclass(frozen=True)
class SearchQuery:
    pattern: str
    target: Path  # resolved file or directory to search
    project_root: Path
    glob: str | None
    ignore_case: bool
    max_results: int


RG_FIRST_BUFFER = 64 * 1024  # ripgrep's initial read buffer: a NUL byte in it makes the file binary


class SearchError(Exception):
    """The search could not run (bad pattern, back-end failure); the message is for the model."""


class PatternError(SearchError):
    """The back-end could not compile the pattern (another regex engine may)."""


def _order(hit: Hit) -> tuple[tuple[str, ...], int]:
    return hit.path.parts, hit.line


def _cut(text: str) -> str:
    text = text.rstrip("\r\n")
    return text if len(text) <= SEARCH_LINE_CHARS else text[:SEARCH_LINE_CHARS] + "…"


def _glob_ok(query: SearchQuery, path: Path) -> bool:
    if not query.glob:
        return True
    base = query.project_root if path.is_relative_to(query.project_root) else query.target
    return glob_matches(query.glob, path.relative_to(base).as_posix() if path != base else path.name)


def python_search(query: SearchQuery) -> tuple[list[Hit], bool]:
    """The fallback back-end. Returns (hits, more_exist)."""
    try:
        regex = re.compile(query.pattern, re.IGNORECASE if query.ignore_case else 0)
    except re.error as exc:
        raise PatternError(f"invalid regular expression {query.pattern!r}: {exc}") from None
    hits: list[Hit] = []
    for path in walk_files(query.target, query.project_root, max_file_bytes=MAX_FILE_BYTES):
        if not _glob_ok(query, path):
            continue
        try:
            data = path.read_bytes()
        except OSError:
            continue
        data = _text_before_binary(data)
        lines = data.decode("utf-8", errors="replace").split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        for number, line in enumerate(lines, start=1):
            if regex.search(line.rstrip("\r")):
                if len(hits) == query.max_results:
                    return hits, True
                hits.append(Hit(path, number, _cut(line)))
    return hits, False


def _text_before_binary(data: bytes) -> bytes:
    """What ripgrep searches of a file it finds while walking: nothing when a NUL byte shows up in its first
    buffer; with a later NUL, the lines before it (ripgrep stops at its buffer boundary, a few lines sooner)."""
    nul = data.find(b"\0")
    if nul < 0:
        return data
    if nul < RG_FIRST_BUFFER:
        return b""
    return data[: data.rfind(b"\n", 0, nul) + 1]


def looks_binary(path: Path) -> bool:
    """True when a NUL byte sits near the start of the file, the test both back-ends use."""
    try:
        with open(path, "rb") as fh:
            return b"\0" in fh.read(RG_FIRST_BUFFER)
    except OSError:
        return False


async def ripgrep_search(rg: str, query: SearchQuery, *, pcre2: bool = False) -> tuple[list[Hit], bool]:
    """The ripgrep back-end, reading `rg --json` and stopping once one hit more than needed arrived."""
    argv = [
        rg, "--json", "--sort", "path", "--no-require-git", "--no-ignore-global",
        "--crlf",  # `$` matches before `\r\n` too, as in the fallback (the model does not see the `\r`)
        "--max-filesize", str(MAX_FILE_BYTES),  # the fallback's size limit (given files are still searched)
        "--regexp", query.pattern,
    ]
    if query.ignore_case:
        argv.append("--ignore-case")
    if pcre2:
        argv.append("--pcre2")
    if query.glob:
        argv += ["--glob", query.glob]
    argv += ["--", str(query.target)]
    proc = await asyncio.create_subprocess_exec(
        *argv,
        cwd=query.project_root,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    stderr_task = asyncio.create_task(proc.stderr.read())
    hits: list[Hit] = []
    more = False
    read_to_end = False
    try:
        async for raw in proc.stdout:
            event = json.loads(raw)
            if event.get("type") != "match":
                continue
            if len(hits) == query.max_results:
                more = True
                break
            data = event["data"]
            hits.append(Hit(Path(_text(data["path"])), int(data["line_number"]), _cut(_text(data["lines"]))))
        else:
            read_to_end = True
    finally:
        if not read_to_end and proc.returncode is None:
            # os.kill, not proc.kill(): Popen's kill reaps an exited child itself, and asyncio then reports
            # exit status 255 instead of ripgrep's own (2 for a bad pattern).
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
        try:
            await proc.wait()
            stderr = (await stderr_task).decode("utf-8", errors="replace")
        finally:
            if not stderr_task.done():  # cancelled while waiting: the reader must not be left behind
                stderr_task.cancel()
    if proc.returncode == 2 and not hits and not more:
        message = stderr.strip() or "ripgrep failed"
        if "regex parse error" in message or "PCRE2" in message:
            raise PatternError(f"invalid regular expression {query.pattern!r}: {message}")
        raise SearchError(message)
    return sorted(hits, key=_order), more


async def _search(rg: str | None, query: SearchQuery) -> tuple[list[Hit], bool]:
    if not rg:
        return await asyncio.to_thread(python_search, query)
    try:
        return await ripgrep_search(rg, query)
    except PatternError as exc:
        # ripgrep's default engine has no look-around or backreferences; its PCRE2 engine (when built in)
        # and Python's `re` have both, so the model's pattern is tried there before it is refused.
        for engine in (lambda: ripgrep_search(rg, query, pcre2=True), lambda: asyncio.to_thread(python_search, query)):
            with contextlib.suppress(PatternError):
                return await engine()
        raise exc from None


def _text(field: dict) -> str:
    if "text" in field:
        return field["text"]
    return base64.b64decode(field.get("bytes", "")).decode("utf-8", errors="replace")


def format_hits(inv: Invocation, query: SearchQuery, hits: list[Hit], more: bool) -> ToolResult:
    """The shared output shape of both back-ends."""
    where = inv.display(query.target)
    if not hits:
        return ToolResult.ok(f"[no matches for {query.pattern!r} in {where}]", data={"matches": 0})
    lines = [f"{inv.display(h.path)}:{h.line}:{h.text}" for h in hits]
    files = len({h.path for h in hits})
    if more:
        lines.append(f"[showing the first {len(hits)} matches; narrow the pattern, path or glob to see the rest]")
    else:
        lines.append(f"[{len(hits)} matches in {files} files]")
    return ToolResult.ok("\n".join(lines), data={"matches": len(hits), "files": files, "truncated": more})


async def search_by_regex(inv: Invocation) -> ToolResult:
    target = inv.path("path")
    if not target.exists():
        return not_found(inv, target)
    if target.is_file() and await asyncio.to_thread(looks_binary, target):
        # ripgrep would search a named binary file raw and print NUL-laden lines; say what to do instead.
        return ToolResult.error(
            f"{inv.display(target)} is a binary file; search_by_regex only searches text. Use run_bash "
            "(e.g. `grep -c -a PATTERN file` or `strings file | grep PATTERN`) to look inside it."
        )
    requested = int(inv.args.get("max_results", SEARCH_DEFAULT_RESULTS))
    query = SearchQuery(
        pattern=str(inv.args["pattern"]),
        target=target,
        project_root=inv.ctx.guard.root,
        glob=inv.args.get("glob") or None,
        ignore_case=bool(inv.args.get("case_insensitive", False)),
        max_results=min(max(1, requested), SEARCH_MAX_RESULTS),
    )
    rg = shutil.which("rg")
    try:
        hits, more = await _search(rg, query)
    except SearchError as exc:
        return ToolResult.error(str(exc))
    return format_hits(inv, query, hits, more)


register(
    ToolSpec(
        name="search_by_regex",
        description=(
            "Search file contents with a regular expression, one hit per line as `path:line:text`. "
            "Hidden, binary and .gitignored files are skipped. Narrow with `path` and `glob` (e.g. `*.py`)."
        ),
        parameters={
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "Regular expression matched against each line."},
                "path": {"type": "string", "description": "File or directory to search. Default: the project root."},
                "glob": {"type": "string", "description": "Only files matching this glob; `!` excludes instead."},
                "case_insensitive": {"type": "boolean", "description": "Ignore letter case. Default false."},
                "max_results": {"type": "integer", "description": "Hits to return, 1-500. Default 100."},
            },
            "required": ["pattern"],
            "additionalProperties": False,
        },
        effects=Effect.FS_READ,
        executor=search_by_regex,
        auth=AuthPolicy.NEVER,
        path_params=("path",),
        truncation=Truncation.EARLY,
        result_paths=ResultPaths.RG,
        page_hint="narrow the pattern, path or glob",
    )
)
