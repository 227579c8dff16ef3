"""`read_blueprint`: the repository blueprint for every agent — the structure derived from the project's files now
(modules, files, import edges, entry points) and the notes a Repo run recorded, each marked stale when the structure
changed since, narrowed by section, module, field and state and paged by entry.

Directory-to-directory questions are its; symbol-to-symbol ones are the code tools'. When the blueprint is off or
cannot be read, the tool stays on the surface and says why and what to do instead of vanishing.
"""

from __future__ import annotations

from .registry import register
from .result import ToolResult
from .spec import AuthPolicy, Effect, Invocation, ResultPaths, ToolSpec, Truncation

__all__ = ["BLUEPRINT_STATES"]

BLUEPRINT_STATES = ("all", "fresh", "stale", "unverifiable")


def _whole(value: object, default: int, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        return default
    return max(low, min(high, value))


async def read_blueprint(inv: Invocation) -> ToolResult:
    port = inv.ctx.blueprint
    if port is None:
        return ToolResult.error("read_blueprint: the repository blueprint is turned off for this run ([blueprint] "
                                "enable = false or YAGENT_BLUEPRINT=0); use print_dir_tree and the code tools instead")
    args = inv.args
    state = str(args.get("state") or "all")
    if state not in BLUEPRINT_STATES:
        return ToolResult.error(f"read_blueprint: state is one of {', '.join(BLUEPRINT_STATES)} (got {state!r})")
    try:
        text = port.read(section=str(args.get("section") or ""), module=str(args.get("module") or ""),
                         field=str(args.get("field") or ""), state=state,
                         offset=_whole(args.get("offset"), 0, 0, 1_000_000),
                         limit=_whole(args.get("limit"), 20, 1, 200))
    except OSError as exc:
        return ToolResult.error(f"read_blueprint: the project could not be read ({exc}); try again, or use "
                                "print_dir_tree")
    return ToolResult.ok(text)


register(ToolSpec(
    name="read_blueprint",
    description=("The repository blueprint: the project's modules (directories with source files), their file counts "
                 "and import edges as derived from the files now, and what earlier Repo runs recorded about them "
                 "(purpose, what a module owns, invariants, gotchas), each with where it can be checked and marked "
                 "stale when the structure changed since. Give `module` for one module's facts and notes."),
    parameters={"type": "object", "properties": {
        "section": {"type": "string", "enum": ["repo", "module"], "description": "Only repository-wide notes, or only "
                                                                                "module notes."},
        "module": {"type": "string", "description": "A module's path, e.g. \"daemon/commands\"."},
        "field": {"type": "string", "description": "Only notes of this field (purpose, owns, invariants, gotchas, "
                                                   "conventions; overview, layout, build, testing)."},
        "state": {"type": "string", "enum": list(BLUEPRINT_STATES), "description": "fresh, stale (the structure "
                                                                                 "changed since), unverifiable."},
        "offset": {"type": "integer", "minimum": 0, "description": "Skip this many notes (paging)."},
        "limit": {"type": "integer", "minimum": 1, "description": "At most this many notes (default 20)."},
    }, "additionalProperties": False},
    effects=Effect.BLUEPRINT,
    executor=read_blueprint,
    auth=AuthPolicy.NEVER,
    truncation=Truncation.EARLY,
    result_paths=ResultPaths.NONE,
    page_hint="page with `offset`, or narrow with `module`, `field` or `state`",
))
