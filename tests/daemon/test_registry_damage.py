"""state.db damaged, foreign, lost or old, with a real yagentd: refused at start with what to do, or
survived while running — requests fail with the advice, turns in flight still end, the daemon serves on."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.daemon.test_registry_schema import write_v1_registry
from tests.daemon_harness import DaemonProcess, arun, collect_turn, of_type, script, submit
from yagent.daemon.registry_schema import APPLICATION_ID, SCHEMA_VERSION
from yagent.ipc import EventStream
from yagent.ipc.errors import RemoteError
from yagent.ipc.messages import Ack, Answer, ListTasks, TaskDetail, TaskInfo, TaskList
from yagent.ipc.vocabulary import ErrorCode, EventType

pytestmark = pytest.mark.e2e

PAGE = 4096


def _start_refused(daemon: DaemonProcess) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "yagent.daemon.main"], env=daemon.env, capture_output=True,
                          text=True, timeout=30)


def _damage(db: Path, how: str) -> None:
    """Damage the file under the running daemon, then make it read the damage rather than its page cache."""
    other = sqlite3.connect(db, isolation_level=None)
    try:
        busy, _, _ = other.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        assert busy == 0, "the daemon kept a transaction open"  # everything is in the main file, to be damaged
        with db.open("r+b") as fh:
            if how == "junk_pages":
                fh.seek(PAGE)  # the header page stays: every table's pages go
                fh.write(b"\x5a\xa5 overwritten " * (db.stat().st_size // 16))
            else:
                fh.truncate(PAGE)
        # Another connection's write (a backup tool, an `sqlite3` shell) makes the daemon drop its page
        # cache, as its own next checkpoint would.
        other.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    finally:
        other.close()


@pytest.mark.parametrize("how", ["junk_pages", "truncated"])
def test_a_registry_damaged_under_a_running_daemon_fails_requests_with_advice_and_the_daemon_serves_on(
        make_daemon, project: Path, how: str) -> None:
    daemon = make_daemon()
    db = daemon.home / "state.db"

    async def go():
        async with daemon.client() as c:
            for i in range(5):  # a registry with some pages to damage
                done = await submit(c, project, script({"emit": 3}, output=f"t{i}"))
                await collect_turn(c, done.task)
            sub = await submit(c, project, script({"ask": {"kind": "confirm", "prompt": "Go on?"}}))
            async with EventStream(c, sub.task) as stream:
                async for ev in stream.events():
                    if ev.type == EventType.USER_HELP_NEEDED:
                        question = ev.data["request_id"]
                        break
            _damage(db, how)
            failures = []
            for request in (ListTasks(id=0), TaskInfo(id=0, task=done.task)):
                with pytest.raises(RemoteError) as failed:
                    await c.request(request, TaskList if isinstance(request, ListTasks) else TaskDetail)
                failures.append(failed.value)
            with pytest.raises(RemoteError) as refused_submit:
                await submit(c, project, script({"mark": "never"}))
            failures.append(refused_submit.value)
            # The turn in flight is not the registry's to stop: answered, it ends for its follower.
            await c.request(Answer(id=0, task=sub.task, request_id=question, answer={"value": "yes"}), Ack)
            events = await collect_turn(c, sub.task)
            return failures, events

    failures, events = arun(go())
    for failure in failures:
        assert failure.code == ErrorCode.REGISTRY_UNAVAILABLE, failure
        assert f"task registry {db}" in str(failure)
    if how == "junk_pages":  # SQLite reports this one as damage; a truncation can also read as an I/O error
        assert all("is damaged" in str(f) and f"mv {db} {db}.broken" in str(f) for f in failures)
    finished = of_type(events, EventType.TURN_FINISHED)
    assert [e.data["state"] for e in finished] == ["done"]
    assert daemon.status().pid == daemon.proc.pid  # still serving what does not need the registry
    assert daemon.terminate() == 0, daemon.log_tail()
    assert "Traceback" not in daemon.log_path.read_text()

    refused = _start_refused(daemon)
    assert refused.returncode == 2, refused.stderr
    assert "Traceback" not in refused.stderr
    assert f"cannot open the task registry {db}" in refused.stderr
    assert f"mv {db} {db}.broken" in refused.stderr


@pytest.mark.parametrize("kind", ["foreign", "newer", "lost", "junk_pages"])
def test_a_registry_yagent_cannot_trust_is_refused_at_start_with_what_to_do(make_daemon, kind: str) -> None:
    daemon: DaemonProcess = make_daemon(start=False)
    db = daemon.home / "state.db"
    if kind == "foreign":
        other = sqlite3.connect(db)
        other.executescript("CREATE TABLE bookmarks (url TEXT); INSERT INTO bookmarks VALUES ('https://x');")
        other.close()
        expected, advice = "not yagent's task registry (its tables: bookmarks)", f"mv {db} {db}.broken"
    elif kind == "newer":
        daemon.start()
        daemon.terminate()
        newer = sqlite3.connect(db)
        newer.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 5}")
        newer.close()
        expected, advice = "written by a newer yagent", "upgrade yagent, or set YAGENT_HOME to another directory"
    elif kind == "lost":
        (daemon.home / "events").mkdir()
        (daemon.home / "events" / "t123456789.log").write_bytes(b"\x00")
        db.write_bytes(b"")
        expected, advice = "the registry that was here is lost", "restore state.db from a backup"
    else:
        daemon.start()
        daemon.terminate()
        with db.open("r+b") as fh:
            fh.seek(PAGE)
            fh.write(b"\xff" * PAGE * 3)
        expected, advice = "integrity check failed", f"mv {db} {db}.broken"
    before = db.read_bytes()
    socket = daemon.runtime / "control.sock"
    bound = socket.stat().st_ino if socket.exists() else None  # left by the daemon that ran before, if one did
    result = _start_refused(daemon)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    assert f"cannot open the task registry {db}" in result.stderr and expected in result.stderr, result.stderr
    assert advice in result.stderr
    assert db.read_bytes() == before  # refused files are left exactly as they were
    assert (socket.stat().st_ino if socket.exists() else None) == bound  # nothing was bound


def test_a_registry_from_yagent_0_1_is_upgraded_at_start_and_keeps_every_task(make_daemon, project: Path) -> None:
    daemon: DaemonProcess = make_daemon(start=False)
    db = daemon.home / "state.db"
    write_v1_registry(db, project, tasks=4)
    daemon.start()

    async def look():
        async with daemon.client() as c:
            listed = await c.request(ListTasks(id=0), TaskList)
            detail = await c.request(TaskInfo(id=0, task="t000000002"), TaskDetail)
            again = await submit(c, project, script({"mark": "after the upgrade"}), task="t000000002")
            events = await collect_turn(c, again.task, turn=again.turn)
            return listed, detail, again, events

    listed, detail, again, events = arun(look())
    assert sorted(t.task for t in listed.tasks) == [f"t{i:09d}" for i in range(4)]
    assert {t.task: (t.title, t.last_seq) for t in listed.tasks} == {f"t{i:09d}": (f"title {i}", 7 + i)
                                                                    for i in range(4)}
    assert [(r.run, r.parent, r.status, r.pid) for r in detail.task.runs] == [
        ("r2root", None, "done", 4002), ("r2kid", "r2root", "interrupted", 0)]
    assert [(t.turn, t.text, t.output) for t in detail.turns] == [(1, "ask 2", "out 2")]
    assert again.turn == 2 and of_type(events, EventType.TURN_FINISHED)[0].data["state"] == "done"
    assert min(e.seq for e in events) > 9  # seq continues from the registry's record of the task
    check = sqlite3.connect(db)
    try:
        assert check.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
        assert check.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    finally:
        check.close()
    assert "upgraded the task registry" in daemon.log_path.read_text()
