"""File-changing tools: create_file, search_replace_in_file, delete_file, rename_file.

All of them are serial and mutate; the WorkspaceGuard has already resolved and authorised their paths
by the time an executor runs.
"""

from __future__ import annotations

import asyncio
import difflib
import json
import shutil

from .atomic import write_atomic
from .file_read import not_found
from .limits import MAX_FILE_BYTES
from .registry import register
from .result import ToolResult
from .spec import AuthPolicy, Effect, Invocation, ResultPaths, ToolSpec, Truncation

_LIMIT_TEXT = f"{MAX_FILE_BYTES // (1024 * 1024)} MB"


def _json(payload: dict) -> ToolResult:
    return ToolResult.ok(json.dumps(payload), data=payload)


def _create_file(inv: Invocation) -> ToolResult:
    path = inv.path("path")
    shown = inv.display(path)
    data = str(inv.args["content"]).encode("utf-8")
    if len(data) > MAX_FILE_BYTES:
        return ToolResult.error(f"content is {len(data)} bytes, over the {_LIMIT_TEXT} limit for one write.")
    if path.is_dir():
        return ToolResult.error(f"{shown} is a directory.")
    existed = path.exists()
    if existed and not inv.args.get("overwrite", False):
        return ToolResult.error(
            f"{shown} already exists. Change part of it with search_replace_in_file, or pass "
            "overwrite=true to replace the whole file."
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, data)
    return _json({"path": shown, "created": not existed, "bytes": len(data), "lines": data.count(b"\n")})


async def create_file(inv: Invocation) -> ToolResult:
    return await asyncio.to_thread(_create_file, inv)


register(
    ToolSpec(
        name="create_file",
        description=(
            "Create a file with the given content, making parent directories as needed. Refuses to replace "
            "an existing file unless overwrite=true; to change part of a file use search_replace_in_file."
        ),
        parameters={
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File to create, relative to the project root."},
                "content": {"type": "string", "description": "Complete file content (up to 10 MB)."},
                "overwrite": {"type": "boolean", "description": "Replace the file if it exists. Default false."},
            },
            "required": ["path", "content"],
            "additionalProperties": False,
        },
        effects=Effect.FS_WRITE,
        executor=create_file,
        mutates=True,
        serial=True,
        auth=AuthPolicy.OUTSIDE,
        path_params=("path",),
        truncation=Truncation.LATE,
        result_paths=ResultPaths.JSON,
    )
)


def _search_replace(inv: Invocation) -> ToolResult:
    path = inv.path("path")
    shown = inv.display(path)
    search, replace = str(inv.args["search"]), str(inv.args["replace"])
    if not path.is_file():
        return not_found(inv, path) if not path.exists() else ToolResult.error(f"{shown} is not a file.")
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        return ToolResult.error(f"{shown} is over the {_LIMIT_TEXT} edit limit; edit it with run_bash instead.")
    if not search:
        return ToolResult.error("search is empty; give the exact text to replace, with enough context lines.")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        return ToolResult.error(f"{shown} is not UTF-8 text; search_replace_in_file only edits text files.")
    if search not in text and "\r\n" in text and "\r\n" not in search:
        # The model writes `\n`; a CRLF file would otherwise never match.
        search, replace = search.replace("\n", "\r\n"), replace.replace("\n", "\r\n")
    count = text.count(search)
    if count == 0:
        return ToolResult.error(
            f"search text not found in {shown}. It must match exactly, including indentation and "
            "whitespace; read the file again and copy the lines."
        )
    if count > 1:
        lines = _match_lines(text, search)
        return ToolResult.error(
            f"search text occurs {count} times in {shown} (starting at lines {lines}). Include more "
            "surrounding lines so it matches exactly once."
        )
    updated = text.replace(search, replace, 1)
    if updated == text:
        return ToolResult.error("search and replace are identical; nothing to change.")
    encoded = updated.encode("utf-8")
    if len(encoded) > MAX_FILE_BYTES:
        return ToolResult.error(f"the edited file would be over the {_LIMIT_TEXT} limit; nothing was written.")
    write_atomic(path, encoded)
    diff = "".join(
        difflib.unified_diff(
            text.splitlines(keepends=True), updated.splitlines(keepends=True), f"a/{shown}", f"b/{shown}"
        )
    )
    return ToolResult.ok(f"File: {shown}  (1 replacement)\n{diff}", data={"path": shown, "diff": diff})


