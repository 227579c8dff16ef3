"""A write the user approves outside a confined run's rules is carried out by a process the daemon starts for
that one operation, with exactly the approved path added; the worker's own rules never widen, and the daemon
carries out nothing it did not see the user allow (forged, mismatched and replayed requests are refused)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import select
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.agent_harness import MARKERS, llm_config, tool_messages
from tests.daemon_harness import arun, collect_turn, of_type, submit
from tests.fake_provider import FakeProvider, Step, ToolCallSpec
from yagent.ipc.confinement import landlock_abi
from yagent.ipc.messages import Ack, Answer, ListTasks, TaskControl, TaskList
from yagent.ipc.vocabulary import ControlAction, EventType, QuestionKind

pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(landlock_abi() < 1, reason="needs a kernel with Landlock")]

@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as server:
        yield server


PROBE_MODULES = '[daemon]\nagent_modules = ["tests.agents.scripted", "tests.agents.approval_probe"]\n'
# Nothing beside the project is writable (the harness would otherwise allow the test's tmp dir).
STRICT = "[sandbox]\nwritable_roots = []\n"


def _coding(fake, calls: list[ToolCallSpec]) -> None:
    fake.script("director", MARKERS["director"], [
        Step(tool_calls=[ToolCallSpec("delegate_coding", {"task": "write it"}, id="code")]),
        Step(text="done", tool_calls=[ToolCallSpec("agent_exit", {"summary": "done"})]),
    ])
    fake.script("coding", MARKERS["coding"], [
        *[Step(tool_calls=[call]) for call in calls],
        Step(text="finished", tool_calls=[ToolCallSpec("agent_exit", {"summary": "finished"})]),
    ])


def _turn(daemon, project: Path, text: str, answers: list[str], *, agent: str = "director", during=None):
    """The turn's events, answering its authorisation prompts with `answers` in order."""
    async def go():
        async with daemon.client() as c:
            sub = await submit(c, project, text, agent=agent)
            left = list(answers)

            async def answer(ev):
                if ev.type == EventType.USER_HELP_NEEDED and ev.data["kind"] == QuestionKind.AUTHORIZE:
                    await c.request(Answer(id=0, task=sub.task, request_id=ev.data["request_id"],
                                           answer={"value": left.pop(0)}), Ack)
                    if during is not None:
                        await during(c, sub.task)

            return await collect_turn(c, sub.task, on_event=answer)

    return arun(go(), 120)


