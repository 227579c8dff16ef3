"""An MCP tool call through worker → daemon → server and back, against a direct SDK call to the same server
program in the same run; and the daemon's memory per idle MCP server.

Target: the route through the daemon adds at most 1 ms at p50. Both sides call the toolbox's `echo` over stdio;
the routed calls are made by a real worker (the scripted agent kind) over its channel, the direct ones by an SDK
`ClientSession` in this process. Memory: the daemon's RSS before and after N idle toolbox servers come up.
Usage: python bench/mcp_call.py [CALLS] [IDLE_SERVERS]
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from mcp import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

from tests.daemon_harness import DaemonProcess, collect_turn, script, submit  # noqa: E402
from tests.mcp.servers import TOOLBOX, toolbox_table  # noqa: E402
from yagent.ipc.messages import McpStatusReply, McpStatusRequest  # noqa: E402
from yagent.ipc.vocabulary import EventType, McpState  # noqa: E402


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f} ms"


def percentiles(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return statistics.median(ordered), ordered[int(len(ordered) * 0.95) - 1]


async def direct_calls(state: Path, n: int) -> list[float]:
    params = StdioServerParameters(command=sys.executable, args=[str(TOOLBOX), "--state", str(state)])
    latencies = []
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await session.list_tools()
        for _ in range(20):  # warm-up, as the routed side has its own
            await session.call_tool("echo", {"text": "ping"})
        for _ in range(n):
            began = time.perf_counter()
            await session.call_tool("echo", {"text": "ping"})
            latencies.append(time.perf_counter() - began)
    return latencies


async def routed_calls(daemon: DaemonProcess, project: Path, n: int) -> list[float]:
    async with daemon.client(timeout=120) as client:
        steps = [{"mcp": {"server": "tb", "tool": "echo", "arguments": {"text": "ping"}, "times": 20}},
                 {"mcp": {"server": "tb", "tool": "echo", "arguments": {"text": "ping"}, "times": n}}]
        sub = await submit(client, project, script(*steps))
        events = await collect_turn(client, sub.task)
    finished = [e for e in events if e.type == EventType.TURN_FINISHED][0]
    notes = json.loads(finished.data["output"])["notes"]
    return notes[1]["mcp"]["latencies"]


async def ready_servers(daemon: DaemonProcess, project: Path, count: int) -> int:
    async with daemon.client(timeout=60) as client:
        await submit(client, project, script())
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            reply = await client.request(McpStatusRequest(id=0, project=str(project)), McpStatusReply)
            up = [s for s in reply.servers if s.state == McpState.READY and s.project == str(project)]
            if len(up) >= count:
                return len(up)
            await asyncio.sleep(0.2)
    raise SystemExit("the idle servers did not come up within 120 s")


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    idle = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    root = Path(tempfile.mkdtemp(prefix="ygb-mcp-"))
    direct = asyncio.run(direct_calls(root / "direct", n))
    project = root / "project"
    project.mkdir()
    config = toolbox_table("tb", root / "tb", extra="required = true")
    daemon = DaemonProcess(root / "d", config).start()
    try:
        routed = asyncio.run(routed_calls(daemon, project, n))
    finally:
        daemon.close()
    d50, d95 = percentiles(direct)
    r50, r95 = percentiles(routed)
    print(f"tool call, {n} calls of echo over stdio (p50 / p95):")
    print(f"  direct SDK session:           {ms(d50)} / {ms(d95)}")
    print(f"  worker → daemon → server:     {ms(r50)} / {ms(r95)}")
    print(f"  added at p50: {ms(r50 - d50)} (target ≤ 1 ms); ratio routed/direct at p50: {r50 / d50:.2f}")

    one = idle_memory(root, 1)
    many = idle_memory(root, idle)
    per_server = (many[1] - one[1]) / (idle - 1)
    print(f"daemon memory: {one[0] / 2**20:.1f} MiB with no server; the first idle server (and the MCP SDK it "
          f"loads) {(one[1] - one[0]) / 2**20:.1f} MiB; each further idle server {per_server / 2**20:.2f} MiB "
          f"({idle} servers: {many[1] / 2**20:.1f} MiB)")


def idle_memory(root: Path, count: int) -> tuple[int, int]:
    """The daemon's RSS before any server, and once `count` idle toolbox servers are ready."""
    project = root / f"idle{count}"
    project.mkdir()
    config = "".join(toolbox_table(f"tb{i}", root / f"s{count}-{i}") for i in range(count))
    daemon = DaemonProcess(root / f"m{count}", config).start()
    try:
        proc = psutil.Process(daemon.proc.pid)
        before = proc.memory_info().rss
        asyncio.run(ready_servers(daemon, project, count))
        time.sleep(1.0)  # the listings' garbage goes before the figure is read
        return before, proc.memory_info().rss
    finally:
        daemon.close()


if __name__ == "__main__":
    main()
