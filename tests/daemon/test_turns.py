"""Submitting turns: runs in their own processes, events in order, several projects at once."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import psutil
import pytest

from tests.daemon_harness import arun, collect_turn, of_type, script, submit
from yagent.ipc import RemoteError
from yagent.ipc.messages import ListTasks, TaskDetail, TaskInfo, TaskList
from yagent.ipc.vocabulary import ErrorCode, EventType

pytestmark = pytest.mark.e2e


def test_turn_runs_in_its_own_worker_process_rooted_in_the_project(daemon, project: Path) -> None:
    async def go():
        async with daemon.client() as c:
            sub = await submit(c, project, script({"emit": 5}, output="finished"))
            return sub, await collect_turn(c, sub.task)

    sub, events = arun(go())
    started = of_type(events, EventType.RUN_STARTED)
    assert len(started) == 1
    worker_pid = started[0].data["pid"]
    assert worker_pid != daemon.proc.pid
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert len(of_type(events, EventType.AI_CHUNK)) == 5
    finished = of_type(events, EventType.TURN_FINISHED)[0]
    assert finished.data["status"] == "done"
    assert finished.data["output"] == "finished"
    assert all(e.task == sub.task for e in events)


def test_two_projects_run_concurrent_tasks(daemon, tmp_path: Path) -> None:
    projects = []
    for name in ("alpha", "beta"):
        p = tmp_path / name
        p.mkdir()
        projects.append(p)

    async def go():
        async with daemon.client() as c:
            # Each run waits until both are live, proving they overlap.
            subs = [await submit(c, p, script({"lease": 0.3}, {"step": 3}, output=p.name)) for p in projects]
            results = await asyncio.gather(*(collect_turn(c, s.task) for s in subs))
            listing = await c.request(ListTasks(id=0), TaskList)
            return subs, results, listing

    subs, results, listing = arun(go())
    assert {s.project for s in subs} == {str(p) for p in projects}
    outputs = {of_type(evs, EventType.TURN_FINISHED)[0].data["output"] for evs in results}
    assert outputs == {"alpha", "beta"}
    spans = []
    for evs in results:
        start = of_type(evs, EventType.RUN_STARTED)[0].ts
        end = of_type(evs, EventType.RUN_FINISHED)[0].ts
        spans.append((start, end))
    assert max(s for s, _ in spans) < min(e for _, e in spans), f"runs did not overlap: {spans}"
    by_task = {t.task: t for t in listing.tasks}
    for s in subs:
        assert by_task[s.task].state == "done"
        assert by_task[s.task].project == s.project


def test_second_turn_continues_the_same_task(daemon, project: Path) -> None:
    async def go():
        async with daemon.client() as c:
            first = await submit(c, project, script(output="one"))
            await collect_turn(c, first.task)
            second = await submit(c, project, script(output="two"), task=first.task[:6])
            events = await collect_turn(c, second.task, turn=2)
            detail = await c.request(TaskInfo(id=0, task=first.task), TaskDetail)
            return first, second, events, detail

    first, second, events, detail = arun(go())
    assert second.task == first.task and second.turn == 2
    assert [t.output for t in detail.turns] == ["one", "two"]
    finished = [e for e in events if e.type == EventType.TURN_FINISHED]
    assert [e.data["turn"] for e in finished] == [1, 2]


def test_submit_to_a_busy_task_is_refused_with_advice(daemon, project: Path) -> None:
    async def go():
        async with daemon.client() as c:
            sub = await submit(c, project, script({"step": 200}))
            with pytest.raises(RemoteError) as exc:
                await submit(c, project, "again", task=sub.task)
            return exc.value

    err = arun(go())
    assert err.code == "busy"
    assert "yagent cancel" in str(err)


@pytest.mark.parametrize(("project_path", "code"),
                         [("relative/dir", ErrorCode.BAD_PROJECT), ("/no/such/dir", ErrorCode.BAD_PROJECT)])
def test_bad_project_paths_are_refused(daemon, project_path: str, code: str) -> None:
    async def go():
        async with daemon.client() as c:
            with pytest.raises(RemoteError) as exc:
                await submit(c, Path(project_path), "hello")
            return exc.value

    err = arun(go())
    assert err.code == code
    assert project_path in str(err)


def test_unknown_agent_kind_fails_the_turn_with_a_clear_error(daemon, project: Path) -> None:
    async def go():
        async with daemon.client() as c:
            sub = await submit(c, project, "hi", agent="no-such-agent")
            return await collect_turn(c, sub.task)

    events = arun(go())
    finished = of_type(events, EventType.TURN_FINISHED)[0]
    assert finished.data["status"] == "failed"
    assert "unknown agent kind 'no-such-agent'" in finished.data["error"]
    assert "scripted" in finished.data["error"]


def test_worker_processes_are_gone_after_the_turn(daemon, project: Path) -> None:
    async def go():
        async with daemon.client() as c:
            sub = await submit(c, project, script({"delegate": [{"agent": "scripted", "task": script()}]}))
            return await collect_turn(c, sub.task)

    events = arun(go())
    pids = [e.data["pid"] for e in of_type(events, EventType.RUN_STARTED)]
    assert len(pids) == 2
    _gone, alive = psutil.wait_procs([p for p in map(_proc, pids) if p], timeout=10)
    assert not alive
    notes = json.loads(of_type(events, EventType.TURN_FINISHED)[0].data["output"])["notes"]
    assert notes[0][0]["status"] == "done"


def _proc(pid: int) -> psutil.Process | None:
    try:
        return psutil.Process(pid)
    except psutil.NoSuchProcess:
        return None


def test_a_reply_too_large_for_one_frame_is_an_error_and_the_daemon_keeps_serving(daemon, project: Path) -> None:
    big = "word " * 600_000  # 3 MB a turn; the echo output doubles it, so two turns pass the 8 MB frame cap

    async def go():
        async with daemon.client() as c:
            first = await submit(c, project, big)
            await collect_turn(c, first.task, turn=1)
            await submit(c, project, big, task=first.task)
            await collect_turn(c, first.task, turn=2)
            with pytest.raises(RemoteError) as err:
                await c.request(TaskInfo(id=0, task=first.task), TaskDetail, timeout=10)
            listing = await c.request(ListTasks(id=0), TaskList, timeout=10)
            return err.value, listing

    err, listing = arun(go())
    assert err.code == ErrorCode.TOO_LARGE
    assert "task_detail" in str(err) or "too large" in str(err)
    assert len(listing.tasks) == 1


def test_delegations_inherit_the_turns_model_override(daemon, project: Path) -> None:
    from yagent.ipc.messages import Submit, Submitted

    child = script({"options": True})

    async def go():
        async with daemon.client() as c:
            sub = await c.request(Submit(
                id=0, project=str(project), agent="scripted", options={"model_override": "local"},
                text=script({"options": True}, {"delegate": [{"agent": "scripted", "task": child}]})), Submitted)
            return await collect_turn(c, sub.task)

    events = arun(go())
    seen = [e.data for e in of_type(events, "options")]
    assert len(seen) == 2
    assert all(d.get("model_override") == "local" for d in seen), seen
