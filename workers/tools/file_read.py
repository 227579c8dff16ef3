"""Read-only file tools: read_file, list_dir, print_dir_tree."""

from __future__ import annotations

import asyncio
import difflib
import os
import shlex
import stat
from pathlib import Path

from .beneath import PathEscape
from .ignore import IgnoreRules, visible_entries
from .limits import (
    LINES_PER_READ,
    LIST_DIR_MAX_ENTRIES,
    MAX_FILE_BYTES,
    MAX_LINE_CHARS,
    SOFT_WARN_BYTES,
    TREE_DEFAULT_DEPTH,
    TREE_MAX_DEPTH,
    TREE_MAX_LINES,
)
from .registry import register
from .result import ToolResult
from .spec import AuthPolicy, Effect, Invocation, ResultPaths, ToolSpec, Truncation


def _mb(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MB"


def not_found(inv: Invocation, path: Path) -> ToolResult:
    """A 'no such file' result that suggests near names from the parent directory."""
    hint = ""
    if path.parent.is_dir():
        siblings = [p.name for p in path.parent.iterdir()]
        close = difflib.get_close_matches(path.name, siblings, n=3)
        if close:
            hint = " Similar names there: " + ", ".join(inv.display(path.parent / c) for c in close) + "."
    return ToolResult.error(f"{inv.display(path)} does not exist.{hint}")


def moved_away(inv: Invocation, path: Path) -> ToolResult:
    """The result when a path changed after the guard checked it: a link or `..` now leads elsewhere."""
    where = "the project" if inv.ctx.guard.is_inside(path) else "the path that was checked"
    return ToolResult.error(
        f"{inv.display(path)} changed while {inv.spec.name} was using it: a link on the way now leads out of "
        f"{where}, so nothing was done. Look at the path again (list_dir) before retrying; links that leave "
        "the project are not followed."
    )


UNREACHABLE = (FileNotFoundError, NotADirectoryError, PathEscape)  # what walking to a path beneath the root raises


def unreachable(inv: Invocation, path: Path, exc: Exception) -> ToolResult:
    """The result for one of `UNREACHABLE` on the way to the parent directory of `path`."""
    if isinstance(exc, FileNotFoundError):
        return not_found(inv, path)
    if isinstance(exc, NotADirectoryError):
        return ToolResult.error(f"a parent of {inv.display(path)} is a file, not a directory.")
    return moved_away(inv, path)


# Opening never blocks (a FIFO would wait for a writer) and never takes a terminal as controlling tty.
READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY


def _read_file(inv: Invocation) -> ToolResult:
    path = inv.path("path")
    shown = inv.display(path)
    try:
        fd = inv.ctx.guard.files.open(path, READ_FLAGS)
    except FileNotFoundError:
        return not_found(inv, path)
    except PathEscape:
        return moved_away(inv, path)
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            return ToolResult.error(f"{shown} is a directory; use list_dir or print_dir_tree to see its contents.")
        if not stat.S_ISREG(info.st_mode):
            return ToolResult.error(f"{shown} is not a regular file (a pipe, socket or device); read_file only "
                                    "reads files.")
        size = info.st_size
        if size > MAX_FILE_BYTES:
            return ToolResult.error(
                f"{shown} is {_mb(size)}, over the {_mb(MAX_FILE_BYTES)} read limit. Find the part you need "
                "with search_by_regex, or print a slice with run_bash (e.g. sed -n '100,200p')."
            )
        data = fh.read(MAX_FILE_BYTES)  # bounded: the file may have grown since fstat
    if b"\0" in data[:8192]:
        return ToolResult.error(f"{shown} looks binary ({_mb(size)}); read_file only shows text.")
    try:
        text, undecodable = data.decode("utf-8"), False
    except UnicodeDecodeError:
        text, undecodable = data.decode("utf-8", errors="replace"), True
    bom = text.startswith("\ufeff")
    if bom:  # invisible in an editor; shown, it would be copied into search text that then never matches
        text = text[1:]
    lines = split_lines(text)
    total = len(lines)
    if total == 0:
        return ToolResult.ok(f"File: {shown}  (empty file)", data={"path": shown, "total_lines": 0})
    offset = max(1, int(inv.args.get("offset", 1)))
    requested = int(inv.args.get("limit", LINES_PER_READ))
    limit = min(max(1, requested), LINES_PER_READ)
    if offset > total:
        return ToolResult.error(f"{shown} has {total} lines; offset {offset} is past the end.")
    chunk = lines[offset - 1 : offset - 1 + limit]
    last = offset - 1 + len(chunk)
    more = f"; next page: offset={last + 1}" if last < total else ""
    notes = []
    if requested > LINES_PER_READ:
        notes.append(f"[limit capped at {LINES_PER_READ} lines per call]")
    if size > SOFT_WARN_BYTES:
        notes.append(f"[large file ({_mb(size)}): prefer search_by_regex to locate what you need]")
    if bom:
        notes.append("[the file starts with a UTF-8 byte-order mark; it is not shown, and edits keep it]")
    if undecodable:
        notes.append(
            "[not valid UTF-8: undecodable bytes are shown as \ufffd; search_replace_in_file cannot edit this "
            "file, use run_bash (e.g. iconv or sed) instead]"
        )
    body = "\n".join(f"{n:>6}\t{_cut(line, n, shown)}" for n, line in enumerate(chunk, start=offset))
    header = f"File: {shown}  (lines {offset}-{last} of {total}{more})"
    return ToolResult.ok(
        "\n".join([header, *notes, body]),
        data={"path": shown, "first_line": offset, "last_line": last, "total_lines": total},
    )


def split_lines(text: str) -> list[str]:
    """Lines as sed, grep and search_by_regex number them: split at `\n` only, a trailing `\r` dropped.

    str.splitlines() also splits at form feeds, U+2028 and other separators, which would shift every
    later line number away from what search_by_regex and the edit tools report.
    """
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def _cut(line: str, number: int, shown: str) -> str:
    if len(line) <= MAX_LINE_CHARS:
        return line
    rest = f"sed -n '{number}p' {shlex.quote(shown)} | cut -c {MAX_LINE_CHARS + 1}-{MAX_LINE_CHARS * 5}"
    return f"{line[:MAX_LINE_CHARS]}…[line cut: {len(line)} characters; see more of it with run_bash: {rest}]"


async def read_file(inv: Invocation) -> ToolResult:
    return await asyncio.to_thread(_read_file, inv)


register(
    ToolSpec(
        name="read_file",
        description=(
            "Read a text file with line numbers. Returns up to 1000 lines per call starting at `offset`; "
            "the first line of the result tells you the next offset when there is more. Files over 10 MB "
            "are refused: locate what you need with search_by_regex first."
        ),
        parameters={
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path, relative to the project root or absolute."},
                "offset": {"type": "integer", "description": "First line to return (1-based). Default 1."},
                "limit": {"type": "integer", "description": "Number of lines to return, at most 1000 (default)."},
            },
            "required": ["path"],
            "additionalProperties": False,
        },
        effects=Effect.FS_READ,
        executor=read_file,
        auth=AuthPolicy.NEVER,
        path_params=("path",),
        truncation=Truncation.LATE,
        result_paths=ResultPaths.HEADER,
        page_hint="read a smaller range with offset/limit",
    )
)


