"""Attach, detach and reattach through the TUI's controller against a real daemon and real sockets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.client.conftest import PROVIDER_CONFIG
from tests.client.tui_harness import until, until_async
from tests.daemon_harness import arun, script
from yagent.client.answerer import answerer
from yagent.client.tui.backend import DaemonBackend
from yagent.client.tui.controller import TuiController, TuiOptions
from yagent.client.tui.dialogs import QuestionDialog
from yagent.client.tui.state import AnswerShown

pytestmark = pytest.mark.e2e


def controller(daemon, project: Path) -> TuiController:
    return TuiController(DaemonBackend(daemon.runtime, timeout=5.0), TuiOptions(project=project, agent="scripted"),
                         liveness_interval=0.1)


def texts(c: TuiController) -> list[str]:
    return [e.text for e in c.view.entries if e.kind == "text"]


def test_two_clients_share_one_stream_and_one_answer_closes_both_dialogs(make_daemon, project: Path) -> None:
    daemon = make_daemon(PROVIDER_CONFIG)
    steps = script({"chunks": ["shared ", "stream"]}, {"ask": {"kind": "confirm", "prompt": "ship it?"}},
                   {"chunks": ["after"]}, output="fin")

    async def go() -> None:
        a, b = controller(daemon, project), controller(daemon, project)
        try:
            await a.start(None, latest=True)
            assert a.view.task is None
            assert a.submit_line(steps)
            await until(lambda: a.view.task is not None, "the new task", timeout=10)
            await b.start(a.view.task, latest=False)
            for c in (a, b):
                await until(lambda c=c: isinstance(c.dialog, QuestionDialog), "the question in both clients", 10)
            a.dialog_key("y")
            for c in (a, b):
                await until(lambda c=c: c.view.display_state == "done", "the turn end in both clients", 10)
            assert b.dialog is None and a.dialog is None
            assert texts(a) == texts(b) == ["shared stream", "after"]
            # The other client says who answered; the one that answered does not tell itself.
            assert [e.data for e in b.view.entries if e.kind == "answer"] == [
                AnswerShown(value="yes", by=answerer("yagent"))]
            assert [e.data for e in a.view.entries if e.kind == "answer"] == [AnswerShown(value="yes", by="")]
        finally:
            await a.aclose()
            await b.aclose()

    arun(go(), timeout=60)


def test_reattach_replays_what_happened_meanwhile_and_shows_the_pending_question_first(make_daemon,
                                                                                      project: Path) -> None:
    daemon = make_daemon(PROVIDER_CONFIG)
    missed = [f"m{i:02d} " for i in range(30)]
    steps = script({"chunks": ["seen before detach. "]}, {"sleep": 0.3},
                   {"chunks": missed, "delay": 0.01}, {"ask": {"kind": "input", "prompt": "name?"}},
                   {"chunks": ["end"]})

    async def go() -> None:
        first = controller(daemon, project)
        await first.start(None, latest=True)
        first.submit_line(steps)
        await until(lambda: texts(first), "the first chunk", 10)
        task = first.view.task
        first.detach()
        await first.aclose()  # detached: the task goes on without any client
        probe = DaemonBackend(daemon.runtime)
        await probe.connect()
        try:
            async def pending() -> bool:
                return bool((await probe.task_info(task)).task.questions)

            await until_async(pending, "the question to be pending while nobody is attached")
        finally:
            await probe.close()
        later = controller(daemon, project)
        try:
            await later.start(None, latest=True)  # `yagent` in the project: its latest session
            assert later.view.task == task
            assert isinstance(later.dialog, QuestionDialog)  # before the replay has been drawn
            assert later.dialog.question.prompt == "name?"
            await until(lambda: texts(later), "the replay", 10)
            assert texts(later) == ["seen before detach. " + "".join(missed)]  # no gap, no duplicate
            later.dialog_key("text", "Ada")
            later.dialog_key("enter")
            await until(lambda: later.view.display_state == "done", "the turn end", 10)
            assert texts(later)[-1] == "end"
            detail = await later.backend.task_info(task)
            assert json.loads(detail.turns[-1].output)["notes"] == [{"answer": {"value": "Ada"}}]
            assert later.view.last_seq == later.view.events_seen  # every seq from 1 applied exactly once
        finally:
            await later.aclose()

    arun(go(), timeout=60)


def test_a_daemon_that_dies_is_reported_not_waited_on(make_daemon, project: Path) -> None:
    daemon = make_daemon(PROVIDER_CONFIG)

    async def go() -> None:
        c = controller(daemon, project)
        try:
            await c.start(None, latest=True)
            c.submit_line(script({"sleep": 30}))
            await until(lambda: c.view.display_state == "running", "the turn", 10)
            daemon.proc.kill()
            await until(lambda: c.connection == "lost", "the lost connection", 10)
            assert "not accepting connections" in c.lost_reason or "yagentd" in c.lost_reason
            assert not c.submit_line("hello")  # refused with a message, the text stays
            assert c.message is not None and "not connected" in c.message[0]
        finally:
            await c.aclose()

    arun(go(), timeout=60)
