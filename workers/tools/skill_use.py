"""`use_skill`: one of the user's skills in full, through the run's skills port (`ctx.skills`).

The catalogue in the system prompt names the skills; this tool hands over a skill's instructions page by page,
what its front matter says and the files beside its `SKILL.md`. It stays on the surface when there are no
skills, and then says where the user can put them.
"""

from __future__ import annotations

from .registry import register
from .result import ToolResult
from .spec import AuthPolicy, Effect, Invocation, ToolSpec, Truncation

_NO_SHELF = "Skills are not available in this run; work without them."


def _whole_number(value: object, default: int | None, minimum: int) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= minimum else default


async def _use_skill(inv: Invocation) -> ToolResult:
    if inv.ctx.skills is None:
        return ToolResult.error(_NO_SHELF)
    name = inv.args.get("name", "")
    try:
        text = inv.ctx.skills.use(name if isinstance(name, str) else "",
                                  _whole_number(inv.args.get("offset"), 0, 0) or 0,
                                  _whole_number(inv.args.get("limit"), None, 1))
    except LookupError as exc:
        return ToolResult.error(str(exc))
    return ToolResult.ok(text)


register(ToolSpec(
    name="use_skill",
    description=(
        "Load one of the user's skills — a procedure written down for tasks like yours — in full: its instructions "
        "(page by page), what its front matter says and the files beside it. The Skills section of your system "
        "prompt names them; with no name, this lists every skill. Load a skill before a task it fits, once: a "
        "skill already loaded in this run is not given again."),
    parameters={
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "The skill's name, as the Skills list gives it; empty or "
                                                      "left out: list every skill."},
            "offset": {"type": "integer", "minimum": 0,
                       "description": "Character of the instructions to start at (0 = the beginning)."},
            "limit": {"type": "integer", "minimum": 1, "description": "Characters of instructions to return."},
        },
        "required": [],
        "additionalProperties": False,
    },
    effects=Effect.FS_READ,  # the user's own files, read like the board: the agents that read files hold it
    executor=_use_skill,
    auth=AuthPolicy.NEVER,
    truncation=Truncation.LATE,
    brief="Load one of the user's skills in full",
    page_hint="call use_skill again with an offset to read the rest",
))