def _list_dir(inv: Invocation) -> ToolResult:
    path = inv.path("path")
    try:
        with inv.ctx.guard.files.directory(path) as fd, os.scandir(fd) as it:
            found = [(not entry.is_dir(), entry.name) for entry in it]
    except FileNotFoundError:
        return not_found(inv, path)
    except NotADirectoryError:
        return ToolResult.error(f"{inv.display(path)} is a file; use read_file to see it.")
    except PathEscape:
        return moved_away(inv, path)
    entries = sorted(found)
    if not entries:
        return ToolResult.ok(f"[empty directory: {inv.display(path)}]")
    shown = entries[:LIST_DIR_MAX_ENTRIES]
    lines = [inv.display(path / name) + ("" if not_dir else "/") for not_dir, name in shown]
    if len(entries) > len(shown):
        lines.append(f"[{len(entries) - len(shown)} more entries not shown; list a subdirectory]")
    return ToolResult.ok("\n".join(lines), data={"path": inv.display(path), "entries": len(entries)})


async def list_dir(inv: Invocation) -> ToolResult:
    return await asyncio.to_thread(_list_dir, inv)


register(
    ToolSpec(
        name="list_dir",
        description=(
            "List the entries of one directory, directories first, one path per line (directories end "
            "with `/`). Hidden entries are included."
        ),
        parameters={
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Directory to list. Default: the project root."},
            },
            "additionalProperties": False,
        },
        effects=Effect.FS_READ,
        executor=list_dir,
        auth=AuthPolicy.NEVER,
        path_params=("path",),
        truncation=Truncation.EARLY,
        result_paths=ResultPaths.BARE,
        page_hint="list a subdirectory instead",
    )
)


def _print_dir_tree(inv: Invocation) -> ToolResult:
    path = inv.path("path")
    if not path.is_dir():
        return not_found(inv, path) if not path.exists() else ToolResult.error(f"{inv.display(path)} is a file.")
    depth = min(max(1, int(inv.args.get("max_depth", TREE_DEFAULT_DEPTH))), TREE_MAX_DEPTH)
    root = inv.ctx.guard.root
    rules = IgnoreRules(root if path.is_relative_to(root) else path)
    lines = [inv.display(path).rstrip("/") + "/"]
    counts = {"dirs": 0, "files": 0}
    truncated = _tree(path, rules, 1, depth, lines, counts)
    footer = f"[{counts['dirs']} directories, {counts['files']} files; hidden and .gitignored entries skipped]"
    if truncated:
        footer = f"[stopped at {TREE_MAX_LINES} entries; look at a subdirectory or lower max_depth]"
    return ToolResult.ok("\n".join([*lines, footer]), data=dict(counts))


def _tree(directory: Path, rules: IgnoreRules, level: int, depth: int, lines: list[str], counts: dict) -> bool:
    for entry in visible_entries(directory, rules):
        if len(lines) > TREE_MAX_LINES:
            return True
        is_dir = entry.is_dir(follow_symlinks=False)
        lines.append("  " * level + entry.name + ("/" if is_dir else ""))
        counts["dirs" if is_dir else "files"] += 1
        if is_dir and level < depth and _tree(Path(entry.path), rules, level + 1, depth, lines, counts):
            return True
    return False


async def print_dir_tree(inv: Invocation) -> ToolResult:
    return await asyncio.to_thread(_print_dir_tree, inv)


register(
    ToolSpec(
        name="print_dir_tree",
        description=(
            "Show the directory tree under a path, indented two spaces per level, skipping hidden and "
            ".gitignored entries. Use it to get oriented in an unfamiliar project."
        ),
        parameters={
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Directory to start from. Default: the project root."},
                "max_depth": {"type": "integer", "description": "Levels to descend, 1-8. Default 3."},
            },
            "additionalProperties": False,
        },
        effects=Effect.FS_READ,
        executor=print_dir_tree,
        auth=AuthPolicy.NEVER,
        path_params=("path",),
        truncation=Truncation.EARLY,
        result_paths=ResultPaths.NONE,
        page_hint="look at a subdirectory or lower max_depth",
    )
)
