"""The process the daemon starts for one tool call the user approved outside a confined run's rules.

Started from the forkserver like a worker (`call_entry`), it confines itself first thing to the run's command
domain plus the approved paths (`sandbox.policy.approved_rules`; for `run_bash` also the user's home, listed
around yagent's own state and `deny_read`), carries out that one call with the ordinary tool code, and hands
the tool result back through the pipe the daemon gave it, then exits. The worker that asked never gains a
right: its own domain is untouched.

The approved paths come from the daemon (the prompt the user answered), not from the worker; a call whose
outside paths are not all among them, or that names yagent's own state, is refused here as well.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import msgpack

from yagent.ipc.confinement import ConfinementSpec
from yagent.ipc.vocabulary import YoloLevel

from . import entry
from .sandbox import writes_project
from .sandbox._landlock import LandlockError, restrict_self
from .sandbox.policy import approved_rules
from .tools import REGISTRY, ToolResult
from .tools.context import ToolContext
from .tools.invoke import check_arguments, parse_arguments
from .tools.spec import Invocation

__all__ = ["CARRIED_OUT", "COMMAND_TOOL", "operation_main"]

COMMAND_TOOL = "run_bash"  # the one tool whose approved calls also get the home writable
# The tools an approved operation may be: those that write files or run a command (never a delegation).
CARRIED_OUT = frozenset({"create_file", "search_replace_in_file", "delete_file", "rename_file", COMMAND_TOOL})


def operation_main(run_id: str, reply: Connection, confinement: ConfinementSpec, request: dict[str, Any]) -> None:
    """Carry out `request` ({tool, args, call_id, approved}) confined, send {content, is_error, data} on `reply`."""
    entry._leave_the_forkserver()
    entry._keep_state_private()
    entry._become_run_process(run_id, "approved")
    try:
        result = _carry_out(confinement, request)
    except Exception as exc:  # the daemon and the model must hear why, never a silent EOF
        result = ToolResult.error(f"{request.get('tool')}: the approved operation failed: {type(exc).__name__}: {exc}")
    try:
        reply.send_bytes(_result_bytes(result))
    finally:
        reply.close()
    os._exit(0)


def _result_bytes(result: ToolResult) -> bytes:
    """The result as msgpack (the daemon never unpickles what this process sends); data msgpack cannot carry is
    dropped, said in its place."""
    payload: dict[str, Any] = {"content": result.content, "is_error": result.is_error, "data": dict(result.data or {})}
    try:
        return msgpack.packb(payload, use_bin_type=True)
    except (TypeError, ValueError, OverflowError) as exc:
        payload["data"] = {"dropped": f"result data that cannot be sent to the daemon ({exc})"}
        return msgpack.packb(payload, use_bin_type=True)


def _carry_out(confinement: ConfinementSpec, request: dict[str, Any]) -> ToolResult:
    tool = str(request.get("tool", ""))
    spec = REGISTRY.get(tool)
    approved = [str(p) for p in request.get("approved", ())]
    if spec is None or tool not in CARRIED_OUT:
        return ToolResult.error(f"{tool!r} is not a tool an approved operation carries out; nothing was done.")
    hidden = [os.path.realpath(p) for p in (confinement.home, confinement.runtime_dir)]
    for path in approved:
        real = os.path.realpath(path)
        if not os.path.isabs(path) or real == "/" or any(real == h or real.startswith(h + "/") for h in hidden):
            return ToolResult.error(f"{tool}: {path} is not a path an approved operation may write (yagent's own "
                                    "state, its runtime directory or the whole file system); nothing was done.")
    args, problem = parse_arguments(request.get("args") or {})
    problems = [problem] if problem is not None else check_arguments(spec.parameters, args)
    if problems or any("\x00" in str(args.get(p) or "") for p in spec.path_params):
        why = "; ".join(problems) or "a NUL in a path"
        return ToolResult.error(f"{tool}: bad arguments ({why}); nothing was done.")
    command = tool == COMMAND_TOOL
    if command and args.get("command") != request.get("summary"):
        return ToolResult.error(f"{tool}: the command is not the one the user approved; nothing was run.")
    if command:
        args["is_background"] = False  # it must end before this process does: the result is its output
    try:
        rules = approved_rules(confinement, writes_project(confinement.agent), approved, home_writable=command)
        restrict_self(confinement.abi, rules)
    except (LandlockError, OSError) as exc:
        return ToolResult.error(f"{tool}: the approved operation could not be confined ({exc}); nothing was done.")
    os.environ["TMPDIR"] = tempfile.tempdir = confinement.scratch_dir
    ctx = ToolContext(project_root=Path(confinement.project_root), run_id=os.environ.get("YAGENT_RUN_ID", "run"),
                      yolo=YoloLevel.FULL, scratch_dir=Path(confinement.scratch_dir))
    guard = ctx.guard
    paths = {p: guard.resolve(args.get(p) or ".") for p in spec.path_params}
    asked = guard.request_for(spec, args, paths, cwd=paths.get("cwd"))
    unapproved = [p for p in (asked.outside_paths if asked else ()) if not _covered(p, approved)]
    if unapproved:
        return ToolResult.error(f"{tool}: {', '.join(unapproved)} was not approved by the user; nothing was done.")
    return asyncio.run(spec.executor(Invocation(spec, args, str(request.get("call_id", "")), ctx, None, paths)))


def _covered(path: str, approved: list[str]) -> bool:
    # A command's prompt names every outside path it found; a path beneath an approved directory is covered.
    return any(path == a or Path(path).is_relative_to(a) for a in approved)
