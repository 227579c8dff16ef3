"""Timeouts, crashes, pause/continue/cancel: the daemon stops runs and tells their parents why."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path

import psutil
import pytest

from tests.daemon_harness import arun, collect_turn, of_type, script, submit, wait_until
from yagent.ipc import EventStream
from yagent.ipc.messages import Ack, DaemonStatus, StatusRequest, TaskControl
from yagent.ipc.vocabulary import EventType, StopReason

pytestmark = pytest.mark.e2e

FAST = "[agent]\ndelegate_idle_timeout = \"1s\"\ndelegate_total_timeout = \"20m\"\n[daemon]\nstop_grace = \"0.5s\"\n"


def _child_outcome(events) -> dict:
    return json.loads(of_type(events, EventType.TURN_FINISHED)[0].data["output"])["notes"][0][0]


def _process(pid: int) -> psutil.Process | None:
    """The live process `pid`, or None: it may exit between any look and the next."""
    try:
        proc = psutil.Process(pid)
        return proc if proc.status() != psutil.STATUS_ZOMBIE else None
    except psutil.NoSuchProcess:
        return None


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_idle_timeout_kills_a_stuck_run_and_its_children(make_daemon, project: Path) -> None:
    daemon = make_daemon(FAST)
    # `hang` blocks the worker's event loop: it cannot honour the cancel, so the daemon must escalate to
    # signals, and the spawned children (own sessions) are orphans found only by the run id.
    stuck = script({"spawn": "sleep 1000"}, {"spawn": "sleep 1000 & sleep 1000"}, {"hang": 600})

    async def go():
        async with daemon.client() as c:
            sub = await submit(c, project, script({"delegate": [{"agent": "scripted", "task": stuck}]}))
            return await collect_turn(c, sub.task)

    events = arun(go())
    outcome = _child_outcome(events)
    assert outcome["stop_reason"] == StopReason.IDLE_TIMEOUT
    assert outcome["status"] == "failed"
    assert "delegate_idle_timeout" in outcome["error"]
    child_pids = [e.data["pid"] for e in of_type(events, "spawned")]
    worker_pid = [e.data["pid"] for e in of_type(events, EventType.RUN_STARTED) if e.data["parent"]][0]
    assert len(child_pids) == 2
    run_id = of_type(events, "spawned")[0].run
    # The grandchild `sleep` of the second spawn is found by the run id in its environment.
    tree = [proc for p in [worker_pid, *child_pids] if (proc := _process(p)) is not None]
    tree += [p for p in psutil.process_iter() if _env_run(p) == run_id and p.pid not in child_pids]
    _gone, alive = psutil.wait_procs(tree, timeout=10)
    assert [p for p in alive if _alive(p.pid)] == []
    root_done = of_type(events, EventType.TURN_FINISHED)[0].data
    assert root_done["status"] == "done"  # the parent got an ordinary result and carried on


def _env_run(proc: psutil.Process) -> str | None:
    try:
        return proc.environ().get("YAGENT_RUN_ID")
    except psutil.Error:
        return None


def test_progress_heartbeats_keep_a_quiet_run_alive_until_the_total_timeout(make_daemon, project: Path) -> None:
    daemon = make_daemon("[agent]\ndelegate_idle_timeout = \"1s\"\ndelegate_total_timeout = \"2s\"\n"
                         "[daemon]\nstop_grace = \"0.5s\"\n")

    async def go():
        async with daemon.client() as c:
            busy = script({"busy": 600})
            sub = await submit(c, project, script({"delegate": [{"agent": "scripted", "task": busy}]}))
            return await collect_turn(c, sub.task)

    events = arun(go())
    outcome = _child_outcome(events)
    assert outcome["stop_reason"] == StopReason.TOTAL_TIMEOUT
    child = [e for e in of_type(events, EventType.RUN_FINISHED) if e.data["parent"]][0]
    started = [e for e in of_type(events, EventType.RUN_STARTED) if e.data["parent"]][0]
    assert child.ts - started.ts >= 2.0  # outlived the 1s idle timeout thanks to heartbeats


def test_pause_freezes_the_timeouts_and_continue_resumes(make_daemon, project: Path) -> None:
    daemon = make_daemon(FAST)
    child = script({"mark": "child-up"}, {"step": 30}, output="child finished")

    async def go():
        async with daemon.client() as c:
            sub = await submit(c, project, script({"delegate": [{"agent": "scripted", "task": child}]}))
            events = []
            async with EventStream(c, sub.task) as stream:
                # One iterator throughout: a new one would start after every event the last one had taken in (a
                # batch, a replay), though it never handed them out.
                feed = stream.events()
                async for ev in feed:
                    events.append(ev)
                    if ev.type == "step" and ev.data["i"] == 2:
                        await c.request(TaskControl(id=0, task=sub.task, action="pause"), Ack)
                        break
                # Paused for three idle timeouts: nothing may end the run meanwhile.
                quiet_until = asyncio.get_running_loop().time() + 3.0
                steps_while_paused = 0
                while (left := quiet_until - asyncio.get_running_loop().time()) > 0:
                    try:
                        ev = await asyncio.wait_for(anext(feed), left)
                    except TimeoutError:
                        break
                    events.append(ev)
                    assert ev.type not in (EventType.RUN_FINISHED, EventType.TURN_FINISHED), ev
                    steps_while_paused += ev.type == "step"
                await c.request(TaskControl(id=0, task=sub.task, action="continue"), Ack)
            rest = await collect_turn(c, sub.task, after_seq=events[-1].seq)
            return events, rest, steps_while_paused

    events, rest, steps_while_paused = arun(go())
    assert steps_while_paused <= 1  # at most the step already past the gate when the pause arrived
    assert of_type(events, EventType.TASK_PAUSED)
    assert of_type(rest, EventType.TASK_RESUMED)
    outcome = _child_outcome(rest)
    assert outcome["stop_reason"] == "agent_exit", outcome
    assert outcome["output"] == "child finished"


def test_killed_worker_gives_the_parent_a_crash_result_and_frees_its_leases(make_daemon, project: Path) -> None:
    daemon = make_daemon("[llm]\nmax_in_flight_requests = 1\n")
    child = script({"lease": 600})

    async def go():
        async with daemon.client() as c:
            sub = await submit(c, project, script({"delegate": [{"agent": "scripted", "task": child}]},
                                                  {"lease": 0.01}, output="parent survived"))

            def kill_on_lease(ev):
                if ev.type != "lease_held":
                    return
                started = [e for e in seen if e.type == EventType.RUN_STARTED and e.run == ev.run][0]
                if started.data["parent"]:
                    os.kill(started.data["pid"], signal.SIGKILL)

            seen = []

            def record(ev):
                seen.append(ev)
                kill_on_lease(ev)

            events = await collect_turn(c, sub.task, on_event=record)
            status = await c.request(StatusRequest(id=0), DaemonStatus)
            return events, status

    events, status = arun(go())
    outcome = _child_outcome(events)
    assert outcome["stop_reason"] == "panic"
    assert "signal 9" in outcome["error"]
    # The parent then took the only lease again: the dead worker's lease was reclaimed.
    assert json.loads(of_type(events, EventType.TURN_FINISHED)[0].data["output"])["output"] == "parent survived"
    assert status.leases["in_use"] == 0
    assert status.leases["granted_total"] == 2


def test_crash_without_result_is_reported_as_panic(daemon, project: Path) -> None:
    async def go():
        async with daemon.client() as c:
            children = [{"agent": "scripted", "task": script({"crash": how})} for how in ("exit", "raise")]
            sub = await submit(c, project, script({"delegate": children}))
            return await collect_turn(c, sub.task)

    events = arun(go())
    exit_outcome, raise_outcome = json.loads(of_type(events, EventType.TURN_FINISHED)[0].data["output"])["notes"][0]
    assert exit_outcome["stop_reason"] == "panic" and "code 13" in exit_outcome["error"]
    assert raise_outcome["stop_reason"] == "panic" and "scripted crash" in raise_outcome["error"]


def test_cancel_stops_every_run_of_the_task(make_daemon, project: Path) -> None:
    daemon = make_daemon(FAST)
    child = script({"spawn": "sleep 1000"}, {"busy": 600})

    async def go():
        async with daemon.client() as c:
            sub = await submit(c, project, script({"delegate": [{"agent": "scripted", "task": child}]}))

            async def cancel_when_spawned(ev):
                if ev.type == "spawned":
                    await c.request(TaskControl(id=0, task=sub.task, action="cancel"), Ack)

            return await collect_turn(c, sub.task, on_event=cancel_when_spawned)

    events = arun(go())
    finished = of_type(events, EventType.TURN_FINISHED)[0].data
    assert finished["status"] == "cancelled" and finished["stop_reason"] == "cancelled"
    pids = [e.data["pid"] for e in of_type(events, EventType.RUN_STARTED)]
    pids += [e.data["pid"] for e in of_type(events, "spawned")]
    _gone, alive = psutil.wait_procs([proc for p in pids if (proc := _process(p)) is not None], timeout=10)
    assert not alive
    child_end = [e for e in of_type(events, EventType.RUN_FINISHED) if e.data["parent"]][0].data
    assert child_end["status"] == "cancelled"


def test_task_timeout_stops_the_whole_turn(make_daemon, project: Path) -> None:
    daemon = make_daemon('task_timeout = "1s"\n[daemon]\nstop_grace = "0.5s"\n')

    async def go():
        async with daemon.client() as c:
            sub = await submit(c, project, script({"busy": 600}))
            return await collect_turn(c, sub.task)

    finished = of_type(arun(go()), EventType.TURN_FINISHED)[0].data
    assert finished["stop_reason"] == StopReason.TOTAL_TIMEOUT
    assert "task_timeout" in finished["error"]


def test_a_lease_request_given_up_while_queued_does_not_freeze_the_idle_clock(make_daemon, project: Path) -> None:
    daemon = make_daemon("[llm]\nmax_in_flight_requests = 1\n" + FAST)
    # The child queues behind the other task's lease, gives up (as a capped classify call does), then goes
    # silent: it is idle from then on, and the watchdog must see it.
    child = script({"lease_wait": 0.5}, {"sleep": 600})

    async def go():
        async with daemon.client() as c:
            holder = await submit(c, project, script({"lease": 600}))
            async with EventStream(c, holder.task) as stream:
                async for ev in stream.events():
                    if ev.type == "lease_held":
                        break
            sub = await submit(c, project, script({"delegate": [{"agent": "scripted", "task": child}]}))
            events = await collect_turn(c, sub.task)
            await c.request(TaskControl(id=0, task=holder.task, action="cancel"), Ack)
            return events

    events = arun(go(), timeout=40)
    assert of_type(events, "lease_gave_up"), [(e.type, e.agent, e.ts) for e in events]
    outcome = _child_outcome(events)
    assert outcome["stop_reason"] == StopReason.IDLE_TIMEOUT, outcome


def test_a_question_withdrawn_by_a_stopped_run_puts_the_task_back_to_running(make_daemon, project: Path) -> None:
    from yagent.ipc.messages import ListTasks, TaskList

    daemon = make_daemon("[agent]\ndelegate_total_timeout = \"1s\"\n[daemon]\nstop_grace = \"0.5s\"\n")
    asker = script({"ask": {"kind": "input", "prompt": "which branch?"}})

    async def go():
        async with daemon.client() as c:
            sub = await submit(c, project, script({"delegate": [{"agent": "scripted", "task": asker}]},
                                                  {"mark": "after"}, {"busy": 60}))
            states = []
            async with EventStream(c, sub.task) as stream:
                async for ev in stream.events():
                    if ev.type in (EventType.USER_HELP_NEEDED, "mark"):
                        listing = await c.request(ListTasks(id=0), TaskList)
                        states.append((ev.type, listing.tasks[0].state))
                    if ev.type == "mark":
                        break
            await c.request(TaskControl(id=0, task=sub.task, action="cancel"), Ack)
            return states

    states = arun(go(), timeout=40)
    assert states == [(EventType.USER_HELP_NEEDED, "waiting"), ("mark", "running")]


@pytest.mark.parametrize("warm", [0, 2], ids=["cold", "warm"])
def test_a_run_slow_to_stop_is_cancelled_again_by_the_daemons_sigterm_and_still_reports(
        make_daemon, project: Path, tmp_path: Path, warm: int) -> None:
    """cancel → grace → SIGTERM: the worker takes the SIGTERM as a second cancellation (workers/term_signal.py),
    which cuts the run's slow way out short; the run still sends its result, and no SIGKILL is needed. Unhandled,
    the SIGTERM would end the worker without a result; lost on its way to the loop, the run would sleep on until
    the SIGKILL. A warm worker made its SIGTERM wakeup while it waited, a cold one makes it at its start."""
    daemon = make_daemon(FAST.replace("[daemon]\n", f"[daemon]\nwarm_workers = {warm}\n"))
    if warm:
        wait_until(lambda: daemon.status().warm_workers == warm, 60, "the warm workers")
    unwritten = tmp_path / "written-after-60s"

    async def go():
        async with daemon.client() as c:
            sub = await submit(c, project, script({"wrap_up": {"seconds": 60, "file": str(unwritten)}}))

            async def cancel_when_wrapping(ev):
                if ev.type == "mark" and ev.data["name"] == "wrapping":
                    await c.request(TaskControl(id=0, task=sub.task, action="cancel"), Ack)

            return await collect_turn(c, sub.task, on_event=cancel_when_wrapping)

    events = arun(go())
    assert of_type(events, EventType.RUN_STARTED)[0].data["warm"] is bool(warm)
    ended = of_type(events, EventType.RUN_FINISHED)[0].data
    assert ended["status"] == "cancelled", ended
    # The worker's own result (a killed worker's end says which signal killed it, and has no CPU time of its own)...
    assert ended["error"] == "cancelled by the user", ended
    assert ended["cpu_seconds"] > 0, ended
    assert not unwritten.exists()
    # ...after the SIGTERM, which was needed: the first cancellation alone left the run sleeping.
    log = daemon.log_path.read_text(errors="replace")
    assert "still alive; sending SIGTERM" in log
