"""One tool call, end to end: resolve, parse, check arguments, guard paths, authorise, execute, cap.

Every failure along the way becomes an error `ToolResult` the model can act on; only cancellation
propagates.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from yagent.ipc import event_data
from yagent.ipc.noted_paths import MAX_NOTED_PATHS
from yagent.ipc.vocabulary import EventType

from .. import sandbox
from .authorization import AuthRequest
from .context import ToolContext
from .ignored_writes import IgnoredWrites
from .result import ToolResult, truncate_for_model
from .spec import Effect, Invocation, ToolSpec
from .surface import LOAD_TOOL, Surface

log = logging.getLogger(__name__)

_PY_TYPES: Mapping[str, type | tuple[type, ...]] = {
    "string": str,
    "integer": int,
    "number": (int, float),
    "boolean": bool,
    "array": list,
    "object": dict,
}


@dataclass(frozen=True)
class ToolCall:
    """A tool call as the model produced it; `arguments` is the raw JSON text or an already-parsed object."""

    id: str
    name: str
    arguments: str | Mapping[str, Any] = ""


async def invoke_tool(surface: Surface, call: ToolCall, ctx: ToolContext) -> ToolResult:
    """Run one call against `surface`; always returns a result labelled with the call's id."""
    spec = surface.resolve(call.name)
    if spec is None:
        available = ", ".join(surface.names()) or "(none)"
        return ToolResult.error(f"Unknown tool {call.name!r}. Available tools: {available}.").bound(
            call.id, call.name
        )
    if spec.root_only and ctx.delegated:
        # The dispatcher's line, independent of the surface's: a root-only tool that reached a delegated run's
        # surface anyway (a dynamic join, a surface built by hand) still never runs there.
        return ToolResult.error(
            f"{call.name} is reserved to the agent that talks to the user; a delegated agent cannot call it. "
            "Nothing was executed: do the work with your own tools, and report in your hand-off what the "
            "agent above you should start or follow up."
        ).bound(call.id, call.name)
    result = await _invoke(surface, spec, call, ctx)
    return truncate_for_model(result, spec).bound(call.id, call.name)


async def _invoke(surface: Surface, spec: ToolSpec, call: ToolCall, ctx: ToolContext) -> ToolResult:
    if not surface.is_loaded(spec.name):
        return ToolResult.error(
            f"{spec.name} is a deferred tool and its parameters are not loaded. Call {LOAD_TOOL} with "
            f'{{"names": ["{spec.name}"]}} first, then call {spec.name} again. Nothing was executed.'
        )
    args, parse_error = parse_arguments(call.arguments)
    if parse_error is not None:
        return ToolResult.error(
            f"{spec.name}: the arguments are not valid JSON ({parse_error}). Send one JSON object that "
            "matches the tool's parameters."
        )
    args = _drop_optional_nulls(spec, args)
    problems = check_arguments(spec.parameters, args)
    if problems:
        return ToolResult.error(
            f"{spec.name}: invalid arguments: {'; '.join(problems)}. Parameters: {describe_parameters(spec)}."
        )
    guard = ctx.guard
    unusable = [p for p in spec.path_params if "\x00" in str(args.get(p) or "")]
    if unusable:
        # The OS refuses such a path (ValueError from every file call); say so instead of failing the run.
        return ToolResult.error(
            f"{spec.name}: {', '.join(map(repr, unusable))} contains a NUL character (\\0), which no file "
            "path can hold. Send the path without it. Nothing was executed."
        )
    # An optional path parameter the model left out means the project root (list_dir, run_bash cwd).
    try:
        paths: dict[str, Path] = {p: guard.resolve(args.get(p) or ".") for p in spec.path_params}
        request = guard.request_for(spec, args, paths, cwd=paths.get("cwd"))
    except OSError as exc:
        return ToolResult.error(
            f"{spec.name}: a path could not be resolved ({exc.strerror}: {exc.filename}); something on the way "
            "kept changing while it was looked at. Nothing was executed; look at the path again before retrying."
        )
    try:
        refusal = await ctx.authorize(request)
    except Exception as exc:  # not CancelledError (a BaseException): cancellation propagates
        # E.g. the daemon went away while the question was open: without an answer nothing may run.
        log.warning("authorisation for %s failed: %r", spec.name, exc)
        return ToolResult.error(
            f"{spec.name} needs the user's authorisation, but asking for it failed ({type(exc).__name__}: {exc}). "
            "Nothing was executed. Keep the change inside the project root, or try again later."
        )
    if refusal is not None:
        return ToolResult.error(refusal)
    if spec.mutates and Effect.FS_WRITE in spec.effects and not spec.command_params and ctx.checkpoints is not None:
        await _name_ignored_writes(ctx, spec, args, paths)
    outside = request is not None and bool(request.outside_paths) and sandbox.confined()
    if outside and spec.command_params:  # a command's writes fail inside it, unseen: the daemon runs it instead
        done = await _carry_out_approved(ctx, request, spec, args, call.id)
        if done is not None:
            return done
    try:
        result = await spec.executor(Invocation(spec, args, call.id, ctx, surface, paths))
        if ctx.reads is not None:
            ctx.reads.record(spec, paths, result)
        return result
    except asyncio.CancelledError:
        raise
    except PermissionError as exc:
        if request is not None and sandbox.confined():  # approved, then refused by the kernel, not by us
            done = await _carry_out_approved(ctx, request, spec, args, call.id) if outside else None
            return done or ToolResult.error(sandbox.refused_after_approval(spec.name, exc))
        log.exception("tool %s failed", spec.name)
        return ToolResult.error(f"{spec.name} failed unexpectedly: {type(exc).__name__}: {exc}")
    except Exception as exc:
        log.exception("tool %s failed", spec.name)
        return ToolResult.error(f"{spec.name} failed unexpectedly: {type(exc).__name__}: {exc}")


