"""Floods against a daemon in this process (so the tests read its own accounting).

A client that floods control.sock and never reads its replies, with real workers running beside it: the
flooder's cost stays bounded, it is dropped and later heard again, and a polite client and a running task
never notice. And frames that never stop coming, on either socket, never starve the loop."""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import zmq
import zmq.asyncio

from tests.daemon.seams import ScriptedLauncher
from tests.daemon_harness import REPO, collect_turn, of_type, script, submit
from yagent.daemon.arbiter import Daemon
from yagent.daemon.control_peers import PeerLimits
from yagent.daemon.launcher import Launcher, MultiprocessingLauncher
from yagent.daemon.sd_notify import SystemdNotifier
from yagent.ipc import DaemonClient
from yagent.ipc.config import Settings
from yagent.ipc.messages import DaemonStatus, Heartbeat, StatusRequest
from yagent.ipc.records import encode
from yagent.ipc.runtime_dir import RuntimePaths, ensure_runtime_dir
from yagent.ipc.vocabulary import EventType, RunStatus

pytestmark = pytest.mark.e2e

AGENTS = ("tests.agents.scripted",)
# Short enough that the flooder goes through being refused, dropped and heard again while the run lasts.
LIMITS = PeerLimits(stall=1.5, drop_period=1.5)


async def _until(predicate, timeout: float, what: str) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.02)
    assert predicate(), what


@asynccontextmanager
async def _daemon(tmp_path: Path, launcher: Launcher | None = None) -> AsyncIterator[Daemon]:
    short = Path(tempfile.mkdtemp(prefix="yg-", dir="/tmp"))
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(str(short / "notify.sock"))
    notify.setblocking(False)
    home = tmp_path / "home"
    home.mkdir()
    # Pings every 0.25 s, and a worker gives its daemon up after 3 s without one: a loop starved by the
    # flood for that long costs the run its worker.
    settings = Settings(heartbeat_interval=0.25, daemon_loss_timeout=3.0, agent_modules=AGENTS)
    launcher = launcher or MultiprocessingLauncher("spawn", preload=AGENTS)  # no forkserver left behind in pytest
    daemon = Daemon(settings, ensure_runtime_dir(short / "run"), home, launcher,
                    notifier=SystemdNotifier({"NOTIFY_SOCKET": str(short / "notify.sock")}), peer_limits=LIMITS)
    serving = asyncio.create_task(daemon.serve())
    try:
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(30):
            while "READY=1" not in (await loop.sock_recv(notify, 4096)).decode():
                pass
        yield daemon
    finally:
        daemon.request_shutdown()
        async with asyncio.timeout(30):
            await serving
        notify.close()
        shutil.rmtree(short, ignore_errors=True)


def _flooder(paths: RuntimePaths, kind: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-m", "tests.daemon.hostile_peer", RuntimePaths.endpoint(paths.control),
                             kind, "90"], cwd=REPO, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "flooding"
    return proc


@pytest.mark.parametrize("kind", ["status", "garbage"])
def test_a_client_that_floods_and_never_reads_costs_a_bounded_queue_and_nobody_else_notices(
        tmp_path: Path, project: Path, kind: str) -> None:
    async def main() -> tuple[Daemon, list[float], list, int]:
        async with _daemon(tmp_path) as daemon:
            peers = daemon.peers
            flooder = _flooder(daemon.paths, kind)
            try:
                await _until(lambda: peers.refused > 0, 30, "the flooder reaching its in-flight limit")
                async with DaemonClient(daemon.paths.root, timeout=10) as polite:
                    sub = await submit(polite, project, script({"busy": 6}, output="kept its worker"))
                    turn = asyncio.create_task(collect_turn(polite, sub.task))
                    round_trips: list[float] = []
                    drops_seen = 0
                    # Ask until the run is over and the flooder was dropped twice (heard again in between).
                    async with asyncio.timeout(60):
                        while not turn.done() or drops_seen < 2:
                            started = time.monotonic()
                            await polite.request(StatusRequest(id=0), DaemonStatus)  # 10 s: generous
                            round_trips.append(time.monotonic() - started)
                            drops_seen = peers.drops
                            await asyncio.sleep(0.01)
                    events = await turn
                return daemon, round_trips, events, drops_seen
            finally:
                flooder.kill()
                flooder.wait(10)

    daemon, round_trips, events, drops = asyncio.run(main())
    finished = of_type(events, EventType.RUN_FINISHED)
    assert [e.data["status"] for e in finished] == [RunStatus.DONE], finished
    assert of_type(events, EventType.TURN_FINISHED)[0].data["output"] == "kept its worker"
    assert len(round_trips) > 10 and drops >= 2
    peers = daemon.peers
    # The flooder's whole cost: never more than its in-flight replies and a few refusals queued here.
    assert peers.refused > 0
    assert peers.peak_queued <= LIMITS.max_in_flight + LIMITS.spare
    assert peers.peak_queued_bytes <= 64 * 1024


@pytest.mark.parametrize("socket_name", ["control", "workers"])
def test_frames_that_never_stop_coming_never_starve_the_loop(tmp_path: Path, socket_name: str) -> None:
    # A receive that finds a frame waiting completes without yielding to the loop; a socket loop that does
    # not yield by itself then runs no timer (worker pings) and no other socket for as long as frames come.
    frames = 5000

    async def main() -> int:
        async with _daemon(tmp_path, ScriptedLauncher()) as daemon:
            loop = asyncio.get_running_loop()
            sock = daemon._control if socket_name == "control" else daemon._workers
            real = sock.recv_multipart
            frame = encode(StatusRequest(id=1)) if socket_name == "control" else encode(Heartbeat())
            served = 0

            def always_waiting():
                nonlocal served
                served += 1
                if served > frames:
                    return real()
                ready = loop.create_future()
                ready.set_result([b"\x00gone", frame])
                return ready

            sock.recv_multipart = always_waiting  # taken by the receive after the pending one
            ctx = zmq.asyncio.Context()
            waker = ctx.socket(zmq.DEALER)
            waker.connect(RuntimePaths.endpoint(daemon.paths.control if socket_name == "control"
                                                else daemon.paths.workers))
            try:
                await waker.send(frame)  # completes the pending receive; the loop then takes the endless ones
                async with asyncio.timeout(30):
                    while not served:
                        await asyncio.sleep(0.001)
                at_our_turn = served
            finally:
                waker.close(0)
                ctx.term()
            async with asyncio.timeout(60):
                while served <= frames:
                    await asyncio.sleep(0.01)
            return at_our_turn

    at_our_turn = asyncio.run(main())
    assert at_our_turn < frames // 2, f"the loop ran nothing else for {at_our_turn} {socket_name} frames"
