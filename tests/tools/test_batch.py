"""Batch executor evidence on real surfaces: parallel read-only segments, serial writes, one result per call."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from yagent.ipc.vocabulary import EventType
from yagent.workers.tools import (
    AuthPolicy,
    Effect,
    Invocation,
    Surface,
    ToolBatch,
    ToolCall,
    ToolResult,
    ToolSpec,
    build_surface,
    normalize_max_parallel,
    run_tool_batch,
)

from .doubles import make_ctx

PARAMS = {"type": "object", "properties": {"tag": {"type": "string", "description": "label"}}}


class Meter:
    """Counts read and write probes in flight; `two_reads` fires once two reads overlap."""

    def __init__(self) -> None:
        self.reads = 0
        self.peak = 0
        self.writes = 0
        self.reads_during_write = 0
        self.two_reads = asyncio.Event()
        self.started: list[str] = []
        self.first_started = asyncio.Event()
        self.release = asyncio.Event()


def _probes(meter: Meter, *, hold: float | None) -> list[ToolSpec]:
    async def read(inv: Invocation) -> ToolResult:
        meter.reads += 1
        meter.peak = max(meter.peak, meter.reads)
        meter.started.append(str(inv.args.get("tag")))
        meter.first_started.set()
        if meter.writes:
            meter.reads_during_write += 1
        if meter.reads >= 2:
            meter.two_reads.set()
        try:
            if hold is None:
                await meter.release.wait()  # held until the test cancels the batch
            else:
                # Wait for a partner read; the serial control arm gives up after `hold` seconds.
                try:
                    await asyncio.wait_for(meter.two_reads.wait(), hold)
                except TimeoutError:
                    pass
        finally:
            meter.reads -= 1
        return ToolResult.ok(f"read {inv.args.get('tag')}")

    async def write(inv: Invocation) -> ToolResult:
        meter.writes += 1
        assert meter.reads == 0, "a read-only call was in flight when the write started"
        for _ in range(20):
            await asyncio.sleep(0)  # yield to the loop: a wrongly admitted read would start now
        meter.writes -= 1
        return ToolResult.ok("written")

    return [
        ToolSpec(name="probe_read", description="read probe", parameters=PARAMS, effects=Effect.FS_READ,
                 executor=read, auth=AuthPolicy.NEVER),
        ToolSpec(name="probe_write", description="write probe", parameters=PARAMS, effects=Effect.FS_WRITE,
                 executor=write, mutates=True, serial=True, auth=AuthPolicy.NEVER),
    ]


def _surface(agent: str, meter: Meter, hold: float | None = 0.05) -> Surface:
    # The production profile and admission predicate; only the probe tools are added, as extra specs.
    surface = build_surface(agent)
    surface.join(_probes(meter, hold=hold))
    return surface


def _calls(*names: str) -> list[ToolCall]:
    return [ToolCall(f"c{i}", name, {"tag": f"t{i}"}) for i, name in enumerate(names)]


@pytest.mark.parametrize(("limit", "expected_peak"), [(4, 4), (1, 1), (2, 2)])
def test_read_only_batch_parallel_evidence(project: Path, tmp_path: Path, limit: int, expected_peak: int) -> None:
    async def scenario() -> tuple[list[ToolResult], Meter]:
        meter = Meter()
        surface = _surface("repo", meter, hold=0.05)
        results = await run_tool_batch(surface, _calls(*["probe_read"] * 4), make_ctx(project, tmp_path),
                                       max_parallel=limit)
        return results, meter

    results, meter = asyncio.run(scenario())
    assert meter.peak == expected_peak
    assert [r.content for r in results] == ["read t0", "read t1", "read t2", "read t3"]


def test_real_read_tools_overlap_and_the_serial_arm_does_not(project: Path, tmp_path: Path) -> None:
    for i in range(4):
        (project / f"f{i}.txt").write_text(f"file {i}\n")
    calls = [ToolCall(f"c{i}", "read_file", {"path": f"f{i}.txt"}) for i in range(4)]

    def events_for(limit: int) -> list[str]:
        seen: list[str] = []
        ctx = make_ctx(project, tmp_path, emit=lambda kind, data: seen.append(f"{kind}:{data['call_id']}"))
        results = asyncio.run(run_tool_batch(build_surface("repo"), calls, ctx, max_parallel=limit))
        assert [r.call_id for r in results] == ["c0", "c1", "c2", "c3"] and not any(r.is_error for r in results)
        return seen

    parallel = events_for(4)
    assert parallel[:4] == [f"tool_call_start:c{i}" for i in range(4)]  # all four in flight together
    serial = events_for(1)
    assert serial[:4] == ["tool_call_start:c0", "tool_call_result:c0", "tool_call_start:c1", "tool_call_result:c1"]


def test_mixed_batch_never_overlaps_reads_with_a_write(project: Path, tmp_path: Path) -> None:
    async def scenario() -> tuple[list[ToolResult], Meter]:
        meter = Meter()
        surface = _surface("coding", meter, hold=0.05)
        calls = _calls("probe_read", "probe_read", "probe_write", "probe_read", "probe_read")
        return await run_tool_batch(surface, calls, make_ctx(project, tmp_path), max_parallel=4), meter

    results, meter = asyncio.run(scenario())
    assert [r.content for r in results] == ["read t0", "read t1", "written", "read t3", "read t4"]
    assert not any(r.is_error for r in results)
    assert meter.reads_during_write == 0 and meter.peak == 2
    assert meter.started == ["t0", "t1", "t3", "t4"]


def test_cancellation_from_outside_gives_one_result_per_call(project: Path, tmp_path: Path) -> None:
    events: list[tuple[str, str]] = []

    async def scenario() -> ToolBatch:
        meter = Meter()
        surface = _surface("coding", meter, hold=None)
        ctx = make_ctx(project, tmp_path, emit=lambda kind, data: events.append((kind, data["call_id"])))
        batch = ToolBatch(surface, _calls("probe_read", "probe_read", "probe_write", "probe_read"), ctx)
        task = asyncio.create_task(batch.run())
        await asyncio.wait_for(meter.two_reads.wait(), 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert meter.reads == 0  # the in-flight reads were cancelled and unwound
        return batch

    batch = asyncio.run(scenario())
    results = batch.results()
    assert [r.call_id for r in results] == ["c0", "c1", "c2", "c3"]
    assert [r.content.split(":")[0] for r in results] == ["Cancelled", "Cancelled", "Not run", "Not run"]
    assert all(r.is_error and r.data["cancelled"] for r in results)
    assert sorted(c for kind, c in events if kind == EventType.TOOL_CALL_RESULT) == ["c0", "c1", "c2", "c3"]


def test_calls_waiting_for_a_parallel_slot_are_reported_as_not_run(project: Path, tmp_path: Path) -> None:
    async def scenario() -> ToolBatch:
        meter = Meter()
        surface = _surface("repo", meter, hold=None)
        batch = ToolBatch(surface, _calls("probe_read", "probe_read"), make_ctx(project, tmp_path), max_parallel=1)
        task = asyncio.create_task(batch.run())
        await asyncio.wait_for(meter.first_started.wait(), 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return batch

    first, second = asyncio.run(scenario()).results()
    assert first.content.startswith("Cancelled:") and second.content.startswith("Not run:")


def test_agent_exit_ends_the_batch(project: Path, tmp_path: Path) -> None:
    calls = [ToolCall("a", "agent_exit", {"summary": "done"}), ToolCall("b", "create_file",
                                                                       {"path": "late.txt", "content": "x"})]
    results = asyncio.run(run_tool_batch(build_surface("coding"), calls, make_ctx(project, tmp_path)))
    assert results[0].stop_run and results[1].is_error and "agent_exit" in results[1].content
    assert not (project / "late.txt").exists()


def test_malformed_and_unknown_calls_get_error_results(project: Path, tmp_path: Path) -> None:
    (project / "a.txt").write_text("a\n")
    calls = [
        ToolCall("c0", "read_file", '{"path": "a.txt"'),
        ToolCall("c1", "no_such_tool", "{}"),
        ToolCall("c2", "read_file", '["a.txt"]'),
        ToolCall("c3", "read_file", '{"path": "a.txt"}'),
    ]
    results = asyncio.run(run_tool_batch(build_surface("repo"), calls, make_ctx(project, tmp_path)))
    assert [r.call_id for r in results] == ["c0", "c1", "c2", "c3"]
    assert results[0].is_error and results[0].content.startswith("read_file: the arguments are not valid JSON (")
    assert results[1].is_error
    assert "Available tools: agent_exit, agent_status, cancel_agents, deepthinking, delegate_devops" in \
        results[1].content
    assert results[2].is_error and "expected a JSON object" in results[2].content
    assert not results[3].is_error and "a" in results[3].content


def test_tool_failures_become_results_and_the_batch_goes_on(project: Path, tmp_path: Path) -> None:
    async def boom(_inv: Invocation) -> ToolResult:
        raise RuntimeError("disk on fire")

    async def self_cancel(_inv: Invocation) -> ToolResult:
        raise asyncio.CancelledError

    specs = [ToolSpec(name=n, description="d", parameters=PARAMS, effects=Effect.FS_READ, executor=f,
                      auth=AuthPolicy.NEVER) for n, f in (("boom", boom), ("self_cancel", self_cancel))]
    surface = build_surface("repo", extra_specs=specs)
    calls = [ToolCall("c0", "boom"), ToolCall("c1", "self_cancel"), ToolCall("c2", "list_dir")]
    results = asyncio.run(run_tool_batch(surface, calls, make_ctx(project, tmp_path), max_parallel=1))
    assert results[0].is_error and "RuntimeError: disk on fire" in results[0].content
    assert results[1].is_error and "cancelled before it finished" in results[1].content
    assert not results[2].is_error


def test_a_nul_character_in_a_path_is_an_error_result(project: Path, tmp_path: Path) -> None:
    (project / "a.txt").write_text("a\n")
    calls = [
        ToolCall("c0", "read_file", {"path": "a.txt\x00.py"}),
        ToolCall("c1", "create_file", {"path": "b\x00.txt", "content": "x"}),
        ToolCall("c2", "run_bash", {"command": "echo hi", "cwd": "\x00"}),
        ToolCall("c3", "read_file", {"path": "a.txt"}),
    ]
    results = asyncio.run(run_tool_batch(build_surface("coding"), calls, make_ctx(project, tmp_path)))
    assert [r.call_id for r in results] == ["c0", "c1", "c2", "c3"]
    for result, name in zip(results[:3], ("'path'", "'path'", "'cwd'"), strict=True):
        assert result.is_error and f"{name} contains a NUL character" in result.content
    assert not results[3].is_error and sorted(p.name for p in project.iterdir()) == ["a.txt"]


def test_a_failing_authorizer_is_an_error_result_and_nothing_runs(project: Path, tmp_path: Path) -> None:
    class LostDaemon:
        async def authorize(self, request: Any) -> Any:
            raise ConnectionError("daemon connection lost")

    ctx = make_ctx(project, tmp_path, authorizer=LostDaemon())
    calls = [ToolCall("c0", "create_file", {"path": "../escape.txt", "content": "x"}), ToolCall("c1", "list_dir")]
    results = asyncio.run(run_tool_batch(build_surface("coding"), calls, ctx))
    assert results[0].is_error
    assert "asking for it failed (ConnectionError: daemon connection lost)" in results[0].content
    assert not (project.parent / "escape.txt").exists() and not results[1].is_error


def test_an_internal_error_still_gives_every_call_one_result_and_one_event(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from yagent.workers.tools import batch as batch_module

    invoke = batch_module.invoke_tool

    async def broken_invoke(surface: Surface, call: ToolCall, ctx: Any) -> ToolResult:
        if call.name in ("list_dir", "create_file"):
            raise KeyError(f"registry lost {call.name}")  # a bug inside invoke_tool, not a tool failure
        return await invoke(surface, call, ctx)

    monkeypatch.setattr(batch_module, "invoke_tool", broken_invoke)
    surface = build_surface("coding")
    events: list[tuple[str, dict[str, Any]]] = []
    ctx = make_ctx(project, tmp_path, emit=lambda event, data: events.append((event, dict(data))))
    (project / "a.txt").write_text("a\n")
    calls = [
        ToolCall("c0", "read_file", {"path": "a.txt"}),
        ToolCall("c1", "list_dir", {}),
        ToolCall("c2", "create_file", {"path": "b.txt", "content": "x"}),
        ToolCall("c3", "list_dir", {}),
    ]
    results = asyncio.run(run_tool_batch(surface, calls, ctx))
    assert [r.call_id for r in results] == ["c0", "c1", "c2", "c3"]
    assert not results[0].is_error
    for result in results[1:]:
        assert result.is_error and "internal error (KeyError" in result.content
    finished = [data["call_id"] for event, data in events if event == EventType.TOOL_CALL_RESULT]
    assert sorted(finished) == ["c0", "c1", "c2", "c3"]


@pytest.mark.parametrize(("value", "expected"), [(None, 4), (0, 4), (-3, 4), (1, 1), (4, 4), (8, 8), (9, 8), (100, 8)])
def test_normalize_max_parallel(value: int | None, expected: int) -> None:
    assert normalize_max_parallel(value) == expected


def test_argument_checks_are_reported_with_the_schema(project: Path, tmp_path: Path) -> None:
    ctx = make_ctx(project, tmp_path)
    surface = build_surface("repo")

    def run(args: Any) -> ToolResult:
        return asyncio.run(run_tool_batch(surface, [ToolCall("c", "read_file", args)], ctx))[0]

    wrong = run({"path": 3, "offset": "10", "color": "red"})
    assert wrong.is_error
    assert "'path' must be string (got integer)" in wrong.content
    assert "'offset' must be integer (got string)" in wrong.content
    assert "unknown parameter(s) 'color'" in wrong.content
    assert "Parameters: path (string, required), offset (integer), limit (integer)" in wrong.content
    assert "missing required parameter 'path'" in run({}).content
    (project / "n.txt").write_text("x\n")
    assert not run({"path": "n.txt", "offset": None}).is_error  # null optional arguments are dropped
