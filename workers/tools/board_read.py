"""Reading the task's hand-off board back: `read_note`, `list_notes`, `read_artifact` (through `ctx.board`).

The index every model call sees names each note by its handle (`note:repo/STEM`) and each stored
deliverable by its artifact id; these tools fetch them. They read only the task's own board.
"""

from __future__ import annotations

from collections.abc import Callable

from .context import Board
from .registry import register
from .result import ToolResult
from .spec import AuthPolicy, Effect, Executor, Invocation, ToolSpec, Truncation

_NO_BOARD = "{tool} is unavailable: this run has no hand-off board. Work from the results in your conversation."
_PAGE = 8_000
_MAX_PAGE = 32_000


def _page_args(inv: Invocation) -> tuple[int, int]:
    offset, limit = inv.args.get("offset", 0), inv.args.get("limit", _PAGE)
    offset = offset if isinstance(offset, int) and not isinstance(offset, bool) and offset >= 0 else 0
    limit = limit if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0 else _PAGE
    return offset, min(limit, _MAX_PAGE)


def _answer(inv: Invocation, tool: str, read: Callable[[Board], str]) -> ToolResult:
    """The board's answer for one read tool; a missing board or an unknown ref says what to do."""
    if inv.ctx.board is None:
        return ToolResult.error(_NO_BOARD.format(tool=tool))
    try:
        return ToolResult.ok(read(inv.ctx.board))
    except LookupError as exc:
        return ToolResult.error(str(exc))


async def _read_note(inv: Invocation) -> ToolResult:
    offset, limit = _page_args(inv)
    return _answer(inv, "read_note", lambda board: board.read_note(str(inv.args["ref"]), offset, limit))


async def _list_notes(inv: Invocation) -> ToolResult:
    return _answer(inv, "list_notes", lambda board: board.list_notes())


async def _read_artifact(inv: Invocation) -> ToolResult:
    offset, limit = _page_args(inv)
    return _answer(inv, "read_artifact", lambda board: board.read_artifact(str(inv.args["id"]), offset, limit))


_PAGING = {
    "offset": {"type": "integer", "minimum": 0, "description": "Character to start at (0 = the beginning)."},
    "limit": {"type": "integer", "minimum": 1, "description": f"Characters to return (default {_PAGE})."},
}


def _reader(name: str, description: str, executor: Executor, properties: dict[str, object],
            required: list[str]) -> ToolSpec:
    return ToolSpec(
        name=name,
        description=description,
        parameters={"type": "object", "properties": properties, "required": required, "additionalProperties": False},
        effects=Effect.FS_READ,  # the agents that read files read the board; Chat does not
        executor=executor,
        auth=AuthPolicy.NEVER,  # the task's own state, never the user's files
        truncation=Truncation.LATE,
    )


register(_reader(
    "read_note",
    "Read one hand-off note of this task's board in full: its hand-off (conclusion, facts, open questions) "
    "and its body, the delegated agent's whole deliverable, page by page.",
    _read_note,
    {"ref": {"type": "string",
             "description": "The note's handle from the board index, e.g. note:repo/20261203-173000-000000-1a2b3c4d."},
     **_PAGING},
    ["ref"],
))
register(_reader(
    "list_notes",
    "List every hand-off note on this task's board, one line each (handle, status, conclusion), no bodies.",
    _list_notes,
    {},
    [],
))
register(_reader(
    "read_artifact",
    "Read a stored deliverable (artifact) of this task page by page; results and notes name its id.",
    _read_artifact,
    {"id": {"type": "string", "description": "The artifact id, e.g. 20261203-173000-1a2b3c4d."}, **_PAGING},
    ["id"],
))
