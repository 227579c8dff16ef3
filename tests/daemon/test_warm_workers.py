"""Warm workers (`daemon/warm_pool.py`): forked before a run wants them, and yet started as a cold worker is — the
secret only at assignment, confinement before the first thread — refilled behind each start, emptied when idle,
and gone with their daemon.

The launcher scenarios run in a process of their own (`warm_probe.py`), so no forkserver is left in pytest's."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.daemon_harness import REPO, arun, collect_turn, of_type, script, submit, wait_until
from yagent.ipc.confinement import landlock_abi, user_namespaces
from yagent.ipc.page_runs import MAX_PREFAULT_PAGES
from yagent.ipc.vocabulary import EventType


@pytest.fixture
def runtime() -> Iterator[Path]:
    short = Path(tempfile.mkdtemp(prefix="yg-", dir="/tmp"))  # a socket path must stay short
    yield short
    shutil.rmtree(short, ignore_errors=True)


def _probe(scenario: str, runtime: Path) -> dict:
    done = subprocess.run([sys.executable, "-m", "tests.daemon.warm_probe", scenario, str(runtime)],
                          capture_output=True, text=True, timeout=180, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "stderr": done.stderr}


def test_a_warm_worker_waits_without_thread_socket_or_confinement_and_gets_its_secret_only_at_assignment(
        runtime: Path) -> None:
    seen = _probe("assignment", runtime)
    waiting = seen["waiting"]
    assert waiting["threads"] == 1 and waiting["no_new_privs"] == "0"
    # Its only sockets are its event loop's unnamed wake-up pair: nothing connected (None: not ours to list).
    assert waiting["sockets"] is None or set(waiting["sockets"]) <= {""}
    # The run went to the worker forked before its secret existed, and its hello proves that secret.
    assert seen["pid_was_warm"] and seen["warm"] and seen["proved"]
    assert seen["leaks"] == []
    if seen["confined"]:  # every thread it has by its hello started after it confined itself
        assert len(seen["threads_no_new_privs"]) > 1 and set(seen["threads_no_new_privs"]) == {"1"}


def test_the_pool_refills_behind_each_start_skips_a_killed_worker_and_is_emptied_when_idle(runtime: Path) -> None:
    seen = _probe("refill_and_reap", runtime)
    assert seen["one"] == [True, True]
    assert len(seen["refilled_new"]) == 1  # one fork replaced the worker the start took
    assert seen["after_kill"] == [True, True, True]  # the killed one was passed over for the next
    assert seen["cold"] == [False, True]  # emptied while idle: the next start forks, and it still works
    assert seen["refilled_after_cold"] == 2


def test_a_warm_worker_someone_attached_to_leaves_without_its_secret(runtime: Path) -> None:
    seen = _probe("traced", runtime)
    if not seen["attached"]:
        pytest.skip(f"cannot attach to a process here (errno {seen['errno']})")
    assert seen["same"] and not seen["hello"]
    # Why it left, in its own words (its exit code can reach the forkserver as 255: the tracer reaped it first).
    assert "traces this worker; it leaves without taking its run's secret" in seen["stderr"]
    assert seen["exitcode"] in (4, 255)


async def _delegating_turn(daemon, project: Path) -> list:
    """One turn whose root run delegates once: two runs, both on warm workers when the pool holds two."""
    async with daemon.client() as c:
        sub = await submit(c, project, script({"delegate": [{"agent": "scripted", "task": script()}]}))
        return await collect_turn(c, sub.task)


def _warm_pids(daemon) -> list[int]:
    forkserver = [p for p in psutil.Process(daemon.proc.pid).children() if "forkserver" in " ".join(p.cmdline())]
    return [c.pid for f in forkserver for c in f.children() if c.name() == "yagent:warm"]


def test_a_daemon_keeps_its_warm_workers_starts_runs_on_them_and_leaves_none_after_a_kill_9(
        make_daemon, project: Path, tmp_path: Path) -> None:
    # A home of its own, last changed a minute ago: the listing around what stays hidden in it (~/.ssh and the like)
    # is kept only once settled, and the real home may change while the suite runs (a fresher one: built whole).
    home = tmp_path / "home"
    home.mkdir()
    settled = time.time_ns() - 60 * 10**9
    os.utime(home, ns=(settled, settled))
    daemon = make_daemon("[daemon]\nwarm_workers = 2\n", env={"HOME": str(home)})
    wait_until(lambda: daemon.status().warm_workers == 2, 60, "two warm workers")

    events = arun(_delegating_turn(daemon, project))
    started = of_type(events, EventType.RUN_STARTED.value)
    assert len(started) == 2 and all(e.data["warm"] for e in started)
    assert all(e.data["hello_ms"] >= e.data["forked_ms"] >= 0 for e in started)
    # Each confined one had the read rules every run shares in its ruleset before its run came.
    confined = [e for e in started if not e.data["unconfined"]]
    assert confined or landlock_abi() < 1
    assert all(e.data["rules_ahead"] >= 10 for e in confined), [e.data for e in started]
    # A warm worker builds its run from the spec its assignment carried, yet nothing of it is seen before its start.
    for run in {e.run for e in started}:
        kinds = [e.type for e in events if e.run == run]
        assert set(kinds[:kinds.index(EventType.RUN_STARTED.value)]) <= {EventType.TURN_STARTED.value}, kinds
    wait_until(lambda: len(_warm_pids(daemon)) == 2, 60, "the pool to be refilled")
    warm = [psutil.Process(pid) for pid in _warm_pids(daemon)]
    daemon.proc.kill()
    wait_until(lambda: not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in warm), 10,
               "every warm worker to leave after the daemon's kill -9")


def test_the_first_warm_runs_report_their_pages_and_warm_workers_forked_after_copy_them_ahead(
        make_daemon, project: Path) -> None:
    daemon = make_daemon("[daemon]\nwarm_workers = 2\n")
    wait_until(lambda: daemon.status().warm_workers == 2, 60, "two warm workers")

    # The first runs are asked; the workers forked while they ran had nothing to copy yet; later ones have.
    started: list = []
    for _ in range(6):
        wait_until(lambda: daemon.status().warm_workers == 2, 60, "the pool to be refilled")
        events = arun(_delegating_turn(daemon, project))
        assert [e.data["status"] for e in of_type(events, EventType.RUN_FINISHED.value)] == ["done", "done"]
        started += of_type(events, EventType.RUN_STARTED.value)
        if any(e.data["prefaulted"] for e in started):
            break
    assert not any(e.data["prefaulted"] for e in started[:2])
    ahead = [e.data["prefaulted"] for e in started if e.data["prefaulted"]]
    assert ahead and all(0 < n <= MAX_PREFAULT_PAGES for n in ahead)
    assert all(e.data["warm"] for e in started)
    log = daemon.log_path.read_text()
    assert "reported the pages it copied on write: warm workers now copy" in log
    assert "page report was left out" not in log


def test_with_warm_workers_off_every_start_forks(make_daemon, project: Path) -> None:
    daemon = make_daemon("[daemon]\nwarm_workers = 0\n")

    async def turn() -> list:
        async with daemon.client() as c:
            sub = await submit(c, project, script())
            return await collect_turn(c, sub.task)

    started = of_type(arun(turn()), EventType.RUN_STARTED.value)
    assert [e.data["warm"] for e in started] == [False]
    assert daemon.status().warm_workers == 0 and _warm_pids(daemon) == []


def test_a_warm_worker_killed_as_it_is_handed_its_run_gives_way_to_a_cold_one(make_daemon, project: Path) -> None:
    daemon = make_daemon("[daemon]\nwarm_workers = 1\n")
    (waiting,) = wait_until(lambda: _warm_pids(daemon) if daemon.status().warm_workers == 1 else [], 60,
                            "a warm worker")
    os.kill(waiting, signal.SIGSTOP)  # alive, so the run is written down its pipe; never read
    try:
        async def turn() -> list:
            async with daemon.client() as c:
                sub = await submit(c, project, script(output="served"))
                # The pool refills behind the start that took the stopped worker: it has its run now.
                await asyncio.to_thread(wait_until, lambda: set(_warm_pids(daemon)) - {waiting}, 60,
                                        "the pool to refill behind the start")
                os.kill(waiting, signal.SIGKILL)
                return await collect_turn(c, sub.task)

        events = arun(turn(), 120)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(waiting, signal.SIGKILL)
    (started,) = of_type(events, EventType.RUN_STARTED.value)
    assert started.data["warm"] is False and started.data["pid"] != waiting
    (finished,) = of_type(events, EventType.RUN_FINISHED.value)
    assert finished.data["status"] == "done" and finished.data["output"] == "served"
    assert f"its warm worker {waiting} exited before its hello" in daemon.log_path.read_text()


PROBE_EVENT = "probe"  # tests.agents.sandbox_probe's event; importing it here would replace the real kinds
_OPS = ["write <OUTSIDE>/by-worker", "write <PROJECT>/by-worker", "append <PROJECT>/.git/hooks/pre-commit",
        "write <HOME>/config.toml", "read <HOME>/client.token", "bash echo x > <OUTSIDE>/by-shell",
        "bash echo x > <PROJECT>/by-shell"]


@pytest.mark.skipif(landlock_abi() < 1, reason="this kernel has no Landlock")
def test_a_warm_worker_is_held_to_its_runs_confinement_exactly_as_a_cold_one(make_daemon, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    seen = {}
    for warm in (2, 0):
        project = tmp_path / f"project{warm}"
        project.mkdir()
        subprocess.run(["git", "init", "-q", str(project)], check=True)
        daemon = make_daemon(f'[daemon]\nwarm_workers = {warm}\n'
                             'agent_modules = ["tests.agents.scripted", "tests.agents.sandbox_probe"]\n'
                             "[sandbox]\nwritable_roots = []\n")
        if warm:
            wait_until(lambda d=daemon, n=warm: d.status().warm_workers == n, 60, "the warm workers")
        ops = [op.replace("<OUTSIDE>", str(outside)).replace("<PROJECT>", str(project))
               .replace("<HOME>", str(daemon.home)).split(" ", 1) for op in _OPS]

        async def go(daemon=daemon, project: Path = project, ops: list = ops) -> list:
            async with daemon.client() as c:
                sub = await submit(c, project, json.dumps(ops), agent="coding")
                return await collect_turn(c, sub.task)

        events = arun(go(), 120)
        assert [e.data["warm"] for e in of_type(events, EventType.RUN_STARTED.value)] == [bool(warm)]
        seen[warm] = [(e.data["ok"], e.data["errno"]) for e in events if e.type == PROBE_EVENT]
        assert len(seen[warm]) == len(_OPS), events
    assert seen[2] == seen[0]  # the same rules, to the errno
    assert [ok for ok, _ in seen[2]] == [False, True, not user_namespaces(), False, False, False, True], seen
    assert not (outside / "by-worker").exists() and not (outside / "by-shell").exists()


def test_an_assignment_carries_the_runs_spec_after_the_secret_unless_it_would_not_fit_the_pipe() -> None:
    import pickle

    from yagent.daemon.warm_pool import assignment_bytes
    from yagent.ipc.messages import RunSpec

    def spec(size: int) -> RunSpec:
        return RunSpec(run="r1", task="t", turn=1, project="p", project_root="/", agent="chat", input="x" * size,
                       home="/nonexistent")

    small = assignment_bytes("r1", "ipc:///w.sock", None, spec=spec(100))
    assert small is not None and pickle.loads(small.head) == ("r1", "ipc:///w.sock", None, False)
    assert pickle.loads(small.spec) == spec(100)
    # A spec that would overfill the pipe is left out (the start message brings it); the run still goes warm.
    large = assignment_bytes("r1", "ipc:///w.sock", None, spec=spec(60_000))
    assert large is not None and pickle.loads(large.spec) is None
    assert len(large.head) + len(large.spec) < 48 * 1024
    assert pickle.loads(assignment_bytes("r1", "ipc:///w.sock", None).spec) is None


def test_a_warm_run_whose_spec_is_too_large_for_the_pipe_gets_it_whole_with_its_start_message(
        make_daemon, project: Path) -> None:
    daemon = make_daemon("[daemon]\nwarm_workers = 1\n")
    wait_until(lambda: daemon.status().warm_workers == 1, 60, "a warm worker")
    name = "n" * 60_000  # the task, and so the spec, is over the 48 KiB an assignment may take

    async def turn() -> list:
        async with daemon.client() as c:
            sub = await submit(c, project, script({"mark": name}, output="served"))
            return await collect_turn(c, sub.task)

    events = arun(turn())
    (started,) = of_type(events, EventType.RUN_STARTED.value)
    assert started.data["warm"] is True
    (mark,) = of_type(events, "mark")
    assert mark.data["name"] == name
    (finished,) = of_type(events, EventType.RUN_FINISHED.value)
    assert finished.data["status"] == "done" and finished.data["output"] == "served"


def _confinement(**kw: object):
    from yagent.ipc.confinement import ConfinementSpec

    return ConfinementSpec(abi=0, agent="coding", project_root="/p", home="/h", runtime_dir="/r", task_dir="/t",
                           scratch_dir="/s", **kw)


def test_the_spec_of_a_run_with_a_git_view_never_waits_in_its_workers_pipe() -> None:
    import pickle

    from yagent.daemon.warm_pool import assignment_bytes
    from yagent.ipc.messages import RunSpec

    spec = RunSpec(run="r1", task="t", turn=1, project="p", project_root="/p", agent="coding", input="x",
                   home="/h")
    # Its worker is dumpable while it writes its uid map: what its pipe holds unread could be read by the user's others.
    viewed = assignment_bytes("r1", "ipc:///w.sock", _confinement(git_namespace=True), spec=spec)
    assert viewed is not None and pickle.loads(viewed.spec) is None
    plain = assignment_bytes("r1", "ipc:///w.sock", _confinement(), spec=spec)
    assert plain is not None and pickle.loads(plain.spec) == spec


def test_an_assignment_is_cut_to_what_the_workers_pipe_holds_so_the_write_never_blocks() -> None:
    import fcntl
    import multiprocessing
    import pickle
    import types

    from yagent.daemon.warm_pool import WarmWorker, assignment_bytes, pipe_capacity
    from yagent.ipc.messages import RunSpec

    spec = RunSpec(run="r1", task="t", turn=1, project="p", project_root="/p", agent="chat", input="x" * 20_000,
                   home="/h")
    alive = types.SimpleNamespace(exitcode=None, pid=1)  # the process's part here is only to be alive
    reader, writer = multiprocessing.Pipe(duplex=False)
    # A user past pipe-user-pages-soft gets pipes of one page: the spec cannot go, the rest still can.
    fcntl.fcntl(writer.fileno(), fcntl.F_SETPIPE_SZ, 4096)
    assert pipe_capacity(writer) == 4096
    assignment = assignment_bytes("r1", "ipc:///w.sock", None, spec=spec)
    assert assignment is not None and pickle.loads(assignment.spec) == spec  # it would fit the usual 64 KiB
    worker = WarmWorker(alive, writer, capacity=pipe_capacity(writer))  # type: ignore[arg-type]
    assert worker.holds(assignment, b"s" * 32) and worker.assign(assignment, b"s" * 32)
    assert pickle.loads(reader.recv_bytes()) == ("r1", "ipc:///w.sock", None, False)
    assert reader.recv_bytes() == b"s" * 32 and reader.recv() is None
    reader.close()
    # A pipe that cannot take even the head and the secret at once is not written to: the run goes cold, and the
    # worker, kept, waits for one whose head fits.
    reader, writer = multiprocessing.Pipe(duplex=False)
    big_head = assignment_bytes("r1", "ipc:///" + "w" * 6000, None, spec=spec)
    assert big_head is not None
    fcntl.fcntl(writer.fileno(), fcntl.F_SETPIPE_SZ, 4096)
    small = WarmWorker(alive, writer, capacity=pipe_capacity(writer))  # type: ignore[arg-type]
    assert not small.holds(big_head, b"s" * 32) and small.holds(assignment, b"s" * 32)
    assert not writer.closed and not reader.poll(0)
    reader.close()
    writer.close()


def test_a_worker_given_back_is_first_in_line_again_unless_the_pool_shrank_meanwhile() -> None:
    import types

    from yagent.daemon.warm_pool import WarmPool, WarmWorker

    released: list[int] = []

    def fork() -> WarmWorker:
        n = len(forked) + 1
        worker = WarmWorker(types.SimpleNamespace(exitcode=None, pid=n), None, capacity=65536)  # type: ignore[arg-type]
        worker.release = lambda: released.append(n)  # type: ignore[method-assign]
        forked.append(worker)
        return worker

    forked: list[WarmWorker] = []
    pool = WarmPool(fork)
    pool.resize(2)
    pool.started()
    while pool.refill_one():
        pass
    first = pool.take()
    assert first is forked[0] and pool.ready() == 1
    assert pool.give_back(first) and pool.ready() == 2 and pool.take() is first
    pool.resize(1)  # one left in the pool: the taken one has no place to go back to
    assert not pool.give_back(first) and pool.ready() == 1
    assert released == []  # ending it is the caller's, off the daemon's loop


def test_the_daemon_and_each_run_leave_what_they_started_with_out_of_their_garbage_collections(
        make_daemon, tmp_path: Path) -> None:
    """The daemon's startup objects are frozen before it serves; the forkserver's preload (and a warm worker's own
    preparations) before a run: the collections of either walk only what it made since, warm or cold."""
    seen = {}
    frozen_at_startup = []
    for warm in (1, 0):
        project = tmp_path / f"project{warm}"
        project.mkdir()
        daemon = make_daemon(f'[daemon]\nwarm_workers = {warm}\n'
                             'agent_modules = ["tests.agents.scripted", "tests.agents.sandbox_probe"]\n')
        if warm:
            wait_until(lambda d=daemon: d.status().warm_workers == 1, 60, "the warm worker")

        async def go(daemon=daemon, project: Path = project) -> list:
            async with daemon.client() as c:
                sub = await submit(c, project, json.dumps([["gc", ""]]), agent="coding")
                return await collect_turn(c, sub.task)

        events = arun(go(), 120)
        assert [e.data["warm"] for e in of_type(events, EventType.RUN_STARTED.value)] == [bool(warm)]
        (probe,) = [e.data for e in events if e.type == PROBE_EVENT]
        seen[warm] = json.loads(probe["out"])
        frozen_at_startup += [int(line.split(" objects made at startup")[0].rsplit(" ", 1)[1])
                              for line in daemon.log_path.read_text().splitlines() if "objects made at startup" in line]
    assert len(frozen_at_startup) == 2 and min(frozen_at_startup) > 20_000, frozen_at_startup
    for counts in seen.values():  # the preload alone is tens of thousands of objects the collector tracks
        assert counts["frozen"] > 20_000 and counts["frozen"] > 4 * counts["tracked"], seen
