"""File-changing tools: create_file, search_replace_in_file, delete_file, rename_file.

All of them are serial and mutate; the WorkspaceGuard has already resolved and authorised their paths
by the time an executor runs. They reach those paths only through `guard.files` (`beneath.py`): each acts
on one name in a parent directory opened beneath the project root (or, for an approved outside path,
beneath `/` with no link followed), so a link swapped into the path after the check sends nothing elsewhere.
"""

from __future__ import annotations

import asyncio
import difflib
import errno
import json
import os
import re
import stat
from pathlib import Path

from .beneath import PathEscape, remove_entry, rename_noreplace
from .file_read import READ_FLAGS, UNREACHABLE, moved_away, not_found, split_lines, unreachable
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
    if path == inv.ctx.guard.root or not path.name:  # the root, or `/`
        return ToolResult.error(f"{shown} is a directory.")
    files = inv.ctx.guard.files
    try:
        with files.directory(path.parent, create=True) as parent:
            kind = _entry_kind(parent, path.name)
            if kind == stat.S_IFDIR:
                return ToolResult.error(f"{shown} is a directory.")
            existed = kind is not None
            if existed and not inv.args.get("overwrite", False):
                return ToolResult.error(
                    f"{shown} already exists. Change part of it with search_replace_in_file, or pass "
                    "overwrite=true to replace the whole file."
                )
            files.replace_file(parent, path.name, data)
    except PathEscape:
        return moved_away(inv, path)
    except NotADirectoryError:
        return ToolResult.error(f"a parent of {shown} is a file, not a directory; choose another path.")
    return _json({"path": shown, "created": not existed, "bytes": len(data), "lines": data.count(b"\n")})


