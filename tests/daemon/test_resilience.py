"""Process death, restarts, shutdown and single-instance locking."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tests.daemon_harness import DaemonProcess, arun, collect_turn, of_type, script, submit
from yagent.ipc import EventStream
from yagent.ipc.messages import Ack, Answer, ListTasks, TaskList
from yagent.ipc.vocabulary import EventType

pytestmark = pytest.mark.e2e


def test_workers_exit_when_the_daemon_is_killed_and_the_restart_marks_runs_interrupted(
        make_daemon, project: Path, tmp_path: Path) -> None:
    daemon = make_daemon("[daemon]\nheartbeat_interval = \"0.2s\"\ndaemon_loss_timeout = \"2s\"\n")
    child = script({"busy": 600})

    async def start():
        async with daemon.client() as c:
            sub = await submit(c, project, script({"delegate": [{"agent": "scripted", "task": child}]}))
            pids = {}
            async with EventStream(c, sub.task) as stream:
                async for ev in stream.events():
                    if ev.type == EventType.RUN_STARTED:
                        pids[ev.run] = ev.data["pid"]
                        if len(pids) == 2:
                            return sub, pids
            raise AssertionError("stream ended")

    sub, pids = arun(start())
    workers = [psutil.Process(p) for p in pids.values()]
    daemon.proc.send_signal(signal.SIGKILL)
    daemon.proc.wait(10)
    _gone, alive = psutil.wait_procs(workers, timeout=15)
    assert alive == [], f"workers outlived the daemon: {alive}"

    again = make_daemon(root=daemon.root, start=False)
    again.home = daemon.home
    again.runtime = daemon.runtime
    again.start()

    async def listing():
        async with again.client() as c:
            return await c.request(ListTasks(id=0), TaskList)

    tasks = arun(listing()).tasks
    task = [t for t in tasks if t.task == sub.task][0]
    assert task.state == "interrupted"
    assert {r.run: (r.status, r.stop_reason) for r in task.runs} == {
        run: ("interrupted", "interrupted") for run in pids}

    # A client following the task from the start is told the turn ended, rather than waiting forever.
    async def follow():
        async with again.client() as c:
            return await collect_turn(c, sub.task, turn=1)

    events = arun(follow(), timeout=30)
    finished = of_type(events, EventType.TURN_FINISHED)
    assert [e.data["state"] for e in finished] == ["interrupted"]
    assert {e.run: e.data["stop_reason"] for e in of_type(events, EventType.RUN_FINISHED)} == {
        run: "interrupted" for run in pids}
    seqs = [e.seq for e in events]
    assert seqs == sorted(set(seqs))


def test_sigterm_shuts_down_gracefully_and_interrupts_runs(make_daemon, project: Path) -> None:
    daemon = make_daemon("[daemon]\nstop_grace = \"1s\"\n")

    async def start():
        async with daemon.client() as c:
            sub = await submit(c, project, script({"spawn": "sleep 1000"}, {"busy": 600}))
            async with EventStream(c, sub.task) as stream:
                async for ev in stream.events():
                    if ev.type == "spawned":
                        return sub, ev.data["pid"]
            raise AssertionError("stream ended")

    sub, tool_pid = arun(start())
    code = daemon.terminate(timeout=30)
    assert code == 0
    assert not psutil.pid_exists(tool_pid) or psutil.Process(tool_pid).status() == psutil.STATUS_ZOMBIE
    again = DaemonProcess(daemon.root, "")
    again.home, again.runtime = daemon.home, daemon.runtime
    try:
        again.start()

        async def listing():
            async with again.client() as c:
                return await c.request(ListTasks(id=0), TaskList)

        task = [t for t in arun(listing()).tasks if t.task == sub.task][0]
        assert task.state == "interrupted"
        assert task.runs[0].stop_reason == "interrupted"
    finally:
        again.close()


def test_a_second_daemon_exits_2_naming_the_holder(make_daemon) -> None:
    first = make_daemon()
    second = subprocess.run([sys.executable, "-m", "yagent.daemon.main"], env=first.env, capture_output=True,
                            text=True, timeout=30)
    assert second.returncode == 2
    assert f"pid {first.proc.pid}" in second.stderr
    assert "already running" in second.stderr
    assert first.status().pid == first.proc.pid  # the first one still owns its sockets


def test_a_stale_lock_from_a_dead_pid_is_taken_over(make_daemon) -> None:
    daemon = make_daemon(start=False)
    daemon.runtime.mkdir(mode=0o700)
    dead = subprocess.Popen(["true"])
    dead.wait()
    (daemon.runtime / "yagentd.lock").write_text(f"{dead.pid}\n")
    daemon.start()
    assert daemon.status().pid == daemon.proc.pid
    assert (daemon.runtime / "yagentd.lock").read_text().strip() == str(daemon.proc.pid)


def test_an_unsafe_runtime_dir_is_refused(make_daemon) -> None:
    daemon = make_daemon(start=False)
    daemon.runtime.mkdir(mode=0o755)
    os.chmod(daemon.runtime, 0o755)
    result = subprocess.run([sys.executable, "-m", "yagent.daemon.main"], env=daemon.env, capture_output=True,
                            text=True, timeout=30)
    assert result.returncode == 2
    assert "accessible by group or others" in result.stderr
    assert f"chmod 700 {daemon.runtime}" in result.stderr
    assert not (daemon.runtime / "control.sock").exists()


def test_a_broken_config_prints_three_lines_and_exits_2(make_daemon) -> None:
    daemon = make_daemon(start=False)
    (daemon.home / "config" / "config.toml").write_text("[agent\nbroken = ")
    result = subprocess.run([sys.executable, "-m", "yagent.daemon.main"], env=daemon.env, capture_output=True,
                            text=True, timeout=30)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 3
    assert lines[0].startswith("configuration error: TOML syntax error")
    assert lines[1] == f"file: {daemon.home / 'config' / 'config.toml'}"
    assert "yagent setup" in lines[2]


def test_late_client_replays_every_event_without_gaps(make_daemon, project: Path) -> None:
    # A ring far smaller than the stream forces the older part to come from the log on disk.
    daemon = make_daemon("[daemon]\nevent_ring = 100\n")

    async def go():
        async with daemon.client() as c:
            sub = await submit(c, project, script({"emit": 3000}, {"emit": 500, "type": "thinking"}))
            await collect_turn(c, sub.task)
        async with daemon.client() as late:
            return await collect_turn(late, sub.task)

    events = arun(go())
    seqs = [e.seq for e in events]
    assert seqs == list(range(1, len(seqs) + 1))
    assert len(of_type(events, EventType.AI_CHUNK)) == 3000
    assert [e.data["i"] for e in of_type(events, "thinking")] == list(range(500))


def test_a_slow_subscriber_loses_nothing(make_daemon, project: Path) -> None:
    daemon = make_daemon("[daemon]\npub_hwm = 4\n")
    async def go():
        async with daemon.client() as c:
            # The stream starts once the subscriber has seen the question, so it goes live, not all by replay.
            sub = await submit(c, project, script({"ask": {"prompt": "go?"}}, {"emit": 20000, "size": 64}))
            got = []
            async with EventStream(c, sub.task, rcvhwm=2) as stream:
                async for ev in stream.events():
                    if ev.type == EventType.USER_HELP_NEEDED:
                        await c.request(Answer(id=0, task=sub.task, request_id=ev.data["request_id"],
                                               answer={"value": "go"}), Ack)
                    if len(got) == 10:
                        # Stall the consumer so the tiny receive queue overflows and PUB drops frames.
                        await asyncio.sleep(1.0)
                    got.append(ev)
                    if ev.type == EventType.TURN_FINISHED:
                        # Dropped frames come back by a gap fill, or, when the stream ended during the stall,
                        # by the replay of a quiet stream's tail.
                        return got, stream.gap_fills + stream.tail_fills

    got, refills = arun(go(), timeout=120)
    seqs = [e.seq for e in got]
    assert seqs == list(range(1, len(seqs) + 1))
    assert len(of_type(got, EventType.AI_CHUNK)) == 20000
    assert refills >= 1, "no frame was dropped: the test did not exercise filling what PUB dropped"


def test_detached_tool_processes_die_with_a_run_that_ended_normally(make_daemon, project: Path) -> None:
    daemon = make_daemon()
    text = script({"spawn": "sleep 1000", "keep": True}, output="left a process behind")

    async def go():
        async with daemon.client() as c:
            sub = await submit(c, project, text)
            return await collect_turn(c, sub.task)

    events = arun(go())
    assert of_type(events, EventType.TURN_FINISHED)[0].data["status"] == "done"
    pid = of_type(events, "spawned")[0].data["pid"]
    _gone, alive = psutil.wait_procs([psutil.Process(pid)], timeout=15)
    assert [p for p in alive if p.status() != psutil.STATUS_ZOMBIE] == []
