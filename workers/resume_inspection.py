"""The short process the daemon starts to learn what `continue` would do with a stopped turn's delegations.

The daemon never reads rollouts, so `yagent resume` asks this process: started from the forkserver like a
worker (`call_entry`), it confines itself first thing to reading — the system and Python trees, the project
(its git identity is read from `.git`) and the task's own state directory, opened without following a link —
and writes nothing. It gets no provider table, key or secret. It then reads the stopped turn the way the
resumed Director will (memory, then the stopped root run's rollout, then the resume repair), takes the last
step's interrupted delegations by the resume's own rule (`turn_resume.interrupted_delegations`), and judges
each with the call a replay makes (`delegation_replay.assess_delegation`); a replayable child's own
interrupted delegations are judged the same way, one level down, with that child's run as their parent.
Its one reply (`ResumeInspectionReport`, msgpack) goes back through the pipe the daemon gave it.
"""

from __future__ import annotations

import os
from multiprocessing.connection import Connection
from pathlib import Path

from yagent.ipc.confinement import ConfinementSpec
from yagent.ipc.messages import InterruptedChild, ResumeInspectionReport, ResumeInspectionSpec
from yagent.ipc.records import encode
from yagent.ipc.run_settings import RunSettings
from yagent.ipc.state_layout import task_dir, tasks_dir
from yagent.ipc.vocabulary import ReplayVerdict, YoloLevel

from . import entry
from .agents.custom_agents import CustomAgentRegistry
from .agents.delegation_replay import assess_delegation, finished_steps
from .agents.meta import first_run_kind
from .agents.subagents import replay_role
from .agents.turn_resume import interrupted_delegations, stopped_turn
from .llm import Message
from .memory import MemoryFileError, load_memory, memory_path
from .memory.replay import find_child_rollout, first_record
from .memory.resume_repair import ResumeOrderError, repair_for_resume
from .sandbox._landlock import LandlockError, restrict_self
from .sandbox.policy import inspection_rules
from .tools import Surface, SurfaceError, build_surface

__all__ = ["MAX_DEPTH", "MAX_REPORTED", "inspect_stopped_turn", "inspection_main"]

MAX_DEPTH = 4  # delegation levels looked at (Director → Repo → DevOps is three)
MAX_REPORTED = 200  # interrupted calls reported at most; a forged history cannot make the reply unbounded
_REASON_CHARS = 1000


def inspection_main(task: str, reply: Connection, confinement: ConfinementSpec, spec: ResumeInspectionSpec) -> None:
    """Confine, inspect `spec`'s stopped turn, send the report on `reply`, exit."""
    entry._leave_the_forkserver()
    entry._keep_state_private()
    entry._become_run_process(f"inspect-{task}", "inspect")
    try:
        report = _confined_inspection(confinement, spec)
    except Exception as exc:  # the daemon must hear why, never a silent EOF
        report = ResumeInspectionReport(problem=f"the inspection failed: {type(exc).__name__}: {exc}")
    try:
        reply.send_bytes(encode(report))
    finally:
        reply.close()
    os._exit(0)


def _confined_inspection(confinement: ConfinementSpec, spec: ResumeInspectionSpec) -> ResumeInspectionReport:
    held = _hold_task_dir(spec)
    if isinstance(held, str):
        return ResumeInspectionReport(problem=held)
    try:
        if confinement.unconfined is None:
            try:
                restrict_self(confinement.abi, inspection_rules(confinement, task_dir_fd=held))
            except (LandlockError, OSError) as exc:  # never on unconfined without saying so
                return ResumeInspectionReport(problem=f"the inspection could not confine itself ({exc}); nothing "
                                                      "was read")
    finally:
        os.close(held)
    report = inspect_stopped_turn(spec)
    report.unconfined = confinement.unconfined
    return report


def _hold_task_dir(spec: ResumeInspectionSpec) -> int | str:
    """The task's directory opened without following a link at `tasks/` or the task (a swapped-in link would
    hand the inspection someone else's files), or why it cannot be."""
    flags = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    where = tasks_dir(Path(spec.home))
    try:
        tasks = os.open(where, flags)
    except OSError as exc:
        return f"{where} is not a directory yagent made ({exc.strerror}); nothing was read"
    try:
        if "/" in spec.task or spec.task in ("", ".", ".."):
            return f"{spec.task!r} is not a task id; nothing was read"
        return os.open(spec.task, flags, dir_fd=tasks)
    except OSError as exc:
        return (f"{where / spec.task} is not the task's own directory ({exc.strerror}: a link, or missing); nothing "
                "was read")
    finally:
        os.close(tasks)


