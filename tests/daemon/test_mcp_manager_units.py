"""The MCP manager (`daemon/mcp_manager.py`) and the start-up sweep (`daemon/mcp_leftovers.py`) with real server
processes and a real state.db: approvals of a project's .mcp.json, the idle TTL, disabling, and the kill of
every server at exit — one still starting included — and of what a dead daemon left."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import psutil

from tests.daemon_harness import arun, wait_until
from tests.mcp.servers import TOOLBOX
from yagent.daemon.mcp_leftovers import MARKER_ENV, kill_leftover_servers
from yagent.daemon.mcp_manager import McpManager
from yagent.daemon.process_identity import start_time
from yagent.daemon.registry import LeftoverMcpServer, Registry
from yagent.daemon.schedule import Scheduler
from yagent.ipc.mcp_settings import McpServerConfig, McpSettings
from yagent.ipc.vocabulary import McpState


def _toolbox(name: str, state: Path, mode: str = "normal", **kw: object) -> McpServerConfig:
    return McpServerConfig(name=name, command=sys.executable,
                           args=(str(TOOLBOX), "--state", str(state), "--mode", mode), **kw)  # type: ignore[arg-type]


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


@asynccontextmanager
async def managed(tmp_path: Path, settings: list[McpSettings]) -> AsyncIterator[tuple[McpManager, Registry]]:
    registry = Registry(tmp_path / "state.db")
    manager = McpManager(registry, Scheduler(), lambda: settings[0])
    serving = asyncio.create_task(manager.serve())
    await asyncio.sleep(0)  # its task group exists from its first step
    try:
        yield manager, registry
    finally:
        await manager.close()
        serving.cancel()
        try:
            await serving
        except asyncio.CancelledError:
            pass
        registry.close()


async def _gone(pid: int, what: str) -> None:
    """Wait (on the loop, bounded) until a server process has ended: the manager must run meanwhile."""
    async with asyncio.timeout(15):
        while _alive(pid):
            await asyncio.sleep(0.02)


async def _until(manager: McpManager, key: tuple[str, str], predicate) -> None:
    async with asyncio.timeout(20):
        while key not in manager.servers:
            await asyncio.sleep(0.01)  # the table changes synchronously within one call; bounded above
        await manager.servers[key].until(predicate)


def test_a_projects_mcp_json_servers_start_only_once_approved_as_the_file_has_them(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    entry = {"command": sys.executable, "args": [str(TOOLBOX), "--state", str(tmp_path / "s")]}
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"box": entry}}))

    async def go() -> None:
        async with managed(tmp_path, [McpSettings()]) as (manager, registry):
            manager.project_in_use("p1", str(project))
            assert ("p1", "box") not in manager.servers
            shown, _ = manager.statuses("p1", str(project))
            assert [(s.server, s.state) for s in shown] == [("box", McpState.DISABLED)]
            assert "yagent mcp approve box" in shown[0].fix
            assert manager.approve("p1", str(project), [], True) == ["box"]
            await _until(manager, ("p1", "box"), lambda s: s.state is McpState.READY)
            first = manager.servers[("p1", "box")].pid
            # An edited entry is not what was approved: it stops at the next turn and waits for approval again.
            (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"box": {**entry, "env": {"X": "1"}}}}))
            manager.project_in_use("p1", str(project))
            assert ("p1", "box") not in manager.servers
            await _gone(first, "the unapproved server")
            manager.approve("p1", str(project), ["box"], True)
            await _until(manager, ("p1", "box"), lambda s: s.state is McpState.READY)
            manager.approve("p1", str(project), ["box"], False)
            assert ("p1", "box") not in manager.servers and registry.mcp_approvals("p1") == {}

    arun(go(), 90)


def test_two_projects_get_two_instances_and_an_idle_project_stops_after_its_ttl(tmp_path: Path) -> None:
    settings = [McpSettings(idle_ttl=0.2, servers=(_toolbox("tb", tmp_path / "s"),))]
    for name in ("one", "two"):
        (tmp_path / name).mkdir()

    async def go() -> None:
        async with managed(tmp_path, settings) as (manager, registry):
            manager.project_in_use("p1", str(tmp_path / "one"))
            manager.project_in_use("p2", str(tmp_path / "two"))
            for key in (("p1", "tb"), ("p2", "tb")):
                await _until(manager, key, lambda s: s.state is McpState.READY)
            pids = {key: s.pid for key, s in manager.servers.items()}
            assert len(set(pids.values())) == 2
            assert {(r.project_id, r.pid) for r in registry.mcp_leftovers()} == {(k[0], p) for k, p in pids.items()}
            idle_server = manager.servers[("p1", "tb")]
            (life,) = [task for task, server in manager._alive.items() if server is idle_server]
            manager.project_idle("p1")
            await _gone(pids[("p1", "tb")], "the idle project's server")
            async with asyncio.timeout(15):  # the signal: the server's life in the manager has ended
                await asyncio.wait({life})
            assert ("p1", "tb") not in manager.servers and _alive(pids[("p2", "tb")])
            assert {r.project_id for r in registry.mcp_leftovers()} == {"p2"}  # its record went with it
            settings[0] = dataclasses.replace(settings[0], servers=(_toolbox("tb", tmp_path / "s", enabled=False),))
            manager.project_in_use("p2", str(tmp_path / "two"))
            await _gone(pids[("p2", "tb")], "the disabled server")

    arun(go(), 90)


def test_closing_kills_every_server_one_still_starting_and_one_that_ignores_its_stdin_included(tmp_path: Path) -> None:
    settings = [McpSettings(servers=(_toolbox("stuck", tmp_path / "stuck", mode="never-init"),
                                     _toolbox("linger", tmp_path / "linger", mode="linger")))]

    async def go() -> list[int]:
        async with managed(tmp_path, settings) as (manager, _registry):
            manager.project_in_use("p1", str(tmp_path))
            await _until(manager, ("p1", "linger"), lambda s: s.state is McpState.READY)
            stuck = manager.servers[("p1", "stuck")]
            assert stuck.state is McpState.STARTING
            return [stuck.pid, manager.servers[("p1", "linger")].pid,
                    int((tmp_path / "linger" / "child").read_text())]

    pids = arun(go(), 90)
    assert not any(_alive(pid) for pid in pids)


def _orphan_group(tmp_path: Path, marker: str) -> tuple[int, int]:
    """A server-like process group with a child, orphaned as a dead daemon leaves it (not this process's child,
    which the sweep would take for its own): (the leader's pid, its child's pid)."""
    script = ("import os, subprocess, time; os.setsid(); c = subprocess.Popen(['sleep', '1000']); "
              f"open({str(tmp_path / 'child')!r}, 'w').write(str(c.pid)); "
              f"open({str(tmp_path / 'leader')!r}, 'w').write(str(os.getpid())); time.sleep(1000)")
    subprocess.run(["sh", "-c", f'{sys.executable} -c "$0" &', script], env={**os.environ, MARKER_ENV: marker},
                   check=True)
    wait_until(lambda: (tmp_path / "leader").exists() and (tmp_path / "leader").read_text(), 15, "the orphan")
    return int((tmp_path / "leader").read_text()), int((tmp_path / "child").read_text())


def test_the_start_up_sweep_kills_a_dead_daemons_server_group_and_never_a_process_that_reuses_a_pid(
        tmp_path: Path) -> None:
    marker = uuid.uuid4().hex
    leader, child = _orphan_group(tmp_path, marker)
    bystander = subprocess.Popen(["sleep", "1000"], start_new_session=True)
    try:
        leftovers = [LeftoverMcpServer("p1", "tb", leader, start_time(leader), marker),
                     # A record whose pid now names another process (its start time differs): left alone.
                     LeftoverMcpServer("p1", "old", bystander.pid, start_time(bystander.pid) - 100.0, "marker-x")]
        killed = kill_leftover_servers(leftovers)
        assert set(killed) == {leader, child}
        assert not _alive(leader) and not _alive(child) and _alive(bystander.pid)
    finally:
        bystander.kill()
        bystander.wait()
        for pid in (leader, child):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_the_sweep_finds_what_is_left_of_a_group_whose_leader_is_gone(tmp_path: Path) -> None:
    leader, child = _orphan_group(tmp_path, uuid.uuid4().hex)
    started = start_time(leader)
    os.kill(leader, signal.SIGKILL)
    wait_until(lambda: not psutil.pid_exists(leader), 15, "the leader reaped")  # its child still holds the group
    assert _alive(child)
    assert kill_leftover_servers([LeftoverMcpServer("p1", "tb", leader, started, "")]) == [child]
    assert not _alive(child)


def test_a_daemon_without_mcp_servers_never_loads_the_sdk() -> None:
    probe = ("import sys, yagent.daemon.arbiter, yagent.daemon.main; "
             "print(sorted(m for m in ('mcp', 'mcp_types', 'pydantic', 'httpx2') if m in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"
