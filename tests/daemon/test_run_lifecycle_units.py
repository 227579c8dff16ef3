"""Run supervisors and turn controllers in-process: a real registry, a real event hub on a real PUB socket,
and the launcher seam handing out processes the test ends itself (a pipe whose closing is the exit)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import zmq

from tests.daemon.seams import ScriptedLauncher
from yagent.daemon.admission import WorkerSlots
from yagent.daemon.event_hub import EventHub
from yagent.daemon.leases import LeaseManager
from yagent.daemon.registry import Registry
from yagent.daemon.run_phase import MOVES, IllegalTransition, RunPhase
from yagent.daemon.run_services import RunServices
from yagent.daemon.run_supervisor import _HANDLERS, RunSupervisor
from yagent.daemon.run_table import RunTable
from yagent.daemon.schedule import Scheduler
from yagent.daemon.settings_source import SettingsSource
from yagent.daemon.task_scope import TaskScope
from yagent.daemon.turn import TurnController
from yagent.ipc import event_data
from yagent.ipc.config import Settings
from yagent.ipc.messages import (
    PROTOCOL_VERSION,
    REPLAY_OPTION,
    RESUME_OPTION,
    ApprovedOperation,
    AskUser,
    BrowserCall,
    BrowserCancel,
    CheckpointCreate,
    CheckpointList,
    CheckpointNote,
    CheckpointRollback,
    CompactNow,
    DelegateRequest,
    DelegateResult,
    ErrorReply,
    EventBatch,
    Heartbeat,
    LeaseGrant,
    LeaseRecall,
    LeaseRelease,
    LeaseRequest,
    McpCall,
    McpCancel,
    McpToolsRequest,
    Question,
    ResultAck,
    RunControl,
    RunOutcome,
    RunResult,
    StartRun,
    SubagentsRequest,
    UserAnswer,
    WorkerHello,
)
from yagent.ipc.page_runs import MAX_PREFAULT_PAGES
from yagent.ipc.records import Message
from yagent.ipc.run_secret import hello_proof
from yagent.ipc.vocabulary import ControlAction, ErrorCode, EventType, QuestionKind, RunStatus, StopReason, TaskState

# -- seams -----------------------------------------------------------------------------------------------


@dataclass
class _World:
    services: RunServices
    runs: RunTable
    launcher: ScriptedLauncher
    sent: list[tuple[str, Message]] = field(default_factory=list)
    forgotten: list[str] = field(default_factory=list)

    def to(self, run: RunSupervisor) -> list[Message]:
        return [m for peer, m in self.sent if peer == run.peer]

    def events(self, task: str) -> list[list]:
        return self.services.hub.replay(task, 0, 1000).events

    def types(self, task: str) -> list[str]:
        return [e[3] for e in self.events(task)]

    def turn(self) -> TurnController:
        registry = self.services.registry
        row = registry.create_task(registry.ensure_project(self.services.home), "t")
        return TurnController(self.services, row, self.runs, lambda t: self.forgotten.append(t.id))


@contextlib.asynccontextmanager
async def _world(tmp_path: Path, *, fail_launch: bool = False, defer_launch: bool = False,
                 **settings: object) -> AsyncIterator[_World]:
    ctx = zmq.Context()
    pub = ctx.socket(zmq.PUB)
    pub.bind(f"ipc://{tmp_path}/ev.sock")
    home = tmp_path / "home"
    home.mkdir()
    registry = Registry(home / "state.db")
    hub = EventHub(pub, home / "events", 1000)
    config = SettingsSource(home, Settings(**{"stop_grace": 0.2, **settings}))
    launcher = ScriptedLauncher(fail=fail_launch, defer=defer_launch)
    scope = TaskScope("test")
    world: _World

    def send(peer: bytes, msg: Message) -> None:
        world.sent.append((peer, msg))

    services = RunServices(
        config=config, clock=asyncio.get_running_loop().time, registry=registry, hub=hub,
        leases=LeaseManager(1), slots=WorkerSlots(8, lambda: False), launcher=launcher, scheduler=Scheduler(),
        scope=scope, workers_endpoint="ipc://unused", home=home, send_worker=send, is_shutting_down=lambda: False)
    world = _World(services, RunTable(), launcher)
    try:
        yield world
    finally:
        await scope.drain(2.0)
        hub.close()
        registry.close()
        pub.close(0)
        ctx.term()


async def _until(predicate, what: str, timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.005)  # the loop must turn for the pipe's reader to fire
    assert predicate(), what


def _hello(run: RunSupervisor, *, warm_model_loop: bool = False) -> None:
    """What the arbiter does with a worker's first hello: bind the run to its connection, then hand it the hello.
    `warm_model_loop`: the hello of a warm worker with its spec in hand whose agent works in model steps."""
    peer = b"worker-of-" + run.id.encode()
    secret = run.services.launcher.secrets[run.id]  # type: ignore[attr-defined]
    assert run.bind(peer, hello_proof(secret, run.id, peer)) is None
    run.receive(WorkerHello(version=PROTOCOL_VERSION, run=run.id, pid=run.pid, proof=hello_proof(secret, run.id, peer),
                            spec_in_hand=warm_model_loop, model_loop=warm_model_loop))


def _done(output: str = "ok") -> RunResult:
    return RunResult(outcome=RunOutcome(status=RunStatus.DONE, stop_reason=StopReason.AGENT_EXIT, output=output))


# -- the phase table --------------------------------------------------------------------------------------


def test_runs_move_only_along_the_declared_edges(tmp_path: Path) -> None:
    async def main() -> None:
        async with _world(tmp_path) as w:
            run = w.turn().create_run("scripted", "x")
            for start in RunPhase:
                for target in RunPhase:
                    run.phase = start
                    if target in MOVES[start]:
                        run._move(target)
                        assert run.phase is target
                    else:
                        with pytest.raises(IllegalTransition):
                            run._move(target)
                        assert run.phase is start

    asyncio.run(main())
    # Every phase is reachable from QUEUED, and every path ends in GONE, which is final.
    reach, todo = {RunPhase.QUEUED}, [RunPhase.QUEUED]
    while todo:
        for nxt in MOVES[todo.pop()] - reach:
            reach.add(nxt)
            todo.append(nxt)
    assert reach == set(RunPhase)
    assert MOVES[RunPhase.GONE] == frozenset()
    assert all(RunPhase.ENDED in MOVES[p] or p in (RunPhase.ENDED, RunPhase.GONE) for p in RunPhase)


def test_every_message_a_worker_sends_has_a_handler() -> None:
    checkpoints = {CheckpointCreate, CheckpointList, CheckpointNote, CheckpointRollback}
    sent_by_workers = {WorkerHello, EventBatch, Heartbeat, LeaseRequest, LeaseRelease, DelegateRequest, AskUser,
                       RunResult, ApprovedOperation, McpToolsRequest, McpCall, McpCancel, SubagentsRequest,
                       BrowserCall, BrowserCancel, *checkpoints}
    assert set(_HANDLERS) == sent_by_workers
    needs_hello = {kind for kind, (_fn, after_hello) in _HANDLERS.items() if after_hello}
    assert needs_hello == {LeaseRequest, LeaseRelease, DelegateRequest, AskUser, RunResult, ApprovedOperation,
                           McpToolsRequest, McpCall, McpCancel, SubagentsRequest, BrowserCall, BrowserCancel,
                           *checkpoints}


# -- a run's life -----------------------------------------------------------------------------------------


def test_a_run_goes_queued_starting_running_ended_gone_and_its_turn_finishes(tmp_path: Path) -> None:
    async def main() -> None:
        async with _world(tmp_path) as w:
            turn = w.turn()
            root = turn.start("go", "scripted", yolo="none", options={})
            assert root.phase is RunPhase.STARTING and turn.in_flight
            _hello(root)
            assert root.phase is RunPhase.RUNNING
            assert isinstance(w.to(root)[0], StartRun)
            root.receive(_done("the answer"))
            assert root.phase is RunPhase.ENDED and isinstance(w.to(root)[-1], ResultAck)
            assert not turn.in_flight and turn.row.state == TaskState.DONE
            assert w.forgotten == []  # its process is still exiting
            w.launcher.handles[root.id].exit(0)
            await _until(lambda: root.phase is RunPhase.GONE, "the exit to be seen")
            assert w.forgotten == [turn.id] and root.id not in w.runs
            types = w.types(turn.id)
            assert types == [EventType.TURN_STARTED, EventType.RUN_STARTED, EventType.RUN_FINISHED,
                             EventType.TURN_FINISHED]
            assert w.events(turn.id)[-1][5]["output"] == "the answer"

    asyncio.run(main())


def test_a_page_report_is_taken_only_from_a_run_that_was_asked_for_one_and_its_start_says_what_was_copied(
        tmp_path: Path) -> None:
    async def main() -> list:
        async with _world(tmp_path) as w:
            learned: list = []
            w.services.launcher.learn_pages = lambda runs, parent, *, run: learned.append((run, runs, parent))
            report = {"page_runs": [[4096, 3]], "page_parent": 4242}
            first, second = w.turn(), w.turn()
            unasked = first.start("go", "scripted", yolo="none", options={})
            _hello(unasked)
            unasked.receive(dataclasses.replace(_done(), **report))  # a worker that reports unasked: ignored
            asked = second.start("go", "scripted", yolo="none", options={})
            asked.handle.learning = True
            peer = b"worker-of-" + asked.id.encode()
            proof = hello_proof(w.launcher.secrets[asked.id], asked.id, peer)
            assert asked.bind(peer, proof) is None
            asked.receive(WorkerHello(version=PROTOCOL_VERSION, run=asked.id, pid=asked.pid, proof=proof,
                                      prefaulted=10**9))  # only shown, and then no more than a report may name
            asked.receive(dataclasses.replace(_done(), **report))
            started = [e[5] for t in (first, second) for e in w.events(t.id) if e[3] == EventType.RUN_STARTED]
            return [learned, [data["prefaulted"] for data in started], asked.id]

    learned, prefaulted, asked = asyncio.run(main())
    assert learned == [(asked, [[4096, 3]], 4242)]
    assert prefaulted == [0, MAX_PREFAULT_PAGES]


def test_a_compaction_asked_before_the_workers_hello_follows_its_start_and_an_ended_run_takes_none(
        tmp_path: Path) -> None:
    async def main() -> None:
        async with _world(tmp_path) as w:
            turn = w.turn()
            root = turn.start("go", "scripted", yolo="none", options={})
            assert root.request_compaction() and root.request_compaction()  # asked twice: one message
            _hello(root)
            assert [type(m) for m in w.to(root)] == [StartRun, CompactNow]
            assert root.request_compaction() and [type(m) for m in w.to(root)][-1] is CompactNow
            root.receive(_done())
            assert not root.request_compaction() and [type(m) for m in w.to(root)][-1] is ResultAck

    asyncio.run(main())


def test_a_runs_secret_is_in_no_event_and_no_message_and_is_forgotten_at_hello(tmp_path: Path) -> None:
    import base64

    from yagent.ipc.records import encode

    async def main() -> None:
        async with _world(tmp_path) as w:
            turn = w.turn()
            root = turn.start("go", "scripted", yolo="none", options={})
            secret = w.launcher.secrets[root.id]
            _hello(root)
            root.receive(DelegateRequest(id=5, agent="scripted", task="look"))
            child = root.children[next(iter(root.children))]
            _hello(child)
            child.receive(_done("child"))
            root.receive(_done("the answer"))
            for run in (root, child):
                w.launcher.handles[run.id].exit(0)
                await _until(lambda run=run: run.phase is RunPhase.GONE, "the exit to be seen")
            assert w.launcher.secrets[child.id] != secret
            wire = repr(w.events(turn.id)).encode() + b"".join(encode(m) for _peer, m in w.sent)
            for run in (root, child):
                run_secret = w.launcher.secrets[run.id]
                for form in (run_secret, run_secret.hex().encode(), base64.b64encode(run_secret)):
                    assert form not in wire
                assert run._secret is None  # used once, then gone
                peer = run.peer
                assert run.bind(b"another connection x", b"") is not None and run.peer == peer

    asyncio.run(main())


def test_a_queued_run_that_is_stopped_ends_without_a_process(tmp_path: Path) -> None:
    async def main() -> None:
        async with _world(tmp_path) as w:
            turn = w.turn()
            root = turn.create_run("scripted", "x")  # created, never admitted: it holds no slot yet
            turn.root = root
            root.stop(StopReason.CANCELLED, "cancelled by the user")
            assert root.phase is RunPhase.GONE and root.exited.is_set()
            assert root.outcome is not None and root.outcome.status == RunStatus.CANCELLED
            assert root.outcome.error == "cancelled by the user" and w.launcher.handles == {}

    asyncio.run(main())


def test_a_launch_that_fails_ends_the_run_saying_why(tmp_path: Path) -> None:
    async def main() -> None:
        async with _world(tmp_path, fail_launch=True) as w:
            turn = w.turn()
            root = turn.start("go", "scripted", yolo="none", options={})
            assert root.phase is RunPhase.GONE
            assert root.outcome is not None and root.outcome.stop_reason == StopReason.PANIC
            assert "could not start a worker process: no more processes" in root.outcome.error
            assert w.services.slots.live == set() and w.forgotten == [turn.id]

    asyncio.run(main())


# -- a start the forkserver is slow to answer ------------------------------------------------------------


def test_a_run_waits_launching_while_its_start_is_off_the_loop_and_a_hello_that_beats_the_pid_counts(
        tmp_path: Path) -> None:
    async def main() -> None:
        async with _world(tmp_path, defer_launch=True) as w:
            turn = w.turn()
            root = turn.start("go", "scripted", yolo="none", options={})
            assert root.phase is RunPhase.LAUNCHING and root.pid == 0 and root.id in w.launcher.pending
            # The worker is already up and says hello before the launcher's thread reports its pid.
            _hello(root)
            assert root.phase is RunPhase.LAUNCHING and w.to(root) == []  # nothing sent to an unknown pid
            w.launcher.report(root.id)
            assert root.phase is RunPhase.RUNNING and root.pid >= 900_000
            assert isinstance(w.to(root)[0], StartRun)
            started = [e for e in w.events(turn.id) if e[3] == EventType.RUN_STARTED]
            assert started and started[0][5]["pid"] == root.pid
            root.receive(_done("answer"))
            w.launcher.handles[root.id].exit(0)
            await _until(lambda: root.phase is RunPhase.GONE, "the exit to be seen")
            assert root.outcome is not None and root.outcome.output == "answer"

    asyncio.run(main())


def test_a_stop_while_launching_is_carried_out_once_the_pid_is_known(tmp_path: Path) -> None:
    async def main() -> None:
        async with _world(tmp_path, defer_launch=True) as w:
            turn = w.turn()
            root = turn.start("go", "scripted", yolo="none", options={})
            turn.cancel()
            assert root.phase is RunPhase.LAUNCHING and root.outcome is None  # no pid to signal yet
            w.launcher.report(root.id)
            assert root.phase is RunPhase.STOPPING
            _hello(root)
            sent = w.to(root)
            assert isinstance(sent[0], StartRun) and sent[1] == RunControl(action=ControlAction.CANCEL,
                                                                           reason="cancelled")
            w.launcher.handles[root.id].exit(0)
            await _until(lambda: root.phase is RunPhase.GONE, "the exit to be seen")
            assert root.outcome is not None and root.outcome.status == RunStatus.CANCELLED
            assert w.services.slots.live == set() and w.forgotten == [turn.id]

    asyncio.run(main())


def test_a_run_given_up_on_while_launching_has_its_process_killed_when_it_arrives(tmp_path: Path) -> None:
    async def main() -> None:
        async with _world(tmp_path, defer_launch=True) as w:
            turn = w.turn()
            root = turn.start("go", "scripted", yolo="none", options={})
            await root.kill_now("the daemon is shutting down")  # shutdown ran out of time mid-start
            assert root.phase is RunPhase.ENDED and root.outcome is not None
            assert w.services.slots.live == {root.id}, "its slot must stay taken until its start is reported"
            w.launcher.report(root.id)
            assert root.phase is RunPhase.ENDED and root.pid >= 900_000
            assert w.to(root) == [] and root.peer is None  # nothing was sent to it: it never ran
            w.launcher.handles[root.id].exit(-9)
            await _until(lambda: root.phase is RunPhase.GONE, "the exit to be seen")
            assert w.services.slots.live == set() and w.forgotten == [turn.id]

    asyncio.run(main())


def test_a_start_that_fails_off_the_loop_ends_the_run_saying_why(tmp_path: Path) -> None:
    async def main() -> None:
        async with _world(tmp_path, fail_launch=True, defer_launch=True) as w:
            turn = w.turn()
            root = turn.start("go", "scripted", yolo="none", options={})
            assert root.phase is RunPhase.LAUNCHING
            w.launcher.report(root.id)
            assert root.phase is RunPhase.GONE and root._secret is None
            assert root.outcome is not None and root.outcome.stop_reason == StopReason.PANIC
            assert "could not start a worker process: no more processes" in root.outcome.error
            assert w.services.slots.live == set() and w.forgotten == [turn.id]

    asyncio.run(main())


def test_a_worker_that_dies_before_its_result_ends_as_a_crash_naming_the_signal(tmp_path: Path) -> None:
    async def main() -> None:
        async with _world(tmp_path) as w:
            turn = w.turn()
            root = turn.start("go", "scripted", yolo="none", options={})
            _hello(root)
            w.launcher.handles[root.id].exit(-9)
            await _until(lambda: root.phase is RunPhase.GONE, "the exit to be seen")
            assert root.outcome is not None and root.outcome.stop_reason == StopReason.PANIC
            assert "killed by signal 9 (SIGKILL) before reporting a result" in root.outcome.error

    asyncio.run(main())


def test_messages_before_hello_are_ignored_and_a_second_result_changes_nothing(tmp_path: Path) -> None:
    async def main() -> None:
        async with _world(tmp_path) as w:
            turn = w.turn()
            root = turn.start("go", "scripted", yolo="none", options={})
            root.receive(_done("too early"))  # before hello: no outcome from an unstarted run
            root.receive(LeaseRequest(id=1))
            assert root.phase is RunPhase.STARTING and w.to(root) == []
            _hello(root)
            root.receive(_done("first"))
            root.receive(_done("second"))
            assert root.outcome is not None and root.outcome.output == "first"

    asyncio.run(main())


def test_a_stop_while_starting_cancels_right_after_the_start_message(tmp_path: Path) -> None:
    async def main() -> None:
        async with _world(tmp_path) as w:
            turn = w.turn()
            root = turn.start("go", "scripted", yolo="none", options={})
            turn.cancel()
            assert root.phase is RunPhase.STOPPING
            _hello(root)
            sent = w.to(root)
            assert isinstance(sent[0], StartRun) and sent[1] == RunControl(action=ControlAction.CANCEL,
                                                                           reason="cancelled")
            root.receive(_done("partial"))  # the worker reports what it had: the stop is what counts
            assert root.outcome is not None and root.outcome.status == RunStatus.CANCELLED
            assert root.outcome.output == "partial" and root.outcome.error == "cancelled by the user"
            w.launcher.handles[root.id].exit(0)
            await _until(lambda: root.phase is RunPhase.GONE, "the exit to be seen")

    asyncio.run(main())


# -- delegation and questions ------------------------------------------------------------------------------


def test_a_child_outcome_reaches_its_parent_unchanged_and_stopping_the_parent_stops_the_child(
        tmp_path: Path) -> None:
    async def main() -> None:
        async with _world(tmp_path) as w:
            turn = w.turn()
            root = turn.start("go", "scripted", yolo="none", options={"model_override": "m"})
            _hello(root)
            root.receive(DelegateRequest(id=5, agent="scripted", task="look", call_id="c1", context="facts"))
            (child,) = root.children.values()
            assert child.spec.context == "facts" and child.spec.options == {"model_override": "m"}
            assert root.clock is not None and root.clock.frozen_by("delegation")
            _hello(child)
            handoff = {"conclusion": "seen", "status": "ok"}
            child.receive(RunResult(outcome=RunOutcome(status=RunStatus.DONE, stop_reason=StopReason.AGENT_EXIT,
                                                       output="report", handoff=handoff, steps=3)))
            (reply,) = [m for m in w.to(root) if isinstance(m, DelegateResult)]
            assert reply.id == 5 and reply.outcome == child.outcome
            assert (reply.outcome.run, reply.outcome.agent, reply.outcome.handoff, reply.outcome.steps) == (
                child.id, "scripted", handoff, 3)
            assert not root.clock.frozen_by("delegation")

            root.receive(DelegateRequest(id=6, agent="scripted", task="more"))
            second = [c for c in root.children.values() if c is not child][0]
            _hello(second)
            turn.cancel()
            assert second.phase is RunPhase.STOPPING and second.stop_reason == StopReason.CANCELLED

    asyncio.run(main())


def _stopped_runs(w: _World, turn: TurnController) -> tuple[str, str, str]:
    """A stopped turn's root run, the child it started for call c1, and that child's child for call g1."""
    registry = w.services.registry
    old = registry.add_turn(turn.id, "go", agent="scripted")
    registry.add_run("rOldRoot", turn.id, old, None, "scripted", "", "go")
    registry.add_run("rDecoy", turn.id, old, "rOtherParent", "scripted", "c1", "look")  # same call, other parent
    registry.add_run("rOldChild", turn.id, old, "rOldRoot", "scripted", "c1", "look")
    registry.add_run("rOldGrandchild", turn.id, old, "rOldChild", "scripted", "g1", "deeper")
    return "rOldRoot", "rOldChild", "rOldGrandchild"


def test_a_child_of_a_run_the_daemon_interrupts_is_interrupted_too_and_a_replay_is_asked_for_by_call_id(
        tmp_path: Path) -> None:
    async def main() -> None:
        async with _world(tmp_path) as w:
            turn = w.turn()
            stopped_root, stopped_child, stopped_grandchild = _stopped_runs(w, turn)
            root = turn.start("go", "scripted", yolo="none", options={RESUME_OPTION: {"turn": 1, "run": stopped_root}})
            _hello(root)
            root.receive(DelegateRequest(id=5, agent="scripted", task="look", call_id="c1", replay=True))
            (child,) = root.children.values()
            # The daemon names the run the replay continues from its own record, never from the request.
            assert child.spec.options == {REPLAY_OPTION: {"call_id": "c1", "parent_run": stopped_root,
                                                          "run": stopped_child}}
            assert child.spec.call_id == "c1"
            _hello(child)
            # A replaying child's own interrupted delegation is a replay of its interrupted child, one level down.
            child.receive(DelegateRequest(id=7, agent="scripted", task="deeper", call_id="g1", replay=True))
            (grandchild,) = child.children.values()
            assert grandchild.spec.options == {REPLAY_OPTION: {"call_id": "g1", "parent_run": stopped_child,
                                                               "run": stopped_grandchild}}
            child.receive(DelegateRequest(id=8, agent="scripted", task="new", call_id="g9", replay=True))
            assert [c.spec.options[REPLAY_OPTION]["run"] for c in child.children.values()] == [stopped_grandchild, ""]
            root.stop(StopReason.INTERRUPTED, "yagentd is shutting down")
            # Never "cancelled": the parent's model must read it as an interruption, which the task resumes.
            assert child.phase is RunPhase.STOPPING and child.stop_reason == StopReason.INTERRUPTED
            assert RunControl(action=ControlAction.CANCEL, reason=StopReason.INTERRUPTED.value) in w.to(child)

    asyncio.run(main())


def test_a_resumed_turn_runs_on_the_model_its_stopped_turn_was_started_on(tmp_path: Path) -> None:
    async def main() -> None:
        async with _world(tmp_path) as w:
            turn = w.turn()
            root = turn.start("go", "scripted", yolo="plan", options={"model_override": "local"})
            _hello(root)
            root.receive(RunResult(outcome=RunOutcome(status=RunStatus.CANCELLED, stop_reason=StopReason.CANCELLED)))
            await _until(lambda: not turn.in_flight, "the turn ended")
            (stopped,) = w.services.registry.turns(turn.id)
            assert stopped.model_override == "local"
            resumed = turn.resume_stopped(stopped)
            assert resumed.spec.options["model_override"] == "local" and resumed.spec.yolo == "plan"
            assert resumed.spec.options[RESUME_OPTION] == {"turn": 1, "run": root.id}

    asyncio.run(main())


def test_a_replay_asked_for_by_a_run_that_continues_nothing_is_refused(tmp_path: Path) -> None:
    async def main() -> None:
        async with _world(tmp_path) as w:
            turn = w.turn()
            _stopped_runs(w, turn)
            # A fresh turn's root (or any run not resumed) must not get an interrupted run's record handed over.
            root = turn.start("go", "scripted", yolo="none", options={})
            _hello(root)
            root.receive(DelegateRequest(id=5, agent="scripted", task="look", call_id="c1", replay=True))
            root.receive(DelegateRequest(id=6, agent="scripted", task="look", call_id="c2"))
            (refusal,) = [m for m in w.to(root) if isinstance(m, ErrorReply)]
            assert (refusal.id, refusal.code) == (5, ErrorCode.BAD_REQUEST) and "delegate anew" in refusal.message
            (child,) = root.children.values()
            assert child.spec.call_id == "c2" and REPLAY_OPTION not in child.spec.options

    asyncio.run(main())


def test_bad_delegations_are_refused_with_a_code(tmp_path: Path) -> None:
    async def main() -> None:
        async with _world(tmp_path) as w:
            turn = w.turn()
            root = turn.start("go", "scripted", yolo="none", options={})
            _hello(root)
            root.receive(DelegateRequest(id=1, agent="", task="x"))
            root.spec.depth = 4
            root.receive(DelegateRequest(id=2, agent="scripted", task="x"))
            codes = [(m.id, m.code) for m in w.to(root) if isinstance(m, ErrorReply)]
            assert codes == [(1, ErrorCode.BAD_REQUEST), (2, ErrorCode.TOO_DEEP)] and not root.children

    asyncio.run(main())


def test_a_question_waits_for_an_answer_and_closes_for_everyone_when_its_run_ends(tmp_path: Path) -> None:
    async def main() -> None:
        async with _world(tmp_path) as w:
            turn = w.turn()
            root = turn.start("go", "scripted", yolo="none", options={})
            _hello(root)
            ask = Question(request_id="", kind=QuestionKind.CONFIRM, prompt="Deploy?")
            root.receive(AskUser(id=3, question=ask))
            root.receive(AskUser(id=4, question=Question(request_id="", kind=QuestionKind.INPUT, prompt="Name?")))
            assert turn.row.state == TaskState.WAITING and root.clock is not None and root.clock.idle_frozen
            turn.answer(f"{root.id}.3", {"value": "yes"}, by="tester")
            assert UserAnswer(id=3, answer={"value": "yes"}) in w.to(root)
            root.receive(_done())
            assert turn.questions == {}
            closes = [e[5] for e in w.events(turn.id) if e[3] == EventType.USER_HELP_RESPONSE]
            assert closes == [{"request_id": f"{root.id}.3", "answer": {"value": "yes"}, "by": "tester"},
                              {"request_id": f"{root.id}.4", "answer": {"cancelled": True}, "by": "daemon"}]

    asyncio.run(main())


def test_a_lease_withdrawn_while_queued_ends_the_slot_wait(tmp_path: Path) -> None:
    async def main() -> None:
        async with _world(tmp_path) as w:
            turn = w.turn()
            a = turn.start("go", "scripted", yolo="none", options={})
            b = turn.create_run("scripted", "other")
            b.admit()
            _hello(a)
            _hello(b)
            a.receive(LeaseRequest(id=1))  # the only slot
            b.receive(LeaseRequest(id=1))
            assert set(b.leases.waiting) == {1} and b.clock is not None and b.clock.frozen_by("lease")
            b.receive(LeaseRelease(id=1))
            assert not b.leases.waiting and not b.clock.frozen_by("lease")
            assert b.usage.slot_wait_seconds > 0
            waits = [e[5]["waiting"] for e in w.events(turn.id) if e[3] == EventType.LLM_SLOT_WAIT]
            assert waits == [True, False]

    asyncio.run(main())


def _start_of(w: _World, run: RunSupervisor) -> StartRun:
    (start,) = [m for m in w.to(run) if isinstance(m, StartRun)]
    return start


def test_a_warm_model_loop_gets_a_free_slot_with_its_start_and_gives_it_back_when_another_run_would_wait(
        tmp_path: Path) -> None:
    async def main() -> None:
        async with _world(tmp_path) as w:  # one slot in all
            turn = w.turn()
            a = turn.start("go", "scripted", yolo="none", options={})
            b = turn.create_run("scripted", "other")
            b.admit()
            _hello(a, warm_model_loop=True)
            assert _start_of(w, a).lease == -1 and w.services.leases.in_use == 1
            _hello(b, warm_model_loop=True)
            assert _start_of(w, b).lease == 0  # none free: it asks when it calls
            b.receive(LeaseRequest(id=1))
            assert set(b.leases.waiting) == {1}
            assert LeaseRecall(id=-1) in w.to(a)  # lent, not yet taken: asked back
            a.receive(LeaseRelease(id=-1, unused=True))
            assert LeaseGrant(id=1) in w.to(b) and not b.leases.waiting
            b.receive(LeaseRelease(id=1))
            stats = w.services.leases.stats()
            assert (stats["in_use"], stats["granted_total"], stats["handed_total"]) == (0, 1, 0)
            # Taken by its call before the recall came: counted as granted, and as handed over.
            c = turn.create_run("scripted", "third")
            c.admit()
            _hello(c, warm_model_loop=True)
            assert _start_of(w, c).lease == -1
            c.receive(LeaseRelease(id=-1))
            stats = w.services.leases.stats()
            assert (stats["in_use"], stats["granted_total"], stats["handed_total"]) == (0, 2, 1)

    asyncio.run(main())


def test_a_lease_request_under_an_id_of_the_daemons_own_is_refused(tmp_path: Path) -> None:
    async def main() -> None:
        async with _world(tmp_path) as w:
            turn = w.turn()
            a = turn.start("go", "scripted", yolo="none", options={})
            _hello(a)
            for forged in (-1, 0):  # the ids slots handed over ahead get, and one nobody uses
                a.receive(LeaseRequest(id=forged))
            refused = [m for m in w.to(a) if isinstance(m, ErrorReply)]
            assert [(m.id, m.code) for m in refused] == [(-1, ErrorCode.BAD_REQUEST), (0, ErrorCode.BAD_REQUEST)]
            assert w.services.leases.in_use == 0 and not a.leases.waiting

    asyncio.run(main())


def test_no_slot_comes_with_the_start_of_a_cold_worker_a_kind_without_model_steps_or_a_paused_turn(
        tmp_path: Path) -> None:
    async def main() -> None:
        async with _world(tmp_path) as w:
            turn = w.turn()
            cold = turn.start("go", "scripted", yolo="none", options={})
            _hello(cold)  # no spec in hand, no model loop said
            assert _start_of(w, cold).lease == 0
            peer = b"worker-of-x"
            other = turn.create_run("scripted", "other")
            other.admit()
            secret = w.launcher.secrets[other.id]
            assert other.bind(peer, hello_proof(secret, other.id, peer)) is None
            other.receive(WorkerHello(version=PROTOCOL_VERSION, run=other.id, pid=other.pid,
                                      proof=hello_proof(secret, other.id, peer), spec_in_hand=True))
            assert _start_of(w, other).lease == 0
            turn.pause()
            paused = turn.create_run("scripted", "third")
            paused.admit()
            _hello(paused, warm_model_loop=True)
            assert _start_of(w, paused).paused and _start_of(w, paused).lease == 0
            assert w.services.leases.in_use == 0

    asyncio.run(main())


def test_a_parent_gets_a_slot_with_the_result_of_its_last_running_child_only(tmp_path: Path) -> None:
    async def main() -> None:
        async with _world(tmp_path, max_parallel_delegations=2) as w:
            turn = w.turn()
            root = turn.start("go", "scripted", yolo="none", options={})
            _hello(root, warm_model_loop=True)
            root.receive(LeaseRelease(id=-1))  # its first call took the slot that came with its start
            root.receive(DelegateRequest(id=5, agent="scripted", task="one"))
            root.receive(DelegateRequest(id=6, agent="scripted", task="two"))
            first, second = root.children.values()
            _hello(first)
            _hello(second)
            first.receive(_done("one"))
            (reply,) = [m for m in w.to(root) if isinstance(m, DelegateResult)]
            assert reply.lease == 0  # the other child still works: the parent's next call waits for it
            second.receive(_done("two"))
            last = [m for m in w.to(root) if isinstance(m, DelegateResult)][-1]
            assert last.id == 6 and last.lease == -2 and w.services.leases.in_use == 1
            root.receive(LeaseRelease(id=-2))
            assert w.services.leases.stats()["handed_total"] == 2

    asyncio.run(main())


# -- usage, money and spending limits -------------------------------------------------------------------------


def _call(cost: float | None, *, tokens: int = 1000, error: str = "") -> EventBatch:
    data = event_data.llm_call_end(1, "p", "m", None if error else event_data.usage_data(tokens, 100, 400), 0.1,
                                   error=error, cost_usd=cost)
    return EventBatch(events=[[EventType.LLM_CALL_END.value, 1.0, data]])


def test_a_runs_model_calls_add_up_and_an_unknown_price_stays_unknown(tmp_path: Path) -> None:
    async def main() -> None:
        async with _world(tmp_path) as w:
            root = w.turn().start("go", "scripted", yolo="none", options={})
            _hello(root)
            for batch in (_call(0.25), _call(None), _call(0.5), _call(None, error="503")):
                root.receive(batch)
            u = root.usage
            assert (u.requests, u.input_tokens, u.cached_input_tokens, u.output_tokens) == (4, 3000, 1200, 300)
            assert u.cost_usd == pytest.approx(0.75) and u.unpriced_requests == 1 and not u.cost_known
            root.receive(_call(float("nan")))  # a price nobody can trust counts as unknown, never as money
            assert u.cost_usd == pytest.approx(0.75) and u.unpriced_requests == 2

    asyncio.run(main())


def test_a_task_at_its_spending_limit_pauses_asks_and_gets_no_model_slot_until_raised(tmp_path: Path) -> None:
    async def main() -> None:
        async with _world(tmp_path, max_cost_per_task=1.0) as w:
            turn = w.turn()
            root = turn.start("go", "scripted", yolo="none", options={})
            _hello(root)
            root.receive(_call(0.6))
            assert not turn.over_budget
            root.receive(_call(0.6))
            assert turn.over_budget and turn.paused and turn.row.state == TaskState.PAUSED
            (pending,) = turn.questions.values()
            q = pending.question
            assert q.kind == QuestionKind.SELECT and q.options == ["raise to $2.00", "stop"]
            assert "$1.20 spent this task" in q.prompt and "max_cost_per_task" in q.prompt
            root.receive(LeaseRequest(id=7))  # a tool asking for a model call while the limit stands
            assert not any(isinstance(m, LeaseGrant) for m in w.to(root))
            turn.answer(q.request_id, {"value": "raise to $2.00"}, by="tester")
            assert not turn.over_budget and not turn.paused
            assert LeaseGrant(id=7) in w.to(root)
            root.receive(_call(0.9))  # $2.10 now: past the raised limit, so it asks again
            assert turn.over_budget
            (pending,) = turn.questions.values()
            turn.answer(pending.question.request_id, {"value": "stop"}, by="tester")
            assert root.phase is RunPhase.STOPPING and root.stop_reason == StopReason.CANCELLED
            assert "spending limit" in root.stop_detail

    asyncio.run(main())


def test_the_daily_limit_counts_every_task(tmp_path: Path) -> None:
    async def main() -> None:
        async with _world(tmp_path, max_cost_per_day=1.0) as w:
            first, second = w.turn(), w.turn()
            a = first.start("go", "scripted", yolo="none", options={})
            b = second.start("go", "scripted", yolo="none", options={})
            _hello(a)
            _hello(b)
            a.receive(_call(0.7))
            b.receive(_call(0.4))  # the second task's call crosses the day's limit
            assert second.over_budget and not first.over_budget
            (pending,) = second.questions.values()
            assert "today, over all tasks" in pending.question.prompt
            assert w.services.spend.spent == pytest.approx(1.1)

    asyncio.run(main())