def inspect_stopped_turn(spec: ResumeInspectionSpec) -> ResumeInspectionReport:
    """What a resume of `spec`'s stopped turn does with each interrupted delegation, read from the files alone."""
    home = Path(spec.home)
    if spec.agent != "director":
        return ResumeInspectionReport(problem=f"a {spec.agent} turn does not go on from its record: `continue` runs "
                                              "it again from its message")
    try:
        memory = load_memory(memory_path(home, spec.task))
    except (OSError, MemoryFileError) as exc:
        return ResumeInspectionReport(problem=f"the task's memory cannot be read ({exc})")
    found = stopped_turn(task_dir(home, spec.task), spec.stopped_run, memory.snapshot())
    try:
        history = repair_for_resume(found.history)
    except ResumeOrderError as exc:
        return ResumeInspectionReport(problem=f"the stopped turn's history cannot be resumed ({exc})")
    yolo = YoloLevel(spec.yolo) if spec.yolo in {y.value for y in YoloLevel} else YoloLevel.NONE
    try:
        surface = build_surface("director", yolo=yolo,
                                extra_specs=CustomAgentRegistry(home, spec.task).specs())
    except SurfaceError as exc:
        return ResumeInspectionReport(problem=f"the Director's tools cannot be assembled ({exc})")
    children: list[InterruptedChild] = []
    _judge(spec, history, surface, parent_run=spec.stopped_run, parent_call="", depth=1, yolo=yolo, out=children)
    return ResumeInspectionReport(children=children, problem=found.problem)


def _judge(spec: ResumeInspectionSpec, history: list[Message], surface: Surface, *, parent_run: str,
           parent_call: str, depth: int, yolo: YoloLevel, out: list[InterruptedChild]) -> None:
    settings: RunSettings = spec.settings
    for call in interrupted_delegations(history, surface):
        if len(out) >= MAX_REPORTED:
            return
        tool = surface.resolve(call.name)
        agent = (tool.delegate_target if tool is not None else None) or call.name
        judged_parent = parent_run
        if agent == "meta":
            # A Meta run whose design was registered replays the first run it started, Meta's report being its.
            first_run = _meta_first_run(spec, call.id, parent_run)
            if first_run is None:
                out.append(InterruptedChild(
                    call_id=call.id, agent=agent, verdict=ReplayVerdict.STARTS_OVER,
                    reason="meta stopped before it had started its agent's first run: `continue` designs it again",
                    depth=depth, parent=parent_call))
                continue
            agent, judged_parent = first_run
        role = replay_role(agent)
        if role is None:
            out.append(InterruptedChild(call_id=call.id, agent=agent, verdict=ReplayVerdict.STARTS_OVER,
                                        reason=f"{agent} does not pick up where it stopped: `continue` runs its "
                                               "task again from the start", depth=depth, parent=parent_call))
            continue
        verdict = assess_delegation(Path(spec.home), spec.task, call.id, parent_run=judged_parent,
                                    project_root=Path(spec.project_root), settings=settings, role=role)
        replay = verdict.replay
        step = (finished_steps(replay.messages, replay.compacted_at) + 1
                if verdict.replayable and replay is not None else 0)
        out.append(InterruptedChild(call_id=call.id, agent=agent, verdict=verdict.verdict,
                                    reason=verdict.reason[:_REASON_CHARS], step=step, depth=depth,
                                    parent=parent_call))
        child_run = str((replay.meta if replay is not None else {}).get("run") or "")
        if step and depth < MAX_DEPTH and child_run:
            try:
                child_surface = build_surface(role, yolo=yolo)
            except SurfaceError:
                continue  # a role without a profile delegates nothing
            _judge(spec, replay.messages, child_surface, parent_run=child_run, parent_call=call.id, depth=depth + 1,
                   yolo=yolo, out=out)


def _meta_first_run(spec: ResumeInspectionSpec, call_id: str, parent_run: str) -> tuple[str, str] | None:
    """The kind of the first run the interrupted Meta run of `call_id` started, and that Meta run's id (the
    first run's parent); None when Meta had started none."""
    task = task_dir(Path(spec.home), spec.task)
    path = find_child_rollout(task, call_id, parent_run)
    record = first_record(path) if path is not None else None
    meta_run = str(record["payload"].get("run") or "") if record is not None else ""
    kind = first_run_kind(task, call_id, meta_run) if meta_run else None
    return (kind, meta_run) if kind is not None else None