async def _name_ignored_writes(ctx: ToolContext, spec: ToolSpec, args: Mapping[str, Any], paths: dict[str, Path]
                               ) -> None:
    """Before a file tool writes inside an ignored directory, the daemon keeps those files' content for the run's
    checkpoints (`ignored_writes.py`); a failure there is logged and the write goes ahead, as with any checkpoint."""
    if ctx.checkpoints is None:
        return
    if ctx.ignored_writes is None:
        ctx.ignored_writes = IgnoredWrites(ctx.guard.root)
    view = ctx.ignored_writes
    # Both the path as named (a link itself, for delete and rename) and where it leads.
    named = [Path(os.path.normpath(ctx.guard.root / str(args.get(p) or "."))) for p in spec.path_params]
    rels = view.to_name(named, paths.values())
    if view.cut:  # a directory too large to name whole: the user hears what an undo cannot put back
        ctx.emit(EventType.LOG.value, event_data.log(
            "warning", f"{spec.name}: {view.cut} files inside an ignored directory were not kept for `yagent undo` "
                       f"(at most {MAX_NOTED_PATHS} are named at once)"))
    if not rels:
        return
    text, is_error = await ctx.checkpoints.checkpoint_note(rels)
    if is_error:
        log.warning("%s: the checkpoints may not hold %s as it was: %s", spec.name, ", ".join(rels[:5]), text)
    view.named(rels)


async def _carry_out_approved(ctx: ToolContext, request: AuthRequest | None, spec: ToolSpec,
                              args: Mapping[str, Any], call_id: str) -> ToolResult | None:
    """The call carried out by the daemon's approved-operation process, or None where no prompt allowed it."""
    if ctx.approved is None or request is None:
        return None
    return await ctx.approved.carry_out(request, spec.name, args, call_id)


def parse_arguments(raw: str | Mapping[str, Any] | None) -> tuple[dict[str, Any], str | None]:
    """(arguments, None) or ({}, reason). An empty string means no arguments (some providers send it)."""
    if raw is None:
        return {}, None
    if isinstance(raw, Mapping):
        return dict(raw), None
    if not raw.strip():
        return {}, None
    try:
        value = json.loads(raw)
    except ValueError as exc:
        return {}, str(exc)
    if not isinstance(value, dict):
        return {}, f"expected a JSON object, got {type(value).__name__}"
    return value, None


def check_arguments(schema: Mapping[str, Any], args: Mapping[str, Any]) -> list[str]:
    """Problems with `args` against the top level of a tool's JSON schema (types, enums, required, unknown)."""
    props: Mapping[str, Any] = schema.get("properties", {})
    problems = [f"missing required parameter {r!r}" for r in schema.get("required", []) if r not in args]
    if schema.get("additionalProperties", False) is False:
        unknown = sorted(set(args) - set(props))
        if unknown:
            problems.append(f"unknown parameter(s) {', '.join(map(repr, unknown))}")
    for name, value in args.items():
        prop = props.get(name)
        if not isinstance(prop, Mapping):
            continue
        expected = prop.get("type")
        if expected in _PY_TYPES and not _is_type(value, expected):
            problems.append(f"{name!r} must be {expected} (got {_json_type(value)})")
            continue
        if "enum" in prop and value not in prop["enum"]:
            problems.append(f"{name!r} must be one of {prop['enum']} (got {value!r})")
        items = prop.get("items")
        if expected == "array" and isinstance(items, Mapping) and items.get("type") in _PY_TYPES:
            bad = [v for v in value if not _is_type(v, items["type"])]
            if bad:
                problems.append(f"every item of {name!r} must be {items['type']}")
    return problems


def describe_parameters(spec: ToolSpec) -> str:
    """`path (string, required), offset (integer)` — reminds the model of the schema in error results."""
    props: Mapping[str, Any] = spec.parameters.get("properties", {})
    required = set(spec.parameters.get("required", []))
    parts = [f"{n} ({p.get('type', '?')}{', required' if n in required else ''})" for n, p in props.items()]
    return ", ".join(parts) or "none"


def _drop_optional_nulls(spec: ToolSpec, args: dict[str, Any]) -> dict[str, Any]:
    # Models often send `null` for an optional parameter they mean to omit.
    required = set(spec.parameters.get("required", []))
    return {k: v for k, v in args.items() if v is not None or k in required}


def _is_type(value: Any, expected: str) -> bool:
    if isinstance(value, bool) and expected in ("integer", "number"):
        return False
    return isinstance(value, _PY_TYPES[expected])


def _json_type(value: Any) -> str:
    for name in _PY_TYPES:
        if _is_type(value, name):
            return name
    return "null" if value is None else type(value).__name__
