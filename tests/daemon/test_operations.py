"""What the operator of a long-lived daemon runs into: a removed runtime dir, SIGHUP, a shared state home,
a damaged state.db."""

from __future__ import annotations

import asyncio
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.daemon_harness import DaemonProcess, arun, collect_turn, of_type, script, submit, wait_until
from yagent.ipc.messages import Ack, Answer, ListTasks, TaskList
from yagent.ipc.vocabulary import EventType

pytestmark = pytest.mark.e2e


def test_a_removed_runtime_dir_makes_the_daemon_say_so_and_exit_for_a_restart(make_daemon) -> None:
    daemon = make_daemon()
    shutil.rmtree(daemon.runtime)  # what systemd-logind does to /run/user/UID at logout
    try:
        code = daemon.proc.wait(30)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"yagentd kept running without its runtime dir; log:\n{daemon.log_tail()}") from None
    assert code == 1  # non-zero: Restart=on-failure brings up a daemon clients can reach
    log = daemon.log_path.read_text()
    assert f"the control socket {daemon.runtime / 'control.sock'} was removed" in log
    assert "yagent daemon start" in log
    assert "yagentd stopped" in log  # the orderly shutdown ran


def test_sighup_reopens_logs_and_keeps_the_daemon_serving(make_daemon) -> None:
    daemon = make_daemon()
    rotated = daemon.home / "logs" / "yagentd.log.1"
    (daemon.home / "logs" / "yagentd.log").rename(rotated)  # logrotate moves the file, then sends SIGHUP
    daemon.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: (daemon.home / "logs" / "yagentd.log").exists()
               or daemon.proc.poll() is not None, 15, "the log file reopened after SIGHUP")
    assert daemon.proc.poll() is None, daemon.log_tail()
    assert "SIGHUP: log files reopened" in (daemon.home / "logs" / "yagentd.log").read_text()
    assert daemon.status().pid == daemon.proc.pid


def test_a_second_daemon_on_the_same_home_with_another_runtime_dir_exits_2(make_daemon) -> None:
    first = make_daemon()
    other_runtime = Path(tempfile.mkdtemp(prefix="yg-", dir="/tmp")) / "run"
    try:
        env = {**first.env, "YAGENT_RUNTIME_DIR": str(other_runtime)}
        second = subprocess.run([sys.executable, "-m", "yagent.daemon.main"], env=env, capture_output=True,
                                text=True, timeout=30)
    finally:
        shutil.rmtree(other_runtime.parent, ignore_errors=True)
    assert second.returncode == 2, second.stderr
    assert f"pid {first.proc.pid}" in second.stderr
    assert f"already uses the state home {first.home}" in second.stderr
    assert f"YAGENT_RUNTIME_DIR={first.runtime} yagent daemon stop" in second.stderr
    assert first.status().pid == first.proc.pid


def test_a_damaged_state_db_is_refused_with_what_to_do(make_daemon) -> None:
    daemon: DaemonProcess = make_daemon(start=False)
    db = daemon.home / "state.db"
    db.write_bytes(b"this is not an sqlite database, it was overwritten by accident\n" * 100)
    result = subprocess.run([sys.executable, "-m", "yagent.daemon.main"], env=daemon.env, capture_output=True,
                            text=True, timeout=30)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr, result.stderr
    assert f"cannot open the task registry {db}" in result.stderr
    assert f"mv {db} {db}.broken" in result.stderr
    assert not (daemon.runtime / "control.sock").exists()

    db.rename(db.with_name("state.db.broken"))  # following the advice works
    daemon.start()
    assert daemon.status().pid == daemon.proc.pid


def test_a_locked_state_db_delays_the_records_but_never_the_turn(make_daemon, project: Path) -> None:
    daemon = make_daemon()
    other = sqlite3.connect(daemon.home / "state.db", isolation_level=None)  # a backup, an `sqlite3` shell

    async def go():
        async with daemon.client() as a, daemon.client() as b:
            sub = await submit(a, project, script({"ask": {"kind": "confirm", "prompt": "Go on?"}}))

            async def answer(ev):
                if ev.type == EventType.USER_HELP_NEEDED:
                    other.execute("BEGIN IMMEDIATE")  # holds the write lock until COMMIT
                    await b.request(Answer(id=0, task=sub.task, request_id=ev.data["request_id"],
                                           answer={"value": "yes"}), Ack)

            events = await collect_turn(a, sub.task, on_event=answer)
            while_locked = {t.task: t.state for t in (await a.request(ListTasks(id=0), TaskList)).tasks}
            other.execute("COMMIT")
            deadline = asyncio.get_running_loop().time() + 20
            while True:  # the deferred updates are written once the lock is gone
                states = {t.task: t.state for t in (await a.request(ListTasks(id=0), TaskList)).tasks}
                if states[sub.task] == "done" or asyncio.get_running_loop().time() > deadline:
                    break
                await asyncio.sleep(0.1)
            again = await submit(a, project, script({"mark": "second"}), task=sub.task)
            await collect_turn(a, sub.task, turn=again.turn)
            return events, while_locked[sub.task], states[sub.task]

    try:
        events, while_locked, after = arun(go())
    finally:
        other.close()
    finished = of_type(events, EventType.TURN_FINISHED)
    assert finished and finished[0].data["state"] == "done"  # the turn ended for its followers regardless
    assert '"value": "yes"' in finished[0].data["output"]
    assert while_locked != "done"  # the row really could not be written
    assert after == "done", daemon.log_tail()
    log = daemon.log_path.read_text()
    assert "cannot write the task registry" in log and "writable again" in log
    assert daemon.proc.poll() is None


def test_listing_tasks_reads_no_event_logs_and_refuses_a_limit_below_one(make_daemon, project: Path) -> None:
    daemon = make_daemon()

    async def finish_tasks() -> list[str]:
        async with daemon.client() as c:
            ids = []
            for i in range(3):
                sub = await submit(c, project, script({"emit": 5}, output=f"t{i}"))
                await collect_turn(c, sub.task)
                ids.append(sub.task)
            return ids

    ids = arun(finish_tasks())
    assert daemon.terminate() == 0
    logs = {t: daemon.home / "events" / f"{t}.log" for t in ids}
    for path in logs.values():  # a torn tail, as a crash mid-write leaves it
        with path.open("ab") as fh:
            fh.write(b"\xdc\x00")
    sizes = {t: p.stat().st_size for t, p in logs.items()}
    daemon.notifications.clear()  # wait for the new daemon's READY=1, not the old one's
    daemon.start()

    async def listing():
        async with daemon.client() as c:
            listed = await c.request(ListTasks(id=0, limit=10), TaskList)
            with pytest.raises(Exception) as refused:
                await c.request(ListTasks(id=0, limit=0), TaskList)
            return listed, refused.value

    listed, refused = arun(listing())
    assert {t.task for t in listed.tasks} == set(ids)
    assert all(t.state == "done" and t.last_seq > 5 for t in listed.tasks)  # from the registry's record
    # `yagent ps` over thousands of old tasks must not scan (or repair) thousands of logs.
    assert {t: p.stat().st_size for t, p in logs.items()} == sizes
    assert "limit must be at least 1 (got 0)" in str(refused)
