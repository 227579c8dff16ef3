"""A run's MCP requests (`daemon/mcp_run_requests.py`): answered off the loop, refused past the in-flight cap,
withdrawn by the worker or by the run's end, and the caller's deadline never taken from a hostile value."""

from __future__ import annotations

import asyncio

from tests.daemon_harness import arun
from yagent.daemon.mcp_errors import McpUnavailable
from yagent.daemon.mcp_run_requests import MAX_CALLS_IN_FLIGHT, McpRunRequests
from yagent.daemon.task_scope import TaskScope
from yagent.ipc.messages import ErrorReply, McpCall, McpCallResult, McpCancel
from yagent.ipc.records import Message
from yagent.ipc.vocabulary import ErrorCode


class Run:
    id = "r1"
    project_id = "p1"

    def __init__(self, left: float = 0.0) -> None:
        self.sent: list[Message] = []
        self.waits = 0
        self.left = left
        self.replied = asyncio.Event()

    def send(self, msg: Message) -> None:
        self.sent.append(msg)
        self.replied.set()

    def time_left(self) -> float:
        return self.left

    def wait_began(self, reason: str) -> None:
        self.waits += 1

    def wait_ended(self, reason: str) -> None:
        self.waits -= 1


class Manager:
    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.cancelled = 0
        self.timeouts: list[float] = []

    async def call(self, project_id: str, server: str, tool: str, arguments: dict, *, timeout: float):
        self.timeouts.append(timeout)
        if server == "gone":
            raise McpUnavailable("no such server")
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        return f"{tool} done", False


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_calls_past_the_cap_are_refused_and_withdrawn_or_ended_calls_are_cancelled() -> None:
    async def go() -> None:
        run, manager = Run(), Manager()
        requests = McpRunRequests(run, manager, TaskScope("test"))  # type: ignore[arg-type]
        for i in range(MAX_CALLS_IN_FLIGHT + 2):
            requests.call(McpCall(id=i + 1, server="s", tool="t"))
        await _settle()
        refused = [m for m in run.sent if isinstance(m, ErrorReply)]
        assert [m.id for m in refused] == [MAX_CALLS_IN_FLIGHT + 1, MAX_CALLS_IN_FLIGHT + 2]
        assert refused[0].code == ErrorCode.BAD_REQUEST and run.waits == MAX_CALLS_IN_FLIGHT
        requests.call(McpCall(id=1, server="s", tool="t"))  # an id already in flight
        assert isinstance(run.sent[-1], ErrorReply) and "already in flight" in run.sent[-1].message
        requests.cancel(McpCancel(call=1))
        requests.cancel(McpCancel(call=999_999))  # a call it never made: nothing
        await _settle()
        assert manager.cancelled == 1 and len(requests) == MAX_CALLS_IN_FLIGHT - 1
        requests.close()
        await _settle()
        assert manager.cancelled == MAX_CALLS_IN_FLIGHT and len(requests) == 0 and run.waits == 0
        assert not [m for m in run.sent if isinstance(m, McpCallResult)]  # nobody waits for their results
        requests.call(McpCall(id=500, server="s", tool="t"))
        assert isinstance(run.sent[-1], ErrorReply) and "ending" in run.sent[-1].message

    arun(go())


def test_a_call_is_answered_and_an_unavailable_server_is_an_error_result() -> None:
    async def go() -> None:
        run, manager = Run(), Manager()
        manager.release.set()
        requests = McpRunRequests(run, manager, TaskScope("test"))  # type: ignore[arg-type]
        requests.call(McpCall(id=1, server="s", tool="t"))
        requests.call(McpCall(id=2, server="gone", tool="t"))
        requests.call(McpCall(id=3, server="", tool="t"))
        await _settle()
        by_id = {m.id: m for m in run.sent}
        assert by_id[1] == McpCallResult(id=1, content="t done", is_error=False)
        assert by_id[2] == McpCallResult(id=2, content="no such server", is_error=True)
        assert isinstance(by_id[3], ErrorReply) and by_id[3].code == ErrorCode.BAD_REQUEST

    arun(go())


def test_the_deadline_is_the_callers_bounded_by_the_runs_own_and_hostile_values_mean_none() -> None:
    async def go() -> None:
        manager = Manager()
        manager.release.set()
        for asked, left, expected in ((float("nan"), 0.0, 0.0), (float("inf"), 0.0, 0.0), (-5.0, 0.0, 0.0),
                                      (1e300, 0.0, 0.0), (30.0, 0.0, 30.0), (30.0, 10.0, 10.0), (0.0, 7.0, 7.0)):
            run = Run(left)
            requests = McpRunRequests(run, manager, TaskScope("test"))  # type: ignore[arg-type]
            requests.call(McpCall(id=1, server="s", tool="t", timeout=asked))
            await _settle()
            assert manager.timeouts[-1] == expected, (asked, left)

    arun(go())


def test_without_an_mcp_manager_every_request_is_refused_saying_so() -> None:
    async def go() -> None:
        run = Run()
        requests = McpRunRequests(run, None, TaskScope("test"))  # type: ignore[arg-type]
        requests.call(McpCall(id=1, server="s", tool="t"))
        assert isinstance(run.sent[0], ErrorReply) and run.sent[0].code == ErrorCode.MCP_UNAVAILABLE

    arun(go())