def _entry_kind(dir_fd: int, name: str) -> int | None:
    """The file type (stat.S_IFMT) of the entry `name` in `dir_fd`, the entry itself and not a link's target."""
    try:
        return stat.S_IFMT(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except FileNotFoundError:
        return None


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
    search, replace = str(inv.args["search"]), str(inv.args["replace"])
    try:
        with inv.ctx.guard.files.directory(path.parent) as parent:
            return _edit_in(inv, parent, path, search, replace)
    except UNREACHABLE as exc:
        return unreachable(inv, path, exc)


def _edit_in(inv: Invocation, parent: int, path: Path, search: str, replace: str) -> ToolResult:
    """The edit of the entry `path.name` of the directory `parent`: read and replaced through that descriptor."""
    shown = inv.display(path)
    try:
        # The name is the link-free one the guard resolved: a link at it now was swapped in after the check.
        fd = os.open(path.name, READ_FLAGS | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise PathEscape(errno.ELOOP, "a link was swapped in", path.name) from None
        raise
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return ToolResult.error(f"{shown} is not a file.")
        if info.st_size > MAX_FILE_BYTES:
            return ToolResult.error(f"{shown} is over the {_LIMIT_TEXT} edit limit; edit it with run_bash instead.")
        raw = fh.read(MAX_FILE_BYTES + 1)
    if len(raw) > MAX_FILE_BYTES:
        return ToolResult.error(f"{shown} is over the {_LIMIT_TEXT} edit limit; edit it with run_bash instead.")
    if not search:
        return ToolResult.error("search is empty; give the exact text to replace, with enough context lines.")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return ToolResult.error(f"{shown} is not UTF-8 text; search_replace_in_file only edits text files.")
    crlf_only = "\r\n" in text and text.count("\r\n") == text.count("\n")
    if crlf_only or (search not in text and "\r\n" in text):
        # The model writes `\n`: match a CRLF file with CRLF, and write CRLF back so endings stay uniform.
        search, replace = _to_crlf(search), _to_crlf(replace)
    count = text.count(search)
    if count == 0:
        near = _whitespace_near_misses(text, search)
        if near:
            places = ", ".join(f"{first}-{last}" if last > first else str(first) for first, last in near)
            return ToolResult.error(
                f"search text not found in {shown} exactly, but it matches at line(s) {places} if whitespace "
                "is ignored: indentation, spacing or tabs differ. Read those lines with read_file and copy "
                "them exactly into search."
            )
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
    inv.ctx.guard.files.replace_file(parent, path.name, encoded)
    diff = unified_diff(text, updated, shown)
    return ToolResult.ok(f"File: {shown}  (1 replacement)\n{diff}", data={"path": shown, "diff": diff})


def unified_diff(before: str, after: str, shown: str) -> str:
    """A `git diff`-style patch of one file; a last line without newline gets git's marker, not a glued line."""
    out = []
    for line in difflib.unified_diff(_diff_lines(before), _diff_lines(after), f"a/{shown}", f"b/{shown}"):
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def _diff_lines(text: str) -> list[str]:
    # Split at `\n` only, like git: str.splitlines() would also break at form feeds and U+2028.
    lines = [line + "\n" for line in text.split("\n")]
    lines[-1] = lines[-1].removesuffix("\n")  # the text after the last newline has none
    return lines if lines[-1] else lines[:-1]


def _to_crlf(text: str) -> str:
    return re.sub(r"(?<!\r)\n", "\r\n", text)


def _squash(line: str) -> str:
    return " ".join(line.split())


def _whitespace_near_misses(text: str, search: str, limit: int = 5) -> list[tuple[int, int]]:
    """(first, last) line numbers where `search` would match if runs of whitespace were ignored."""
    wanted = [_squash(line) for line in search.split("\n")]
    while wanted and not wanted[0]:
        wanted.pop(0)
    while wanted and not wanted[-1]:
        wanted.pop()
    if not wanted:
        return []
    lines = [_squash(line) for line in split_lines(text)]
    found: list[tuple[int, int]] = []
    span = len(wanted)
    for start in range(len(lines) - span + 1):
        if span == 1:
            matched = wanted[0] in lines[start]
        else:  # the first line may start mid-line and the last end mid-line, as in an exact match
            matched = (
                lines[start].endswith(wanted[0])
                and lines[start + span - 1].startswith(wanted[-1])
                and lines[start + 1 : start + span - 1] == wanted[1:-1]
            )
        if matched:
            found.append((start + 1, start + span))
            if len(found) == limit:
                break
    return found


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


def _named_symlink(inv: Invocation, param: str) -> Path | None:
    """The symbolic link `param` names, itself rather than its target; None when it names no link.

    The guard resolves paths through links (so authorisation sees where data lives), but deleting or
    moving a link must act on the link, as `rm` and `mv` do, and a dangling link has no target at all.
    """
    raw = Path(os.path.expanduser(str(inv.args.get(param) or "")))
    if raw.name in ("", ".", ".."):
        return None
    link = inv.ctx.guard.resolve(raw.parent) / raw.name
    return link if link.is_symlink() else None


def _outside_link_error(inv: Invocation, link: Path) -> ToolResult:
    return ToolResult.error(
        f"{inv.display(link)} is a symbolic link in a directory outside the project; this tool only changes "
        "links inside it. Use run_bash if the user wants it changed."
    )


def _delete_file(inv: Invocation) -> ToolResult:
    link = _named_symlink(inv, "path")
    if link is not None and not inv.ctx.guard.is_inside(link.parent):
        return _outside_link_error(inv, link)
    path = link or inv.path("path")  # a link itself, never its target
    shown = inv.display(path)
    if path == inv.ctx.guard.root:
        return ToolResult.error("refusing to delete the project root.")
    try:
        with inv.ctx.guard.files.directory(path.parent) as parent:
            deleted = remove_entry(parent, path.name)
    except UNREACHABLE as exc:
        return unreachable(inv, path, exc)
    except OSError as exc:
        if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
            raise
        return ToolResult.error(
            f"{shown} is a non-empty directory; delete its files first, or remove it with run_bash "
            "(marked is_dangerous)."
        )
    return _json({"path": shown, "deleted": deleted})


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
    source_link = _named_symlink(inv, "source")
    if source_link is not None:
        if not inv.ctx.guard.is_inside(source_link.parent):
            return _outside_link_error(inv, source_link)
        source = source_link  # move the link itself, not the file it points to
    elif not source.exists():
        return not_found(inv, source)
    if source == inv.ctx.guard.root:
        return ToolResult.error("refusing to move the project root.")
    destination_link = _named_symlink(inv, "destination")
    if destination.exists() or destination_link is not None:
        shown = inv.display(destination_link or destination)
        return ToolResult.error(f"{shown} already exists; choose another destination.")
    if source.is_dir() and not source.is_symlink() and destination.is_relative_to(source):
        return ToolResult.error(
            f"cannot move the directory {inv.display(source)} into itself ({inv.display(destination)}); "
            "choose a destination outside it."
        )
    files = inv.ctx.guard.files
    at = source  # the path being opened, for the error
    try:
        with files.directory(source.parent) as src_dir:
            at = destination
            with files.directory(destination.parent, create=True) as dst_dir:
                at = source
                rename_noreplace(src_dir, source.name, dst_dir, destination.name)
    except FileNotFoundError:
        return not_found(inv, source)
    except FileExistsError:
        return ToolResult.error(f"{inv.display(destination)} already exists; choose another destination.")
    except UNREACHABLE as exc:
        return unreachable(inv, at, exc)
    except OSError as exc:
        if exc.errno == errno.EINVAL:  # the kernel's answer to a directory moved into itself
            return ToolResult.error(f"cannot move {inv.display(source)} into itself ({inv.display(destination)}).")
        if exc.errno == errno.EXDEV:
            return ToolResult.error(
                f"{inv.display(source)} is a directory on another file system than {inv.display(destination)}; "
                "rename_file moves directories within one file system only. Use run_bash (mv) for this."
            )
        raise
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
