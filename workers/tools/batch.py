"""Batch executor for one step's tool calls (a leaf: no agent logic).

Consecutive calls the surface admits as parallel run concurrently, up to a limit; any other call runs
alone, in order. Every call gets exactly one result, in call order, also when the batch is cancelled:
calls in flight get a "cancelled" result — an "interrupted" one when the daemon stopping ended the run, which a
resumed run recognises by its first word (`INTERRUPTED_RESULT`) — and calls not yet started a "not run"
result. Calls after an
`agent_exit` (a result with `stop_run`) are not executed either; they are reported as not run.

The batch emits `tool_call_start` and `tool_call_result` through `ctx.emit` for every call, placeholders
included, so the agent loop does not emit them itself.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

from yagent.ipc import event_data
from yagent.ipc.config import DEFAULT_PARALLEL_READONLY_TOOLS, PARALLEL_CLAMP, clamp_parallel
from yagent.ipc.vocabulary import EventType, StopReason

from .context import ToolContext
from .invoke import ToolCall, invoke_tool, parse_arguments
from .result import CANCELLED_RESULT, INTERRUPTED_ADVICE, INTERRUPTED_RESULT, ToolResult
from .surface import Surface

log = logging.getLogger(__name__)

DEFAULT_MAX_PARALLEL = DEFAULT_PARALLEL_READONLY_TOOLS
MAX_PARALLEL_CAP = PARALLEL_CLAMP


def normalize_max_parallel(value: int | None) -> int:
    """`[agent] max_parallel_readonly_tools`: 1 = strictly serial, <=0 or unset = 4, above 8 = 8.

    The one normaliser of the configuration (`yagent.ipc.config.clamp_parallel`), kill switch included.
    """
    return clamp_parallel(value, DEFAULT_MAX_PARALLEL, os.environ)


class ToolBatch:
    """One step's calls. `run()` executes them; `results()` is complete at any time after it returns or raises.

    Typical use in a loop that must record a result for every call even when stopped::

        batch = ToolBatch(surface, calls, ctx, max_parallel=cfg_value)
        try:
            await batch.run()
        finally:
            record(batch.results())
    """

    def __init__(
        self, surface: Surface, calls: Sequence[ToolCall], ctx: ToolContext, *, max_parallel: int | None = None
    ):
        self._surface = surface
        self._calls = list(calls)
        self._ctx = ctx
        self.limit = normalize_max_parallel(max_parallel)
        self._results: list[ToolResult | None] = [None] * len(self._calls)
        self._started = [False] * len(self._calls)
        self._begun = [0.0] * len(self._calls)
        self._cancel_reason = ""  # why the batch was cancelled, when it was (the run's stop reason)

    async def run(self) -> list[ToolResult]:
        """Execute the batch; on cancellation fills the missing results, then re-raises."""
        try:
            i = 0
            while i < len(self._calls) and not self._stopped():
                # Admission is decided when a segment starts, after the calls before it ran (load_tool).
                j = i
                while j < len(self._calls) and self._surface.is_parallelizable(self._calls[j].name):
                    j += 1
                if j > i:
                    await self._run_parallel(range(i, j))
                    i = j
                else:
                    await self._call(i)
                    i += 1
        except asyncio.CancelledError as exc:
            self._cancel_reason = str(exc.args[0]) if exc.args else ""
            self._emit_placeholders()
            raise
        self._emit_placeholders()
        return self.results()

    def results(self) -> list[ToolResult]:
        """One result per call, in call order; placeholders for calls that did not finish."""
        return [self._results[i] or self._placeholder(i) for i in range(len(self._calls))]

    async def _run_parallel(self, indices: range) -> None:
        gate = asyncio.Semaphore(self.limit)

        async def gated(index: int) -> None:
            async with gate:
                await self._call(index)

        tasks = [
            asyncio.create_task(gated(i), name=f"tool:{self._calls[i].name}:{self._calls[i].id}") for i in indices
        ]
        try:
            await asyncio.wait(tasks)
        except asyncio.CancelledError:
            for task in tasks:
                task.cancel()
            await asyncio.wait(tasks)
            raise
        for index, task in zip(indices, tasks, strict=True):
            exc = None if task.cancelled() else task.exception()
            if exc is not None and self._results[index] is None:
                result = _internal_error(self._calls[index], exc)
                self._results[index] = result
                self._emit_result(index, result)

    async def _call(self, index: int) -> None:
        call = self._calls[index]
        self._started[index] = True
        args, _ = parse_arguments(call.arguments)
        raw = call.arguments if isinstance(call.arguments, str) else json.dumps(dict(call.arguments))
        self._emit(EventType.TOOL_CALL_START, event_data.tool_call_start(call.id, call.name, raw, _brief(args)))
        self._begun[index] = time.monotonic()
        try:
            result = await invoke_tool(self._surface, call, self._ctx)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise
            # The tool cancelled itself (e.g. its delegation was stopped); the batch goes on.
            result = ToolResult.error(f"{call.name} was cancelled before it finished.").bound(call.id, call.name)
        except Exception as exc:
            # invoke_tool turns tool failures into results; this is a bug in it, and still one result per call.
            log.exception("invoking %s failed", call.name)
            result = _internal_error(call, exc)
        self._results[index] = result
        self._emit_result(index, result)

    def _stopped(self) -> bool:
        # After agent_exit the run is over: later calls of the same step are reported, not executed.
        return any(r is not None and r.stop_run for r in self._results)

    def _emit_placeholders(self) -> None:
        for index, result in enumerate(self.results()):
            if self._results[index] is None:
                self._emit_result(index, result)

    def _placeholder(self, index: int) -> ToolResult:
        call = self._calls[index]
        if not self._started[index] and self._stopped():
            text = f"Not run: the run finished with agent_exit before {call.name}. Nothing was executed."
            return ToolResult.error(text, data={"cancelled": False, "started": False}).bound(call.id, call.name)
        if self._started[index] and self._cancel_reason == StopReason.INTERRUPTED:
            text = f"{INTERRUPTED_RESULT} yagentd stopped while {call.name} was running. {INTERRUPTED_ADVICE}"
            return ToolResult(content=text, is_error=True, data={"cancelled": True, "started": True,
                                                                 "interrupted": True}).bound(call.id, call.name)
        if self._started[index]:
            text = (
                f"{CANCELLED_RESULT} {call.name} was running; it may have been partly "
                "applied. Check its effect before repeating it."
            )
        else:
            text = f"Not run: the run was stopped before {call.name} started. Nothing was executed."
        data = {"cancelled": True, "started": self._started[index]}
        return ToolResult(content=text, is_error=True, data=data).bound(call.id, call.name)

    def _emit_result(self, index: int, result: ToolResult) -> None:
        begun = self._begun[index]
        duration = time.monotonic() - begun if begun else 0.0
        self._emit(EventType.TOOL_CALL_RESULT, event_data.tool_call_result(
            result.call_id, result.tool, result.content, result.is_error, duration))

    def _emit(self, event: str, data: Mapping[str, Any]) -> None:
        try:
            self._ctx.emit(event, data)
        except Exception:
            log.exception("event emitter failed for %s", event)  # observability must never fail a tool


def _internal_error(call: ToolCall, exc: BaseException) -> ToolResult:
    text = f"{call.name} failed with an internal error ({type(exc).__name__}: {exc}). It may not have run."
    return ToolResult.error(text).bound(call.id, call.name)


def _brief(args: Mapping[str, Any]) -> str:
    """A one-line summary of a call for compact display: its path, command or first short text argument."""
    for key in ("path", "command", "task", "question", "pattern", "names"):
        value = args.get(key)
        if isinstance(value, str) and value:
            return value.splitlines()[0][:160]
        if isinstance(value, list) and value:
            return ", ".join(str(v) for v in value)[:160]
    return ""


async def run_tool_batch(
    surface: Surface, calls: Sequence[ToolCall], ctx: ToolContext, *, max_parallel: int | None = None
) -> list[ToolResult]:
    """Run `calls` and return one result per call in order (use `ToolBatch` to keep results on cancel)."""
    return await ToolBatch(surface, calls, ctx, max_parallel=max_parallel).run()