def _match_lines(text: str, search: str, limit: int = 5) -> str:
    found, start = [], 0
    while len(found) < limit and (at := text.find(search, start)) != -1:
        found.append(str(text.count("\n", 0, at) + 1))
        start = at + 1
    return ", ".join(found)


async def search_replace_in_file(inv: Invocation) -> ToolResult:
    return await asyncio.to_thread(_search_replace, inv)


register(
    ToolSpec(
        name="search_replace_in_file",
        description=(
            "Replace one exact piece of text in a file and get the unified diff back. `search` must occur "
            "exactly once, matching whitespace and indentation; if it occurs more often, add surrounding "
            "lines to make it unique."
        ),
        parameters={
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File to edit, relative to the project root."},
                "search": {"type": "string", "description": "Exact text to find; must occur exactly once."},
                "replace": {"type": "string", "description": "Text to put in its place (may be empty)."},
            },
            "required": ["path", "search", "replace"],
            "additionalProperties": False,
        },
        effects=Effect.FS_READ | Effect.FS_WRITE,
        executor=search_replace_in_file,
        mutates=True,
        serial=True,
        auth=AuthPolicy.OUTSIDE,
        path_params=("path",),
        truncation=Truncation.LATE,
        result_paths=ResultPaths.HEADER,
        page_hint="the edit was applied; read the file to see the rest of the diff",
    )
)


def _delete_file(inv: Invocation) -> ToolResult:
    path = inv.path("path")
    shown = inv.display(path)
    if path == inv.ctx.guard.root:
        return ToolResult.error("refusing to delete the project root.")
    if not path.exists():
        return not_found(inv, path)
    if path.is_dir():
        if any(path.iterdir()):
            return ToolResult.error(
                f"{shown} is a non-empty directory; delete its files first, or remove it with run_bash "
                "(marked is_dangerous)."
            )
        path.rmdir()
        return _json({"path": shown, "deleted": "directory"})
    path.unlink()
    return _json({"path": shown, "deleted": "file"})


async def delete_file(inv: Invocation) -> ToolResult:
    return await asyncio.to_thread(_delete_file, inv)


register(
    ToolSpec(
        name="delete_file",
        description="Delete a file or an empty directory.",
        parameters={
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File or empty directory to delete."},
            },
            "required": ["path"],
            "additionalProperties": False,
        },
        effects=Effect.FS_WRITE,
        executor=delete_file,
        mutates=True,
        serial=True,
        auth=AuthPolicy.DANGEROUS,
        path_params=("path",),
        truncation=Truncation.NEVER,
        result_paths=ResultPaths.JSON,
    )
)


def _rename_file(inv: Invocation) -> ToolResult:
    source, destination = inv.path("source"), inv.path("destination")
    if not source.exists():
        return not_found(inv, source)
    if source == inv.ctx.guard.root:
        return ToolResult.error("refusing to move the project root.")
    if destination.exists():
        return ToolResult.error(f"{inv.display(destination)} already exists; choose another destination.")
    destination.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(source, destination)
    return _json({"source": inv.display(source), "destination": inv.display(destination)})


async def rename_file(inv: Invocation) -> ToolResult:
    return await asyncio.to_thread(_rename_file, inv)


register(
    ToolSpec(
        name="rename_file",
        description=(
            "Move or rename a file or directory. The destination must not exist; missing parent "
            "directories are created."
        ),
        parameters={
            "type": "object",
            "properties": {
                "source": {"type": "string", "description": "Existing file or directory."},
                "destination": {"type": "string", "description": "New path; must not exist yet."},
            },
            "required": ["source", "destination"],
            "additionalProperties": False,
        },
        effects=Effect.FS_WRITE,
        executor=rename_file,
        mutates=True,
        serial=True,
        auth=AuthPolicy.DANGEROUS,
        path_params=("source", "destination"),
        truncation=Truncation.NEVER,
        result_paths=ResultPaths.JSON,
    )
)
