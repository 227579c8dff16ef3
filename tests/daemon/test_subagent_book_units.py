"""The reuse table of a task (`daemon/subagent_book.py`) in-process, over a real state.db and the daemon's
scheduler: who may continue what, what a follow-up's end does to the table, waits, and every bound."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from yagent.daemon import subagent_book
from yagent.daemon.registry import Registry
from yagent.daemon.schedule import Scheduler
from yagent.daemon.subagent_book import MAX_WAITS_PER_RUN, Placement, SubagentBook
from yagent.ipc.messages import (
    FOLLOWUP_OPTION,
    DelegateRequest,
    ErrorReply,
    RunOutcome,
    SubagentsReply,
    SubagentsRequest,
)
from yagent.ipc.records import Message
from yagent.ipc.vocabulary import ErrorCode, RunStatus, StopReason, SubagentState, TurnEndChoice


@dataclass
class FakeRun:
    """A run as the book sees it: what it was sent, and how often it was told its wait began and ended."""

    id: str
    subagent: str = ""
    ended: bool = False
    sent: list[Message] = field(default_factory=list)
    waits: int = 0
    arrived: asyncio.Event | None = None

    def send(self, msg: Message) -> None:
        self.sent.append(msg)
        if self.arrived is not None:
            self.arrived.set()

    def wait_began(self, reason: str) -> None:
        self.waits += 1

    def wait_ended(self, reason: str) -> None:
        self.waits -= 1


@pytest.fixture
def registry(tmp_path: Path) -> Registry:
    reg = Registry(tmp_path / "state.db")
    project = reg.ensure_project(tmp_path)
    for _ in range(2):
        reg.create_task(project, "a task")
    return reg


def _tasks(registry: Registry) -> list[str]:
    return [t.id for t in registry.list_tasks()]


def _book(registry: Registry, task: str | None = None) -> SubagentBook:
    return SubagentBook(registry, task or _tasks(registry)[0], Scheduler())


def _delegate(agent: str = "repo", *, subagent: str = "", key: str = "",
              background: TurnEndChoice | None = None) -> DelegateRequest:
    return DelegateRequest(id=1, agent=agent, task="Where is the cache?\nmore", subagent=subagent, reuse_key=key,
                           background=background)


def _done(run: str, *, signature: str = "sig-1", continued: bool = False, **data: str) -> RunOutcome:
    return RunOutcome(status=RunStatus.DONE, stop_reason=StopReason.AGENT_EXIT, output="in cache.py", run=run,
                      signature=signature, continued=continued, handoff={"conclusion": "cache.py", "status": "ok"},
                      data=dict(data))


def _start(book: SubagentBook, parent: FakeRun, msg: DelegateRequest, run: str) -> Placement:
    placement = book.place(parent, msg, 0)
    assert isinstance(placement, Placement), placement
    book.started(placement, run, msg.background)
    return placement


def test_a_follow_up_reaches_only_a_sub_agent_of_the_asking_agent_in_its_own_task(registry: Registry) -> None:
    book, other = _book(registry), _book(registry, _tasks(registry)[1])
    root = FakeRun("r-root")
    mine = _start(book, root, _delegate(), "r1").row
    theirs = _start(other, FakeRun("r-other"), _delegate(), "r9").row
    child = FakeRun("r-child", subagent=mine.id)  # a sub-agent's own run: its sub-agents are another scope
    nested = _start(book, child, _delegate("devops"), "r2").row
    assert (mine.owner, nested.owner) == ("", mine.id)
    # Still working: a follow-up waits for it to end.
    assert book.place(root, _delegate(subagent=mine.id), 0)[0] == ErrorCode.SUBAGENT_BUSY
    book.ended("r1", _done("r1"))
    for forged in (theirs.id, nested.id, "a" + "0" * 9, "../r1", "x" * 10_000):
        refused = book.place(root, _delegate(subagent=forged), 0)
        assert refused[0] == ErrorCode.UNKNOWN_SUBAGENT and "agent_status lists yours" in refused[1], forged
        assert len(refused[1]) < 400  # a huge forged id is not echoed whole
    followup = book.place(root, _delegate("", subagent=mine.id), 0)
    assert isinstance(followup, Placement) and followup.followup and followup.agent == "repo"
    assert followup.options == {FOLLOWUP_OPTION: {"subagent": mine.id, "run": "r1", "fresh_if_changed": False}}
    # What the table holds survives the daemon: a new book over the same file sees it.
    again = _book(registry).rows[mine.id]
    assert (again.state, again.last_run, again.signature, again.conclusion) == (SubagentState.IDLE, "r1", "sig-1",
                                                                              "cache.py")


def test_what_a_follow_ups_end_does_to_its_sub_agent(registry: Registry) -> None:
    book, root = _book(registry), FakeRun("r-root")
    row = _start(book, root, _delegate(), "r1").row
    book.ended("r1", _done("r1"))
    # Continued: the same sub-agent, its newest run the follow-up.
    _start(book, root, _delegate("", subagent=row.id), "r2")
    assert book.ended("r2", _done("r2", continued=True)) == row.id and row.last_run == "r2"
    # Cut off before it could compare configurations (no signature): its conversation is the previous run's.
    _start(book, root, _delegate("", subagent=row.id), "r3")
    cut = RunOutcome(status=RunStatus.CANCELLED, stop_reason=StopReason.CANCELLED, run="r3")
    assert book.ended("r3", cut) == row.id and row.last_run == "r2" and row.state == SubagentState.STOPPED
    # Its configuration changed: it says so, and is never continued again.
    _start(book, root, _delegate("", subagent=row.id), "r4")
    book.ended("r4", _done("r4", signature="sig-2", not_continued="the model changed"))
    assert row.state == SubagentState.RETIRED and row.signature == "sig-1"
    assert book.place(root, _delegate(subagent=row.id), 0)[0] == ErrorCode.UNKNOWN_SUBAGENT


def test_a_workflow_node_whose_configuration_changed_gets_a_new_sub_agent_under_its_key(registry: Registry) -> None:
    book, root = _book(registry), FakeRun("r-root")
    first = _start(book, root, _delegate("writer", key="writer"), "r1").row
    book.ended("r1", _done("r1"))
    again = book.place(root, _delegate("writer", key="writer"), 0)
    assert isinstance(again, Placement) and again.row is first
    assert again.options[FOLLOWUP_OPTION]["fresh_if_changed"] is True
    book.started(again, "r2", None)
    new_id = book.ended("r2", _done("r2", signature="sig-2"))  # started anew: not continued, another signature
    assert new_id != first.id and first.state == SubagentState.RETIRED
    new = book.rows[new_id]
    assert (new.reuse_key, new.last_run, new.signature, new.state) == ("writer", "r2", "sig-2", SubagentState.IDLE)
    third = book.place(root, _delegate("writer", key="writer"), 0)
    assert isinstance(third, Placement) and third.row is new


def test_background_work_of_one_run_is_bounded(registry: Registry) -> None:
    book, root = _book(registry), FakeRun("r-root")
    refused = book.place(root, _delegate(background=TurnEndChoice.KEEP), subagent_book.MAX_BACKGROUND_PER_RUN)
    assert refused[0] == ErrorCode.TOO_MANY and "wait_agents" in refused[1]
    runs = [f"r{i}" for i in range(3)]
    for run in runs:
        _start(book, root, _delegate(background=TurnEndChoice.KEEP), run)
    assert book.background_working(runs) == 3
    book.ended("r0", _done("r0"))
    assert book.background_working(runs) == 2


def test_the_table_forgets_its_oldest_idle_sub_agents_past_its_cap_never_a_working_one(
        registry: Registry, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(subagent_book, "MAX_SUBAGENTS_PER_TASK", 5)
    book, root = _book(registry), FakeRun("r-root")
    working = _start(book, root, _delegate(), "r-w").row
    for i in range(12):
        _start(book, root, _delegate(), f"r{i}")
        book.ended(f"r{i}", _done(f"r{i}"))
    assert len(book.rows) <= 5 and working.id in book.rows
    assert len(registry.subagents_of(book.task_id)) == len(book.rows)  # forgotten on disk too


def _wait_for(book: SubagentBook, run: FakeRun, request: SubagentsRequest) -> Message:
    async def go() -> Message:
        run.arrived = asyncio.Event()
        book.ask(run, request)
        async with asyncio.timeout(10):
            await run.arrived.wait()
        return run.sent[-1]

    return asyncio.run(go())


@pytest.mark.parametrize("timeout", [float("nan"), float("inf"), float("-inf"), -1.0])
def test_a_wait_with_a_deadline_that_is_no_number_of_seconds_is_refused(registry: Registry, timeout: float) -> None:
    book, root = _book(registry), FakeRun("r-root")
    row = _start(book, root, _delegate(background=TurnEndChoice.WAIT), "r1").row
    reply = _wait_for(book, root, SubagentsRequest(id=7, subagents=[row.id], wait=True, timeout=timeout))
    assert isinstance(reply, ErrorReply) and reply.code == ErrorCode.BAD_REQUEST and reply.id == 7
    assert book.waits == 0 and root.waits == 0


def test_a_wait_is_answered_when_its_sub_agents_end_or_at_its_deadline_and_a_huge_one_is_capped(
        registry: Registry) -> None:
    book, root = _book(registry), FakeRun("r-root")
    a = _start(book, root, _delegate(background=TurnEndChoice.WAIT), "r1").row
    b = _start(book, root, _delegate(background=TurnEndChoice.KEEP), "r2").row

    async def go() -> tuple[Message, Message, float]:
        root.arrived = asyncio.Event()
        book.ask(root, SubagentsRequest(id=1, subagents=[], wait=True, timeout=1e300))  # all in the background
        huge = book._waits[0].timer.when - asyncio.get_running_loop().time()
        assert not root.sent and root.waits == 1  # nothing yet: it waits, and its idle clock is frozen
        book.ended("r1", _done("r1"))
        assert not root.sent  # one of the two still works
        book.ended("r2", _done("r2"))
        async with asyncio.timeout(10):
            await root.arrived.wait()
        ended = root.sent[-1]
        # A wait whose deadline comes first: answered at the deadline, saying so.
        c = _start(book, root, _delegate(background=TurnEndChoice.WAIT), "r3").row
        root.arrived.clear()
        book.ask(root, SubagentsRequest(id=2, subagents=[c.id], wait=True, timeout=0.01))
        async with asyncio.timeout(10):
            await root.arrived.wait()
        return ended, root.sent[-1], huge

    ended, expired, huge = asyncio.run(go())
    assert isinstance(ended, SubagentsReply) and not ended.timed_out
    assert {i.subagent for i in ended.subagents} == {a.id, b.id}
    assert all(i.outcome is not None and i.outcome.output == "in cache.py" for i in ended.subagents)
    assert isinstance(expired, SubagentsReply) and expired.timed_out
    assert expired.subagents[0].state == SubagentState.WORKING
    assert huge <= subagent_book.MAX_WAIT_SECONDS + 1
    assert book.waits == 0 and root.waits == 0


def test_waits_are_bounded_per_run_and_released_with_it_idempotently_even_when_a_cancel_fails(
        registry: Registry) -> None:
    book, root = _book(registry), FakeRun("r-root")
    row = _start(book, root, _delegate(background=TurnEndChoice.WAIT), "r1").row

    class BrokenTimer:
        def cancel(self) -> None:
            raise RuntimeError("cannot cancel")

    async def go() -> None:
        for i in range(MAX_WAITS_PER_RUN):
            book.ask(root, SubagentsRequest(id=i, subagents=[row.id], wait=True, timeout=60))
        book.ask(root, SubagentsRequest(id=99, subagents=[row.id], wait=True, timeout=60))
        refused = root.sent[-1]
        assert isinstance(refused, ErrorReply) and refused.code == ErrorCode.TOO_MANY and refused.id == 99
        book._waits[0].timer = BrokenTimer()  # one wait whose timer cannot be cancelled
        book.release_run(root)
        book.release_run(root)  # a second release finds nothing and says nothing
        assert book.waits == 0
        book.ended("r1", _done("r1"))
        assert root.sent == [refused]  # no wait is answered after its run is gone

    asyncio.run(go())


def test_a_root_turn_is_handed_each_unread_background_result_once(registry: Registry) -> None:
    book, root = _book(registry), FakeRun("r-root")
    done = _start(book, root, _delegate(background=TurnEndChoice.KEEP), "r1").row
    working = _start(book, root, _delegate(background=TurnEndChoice.KEEP), "r2").row
    book.ended("r1", _done("r1"))
    handed = book.background_option()
    assert [i["subagent"] for i in handed["finished"]] == [done.id]
    assert [i["subagent"] for i in handed["running"]] == [working.id]
    assert book.background_option()["finished"] == []  # not handed twice


def test_cancelling_sub_agents_stops_those_that_work_a_gone_one_is_success_and_one_failed_stop_spares_the_rest(
        registry: Registry) -> None:
    book, root = _book(registry), FakeRun("r-root")
    rows = [_start(book, root, _delegate(background=TurnEndChoice.KEEP), f"r{i}").row for i in range(3)]
    book.ended("r1", _done("r1"))  # this one has ended: cancelling it asks nothing of anybody
    stopped: list[str] = []

    def stop(run_id: str) -> None:
        stopped.append(run_id)
        if run_id == "r0":
            raise RuntimeError("the process table is full")

    ids = [r.id for r in rows]
    book.ask(root, SubagentsRequest(id=5, subagents=ids, cancel=True), stop=stop)
    assert stopped == ["r0", "r2"]  # the failure on r0 did not keep r2 from being stopped
    reply = root.sent[-1]
    assert isinstance(reply, SubagentsReply) and [i.subagent for i in reply.subagents] == ids
    assert [i.state for i in reply.subagents] == [SubagentState.WORKING, SubagentState.IDLE, SubagentState.WORKING]
    book.ended("r0", RunOutcome(status=RunStatus.CANCELLED, stop_reason=StopReason.CANCELLED, run="r0"))
    book.ended("r2", RunOutcome(status=RunStatus.CANCELLED, stop_reason=StopReason.CANCELLED, run="r2"))
    stopped.clear()
    book.ask(root, SubagentsRequest(id=6, subagents=ids, cancel=True), stop=stop)  # again: all gone, all fine
    assert stopped == [] and isinstance(root.sent[-1], SubagentsReply)
    forged = book.ask(root, SubagentsRequest(id=7, subagents=["a-not-mine"], cancel=True), stop=stop)
    assert forged is None and isinstance(root.sent[-1], ErrorReply) and stopped == []
    assert root.sent[-1].code == ErrorCode.UNKNOWN_SUBAGENT


def test_a_status_carries_no_results_and_a_wait_at_most_its_share(registry: Registry,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(subagent_book, "MAX_OUTCOMES_PER_REPLY", 2)
    book, root = _book(registry), FakeRun("r-root")
    ids = []
    for i in range(4):
        ids.append(_start(book, root, _delegate(background=TurnEndChoice.KEEP), f"r{i}").row.id)
        book.ended(f"r{i}", _done(f"r{i}", signature="s") if i else RunOutcome(
            status=RunStatus.DONE, stop_reason=StopReason.AGENT_EXIT, output="x" * 100_000, run="r0"))
    book.ask(root, SubagentsRequest(id=1, subagents=ids))
    status = root.sent[-1]
    assert isinstance(status, SubagentsReply) and all(i.outcome is None for i in status.subagents)
    assert [i.conclusion for i in status.subagents][1] == "cache.py"
    _wait_for(book, root, SubagentsRequest(id=2, subagents=ids, wait=True, timeout=5))
    waited = root.sent[-1]
    assert isinstance(waited, SubagentsReply) and [i.outcome is not None for i in waited.subagents] == [
        True, True, False, False]
    assert len(waited.subagents[0].outcome.output) < 17_000  # a huge output is cut to its budget
    assert [r["subagent"] for r in book.background_option()["finished"]] == ids[2:]  # the rest: the next turn