def test_an_approved_outside_create_touches_only_the_approved_path_and_the_worker_gains_no_right(
        fake, make_daemon, project: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    sibling = outside / "sibling.txt"
    sibling.write_text("untouched\n")
    target = outside / "new.txt"
    _coding(fake, [
        ToolCallSpec("create_file", {"path": str(target), "content": "approved\n"}, id="c1"),
        # Covered by the session grant, so no prompt: the worker itself tries, and its rules still refuse it.
        ToolCallSpec("create_file", {"path": str(target), "content": "again\n", "overwrite": True}, id="c2"),
    ])
    daemon = make_daemon(llm_config(fake, extra=STRICT))
    events = _turn(daemon, project, "Write the file.", ["session"])
    assert len(of_type(events, EventType.USER_HELP_NEEDED)) == 1
    assert target.read_text() == "approved\n"
    assert sibling.read_text() == "untouched\n" and sorted(os.listdir(outside)) == ["new.txt", "sibling.txt"]
    results = [m["content"] for m in tool_messages(fake.requests_for("coding")[2])]
    assert json.loads(results[0])["created"] is True, results
    assert "the user approved this, but the sandbox refused it" in results[1], results


def test_the_daemon_carries_out_only_what_it_saw_the_user_allow_and_each_answer_once(
        make_daemon, project: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    a, b, unapproved, c, d = (outside / n for n in ("a.txt", "b.txt", "b-sibling.txt", "c.txt", "d.txt"))
    d.write_text("keep\n")
    steps = [
        ["forge", "create_file", {"path": str(a), "content": "forged\n"}],  # no prompt was ever answered
        ["ask", "create_file", {"path": str(a)}],
        ["carry", "create_file", {"path": str(a), "content": "approved\n"}],
        ["carry", "create_file", {"path": str(a), "content": "replayed\n", "overwrite": True}],  # the same answer
        ["write", "", {"path": str(a)}],  # the worker itself, after the operation: its rules are as they were
        ["ask", "create_file", {"path": str(b)}],
        ["carry", "create_file", {"path": str(unapproved), "content": "x\n"}],  # a path the prompt did not name
        ["ask", "create_file", {"path": str(c)}],  # denied
        ["carry", "create_file", {"path": str(c), "content": "x\n"}],
        ["ask", "create_file", {"path": str(d)}],
        ["carry", "delete_file", {"path": str(d)}],  # another tool than the one allowed
    ]
    daemon = make_daemon(PROBE_MODULES + STRICT)
    events = _turn(daemon, project, json.dumps(steps), ["once", "once", "deny", "once"], agent="approval_probe")
    probes = [e.data for e in events if e.type == "probe"]
    assert len(probes) == len(steps), probes
    ok = [p["ok"] for p in probes]
    assert ok == [False, True, True, False, False, True, False, True, False, True, False], probes
    for i in (0, 3, 8, 10):
        assert probes[i]["out"].startswith("not_approved: "), probes[i]
    assert "already used" in probes[3]["out"] and "approved create_file, not delete_file" in probes[10]["out"]
    assert "was not approved by the user" in probes[6]["out"]
    assert a.read_text() == "approved\n" and d.read_text() == "keep\n"
    assert not b.exists() and not unapproved.exists() and not c.exists()
    assert sorted(os.listdir(outside)) == ["a.txt", "d.txt"]
    assert "Permission denied" in probes[4]["out"]


def _await_fifo(path: Path, timeout: float = 60) -> str:
    """What a writer puts in the FIFO `path`, waited for with a deadline (opened read-write: never EOF)."""
    fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)
    try:
        readable, _, _ = select.select([fd], [], [], timeout)
        assert readable, f"nothing came through {path} within {timeout}s"
        return os.read(fd, 4096).decode()
    finally:
        os.close(fd)


@pytest.fixture
def away() -> Iterator[Path]:
    """A directory outside /tmp: commands may name /tmp without a prompt, so an outside one must lie elsewhere."""
    base = next((b for b in ("/var/tmp", "/dev/shm") if os.access(b, os.W_OK)), None)
    if base is None:
        pytest.skip("no writable directory outside /tmp")
    made = Path(tempfile.mkdtemp(prefix="yagent-approved-", dir=base))
    yield made
    shutil.rmtree(made, ignore_errors=True)


def test_an_approved_command_that_writes_outside_runs_in_its_own_process_shown_in_ps(
        fake, make_daemon, project: Path, away: Path) -> None:
    outside, other = away / "approved", away / "other"
    outside.mkdir()
    other.mkdir()
    ready, go = outside / "ready", outside / "go"
    os.mkfifo(ready)
    os.mkfifo(go)
    made = outside / "made.txt"
    hidden = base64.b64encode(str(other / "leaked").encode()).decode()  # a path the prompt cannot show
    command = (f"echo written > {made} && (echo leaked > $(echo {hidden} | base64 -d) || echo refused) && "
               f"echo up > {ready} && head -n 1 {go} && echo finished")
    _coding(fake, [ToolCallSpec("run_bash", {"command": command}, id="b1")])
    daemon = make_daemon(llm_config(fake, extra=STRICT))
    seen: dict[str, str] = {}

    async def while_running(c, task: str) -> None:
        seen["ready"] = await asyncio.to_thread(_await_fifo, ready)  # the command is running, approved
        listed = await c.request(ListTasks(id=0, project=None, limit=10), TaskList)
        seen["waiting"] = " | ".join(r.waiting for t in listed.tasks for r in t.runs if r.agent == "coding")
        seen["made"] = made.read_text()
        os.write(go_fd, b"go\n")  # lets the command go on

    go_fd = os.open(go, os.O_RDWR | os.O_NONBLOCK)  # held open: what is written waits for the command's reader
    try:
        events = _turn(daemon, project, "Run it.", ["once"], during=while_running)
    finally:
        os.close(go_fd)

    assert len(of_type(events, EventType.USER_HELP_NEEDED)) == 1
    assert seen["ready"] == "up\n" and seen["made"] == "written\n"
    assert f"the approved run_bash `{command}` (home writable)" in seen["waiting"], seen
    result = tool_messages(fake.requests_for("coding")[1])[0]["content"]
    assert "finished" in result and "go" in result and "refused" in result, result
    assert os.listdir(other) == []  # only what the prompt named (and the home) was added to the rules


def test_a_task_cancelled_while_its_approved_command_runs_takes_the_command_along(
        fake, make_daemon, project: Path, away: Path) -> None:
    ready, never = away / "ready", away / "never"
    os.mkfifo(ready)
    os.mkfifo(never)
    command = f"echo $$ > {ready} && cat {never}"  # blocks until killed: nobody ever writes `never`
    _coding(fake, [ToolCallSpec("run_bash", {"command": command}, id="b1")])
    daemon = make_daemon(llm_config(fake, extra=STRICT))
    seen: dict[str, int] = {}

    async def cancel_midway(c, task: str) -> None:
        seen["pid"] = int(await asyncio.to_thread(_await_fifo, ready))
        await c.request(TaskControl(id=0, task=task, action=ControlAction.CANCEL), Ack)

    events = _turn(daemon, project, "Run it.", ["once"], during=cancel_midway)
    assert of_type(events, EventType.TURN_FINISHED)
    with contextlib.suppress(psutil.NoSuchProcess):  # the run's end sweeps it: waited for, with a deadline
        psutil.Process(seen["pid"]).wait(timeout=30)
    assert not psutil.pid_exists(seen["pid"])
    assert daemon.status().confined  # the daemon serves on


def test_a_daemon_stopped_while_an_approved_command_runs_exits_and_takes_the_command_along(
        fake, make_daemon, project: Path, away: Path) -> None:
    ready, never = away / "ready", away / "never"
    os.mkfifo(ready)
    os.mkfifo(never)
    _coding(fake, [ToolCallSpec("run_bash", {"command": f"echo $$ > {ready} && cat {never}"}, id="b1")])
    daemon = make_daemon(llm_config(fake, extra=STRICT))
    seen: dict[str, int] = {}

    class Stopped(Exception):
        pass

    async def stop_midway(_c, _task: str) -> None:
        seen["pid"] = int(await asyncio.to_thread(_await_fifo, ready))
        seen["exit"] = await asyncio.to_thread(daemon.terminate)  # raises if it does not exit within 30 s
        raise Stopped

    with pytest.raises(Stopped):
        _turn(daemon, project, "Run it.", ["once"], during=stop_midway)
    assert seen["exit"] == 0
    with contextlib.suppress(psutil.NoSuchProcess):
        psutil.Process(seen["pid"]).wait(timeout=30)
    assert not psutil.pid_exists(seen["pid"])
