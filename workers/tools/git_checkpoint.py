"""Git checkpoints for the Coding agent: `git_checkpoint_create`, `git_checkpoint_list`, `git_checkpoint_rollback`.

The daemon checkpoints every Coding sub-task before it starts and after it ends by itself; these let the agent
mark a state worth coming back to, see its task's checkpoints, and put the project back to one of them. The git
work is done by a process the daemon starts (a worker may not write `.git`), through `ToolContext.checkpoints`;
the tools are on a run's surface only when its project has checkpoints (`RunSettings.git_checkpoints`).
A rollback first keeps how things are as a checkpoint, so it can itself be rolled back.
"""

from __future__ import annotations

from .registry import register
from .result import ToolResult
from .spec import AuthPolicy, Effect, Frequency, Invocation, ToolSpec, Truncation

__all__ = ["CHECKPOINT_TOOLS"]

CHECKPOINT_TOOLS = ("git_checkpoint_create", "git_checkpoint_list", "git_checkpoint_rollback")
_NO_PORT = "{tool}: this run has no git checkpoints (the project is not a repository yagent checkpoints, or they are " \
           "turned off); nothing was done"


def _result(text: str, is_error: bool) -> ToolResult:
    return ToolResult.error(text) if is_error else ToolResult.ok(text)


async def _create(inv: Invocation) -> ToolResult:
    port = inv.ctx.checkpoints
    if port is None:
        return ToolResult.error(_NO_PORT.format(tool="git_checkpoint_create"))
    return _result(*await port.checkpoint_create(str(inv.args.get("label") or "")[:200]))


async def _list(inv: Invocation) -> ToolResult:
    port = inv.ctx.checkpoints
    if port is None:
        return ToolResult.error(_NO_PORT.format(tool="git_checkpoint_list"))
    return _result(*await port.checkpoint_list())


async def _rollback(inv: Invocation) -> ToolResult:
    port = inv.ctx.checkpoints
    if port is None:
        return ToolResult.error(_NO_PORT.format(tool="git_checkpoint_rollback"))
    number = inv.args.get("checkpoint")
    if isinstance(number, bool) or not isinstance(number, int) or number < 1:
        return ToolResult.error("git_checkpoint_rollback: `checkpoint` must be a checkpoint number (1 or more) from "
                                "git_checkpoint_list; nothing was changed")
    return _result(*await port.checkpoint_rollback(number))


register(ToolSpec(
    name="git_checkpoint_create",
    description=("Record the project's files as they are now as a git checkpoint (uncommitted and untracked files "
                 "included; your branch, index and stash are not touched). Make one before a risky change; "
                 "git_checkpoint_rollback brings the project back to it."),
    parameters={"type": "object", "properties": {
        "label": {"type": "string", "description": "What state this is, in a few words (\"tests pass\")."}},
        "additionalProperties": False},
    effects=Effect.CHECKPOINT,
    executor=_create,
    frequency=Frequency.COLD,
    serial=True,
    auth=AuthPolicy.NEVER,
    truncation=Truncation.NEVER,
))

register(ToolSpec(
    name="git_checkpoint_list",
    description="List this task's git checkpoints: number, why it was made (before or after a sub-task, by an "
                "agent, before a rollback), by whom, and when.",
    parameters={"type": "object", "properties": {}, "additionalProperties": False},
    effects=Effect.CHECKPOINT,
    executor=_list,
    frequency=Frequency.COLD,
    auth=AuthPolicy.NEVER,
    truncation=Truncation.EARLY,
))

register(ToolSpec(
    name="git_checkpoint_rollback",
    description=("Put every file of the project back as it was at a checkpoint of this task (files made since are "
                 "removed). How things are just before is kept as a new checkpoint, so the rollback can be rolled "
                 "back too. Files too big for a checkpoint and submodules are left as they are."),
    parameters={"type": "object", "properties": {
        "checkpoint": {"type": "integer", "minimum": 1,
                       "description": "The checkpoint's number (git_checkpoint_list)."}},
        "required": ["checkpoint"], "additionalProperties": False},
    effects=Effect.CHECKPOINT | Effect.FS_WRITE,
    executor=_rollback,
    frequency=Frequency.COLD,
    mutates=True,
    serial=True,
    auth=AuthPolicy.NEVER,
    truncation=Truncation.NEVER,
))
