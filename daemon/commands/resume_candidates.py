"""`list_resume_candidates`: the tasks of every project that `continue` resumes (the rule of `ipc.resumable`)
and those whose last turn failed in a way it does not (listed with `resumable` false, never left out),
each stopped turn with what a short inspection process found `continue` will do with its interrupted
delegations (`resume_inspections.py`); a paused task needs none: it continues in place.

Answered in the background: the inspections take up to a few seconds, and the control loop serves on meanwhile.
At most `MAX_INSPECTED` tasks are inspected per request; the reports are forgotten once the reply is sent.
"""

from __future__ import annotations

import asyncio
import weakref

from yagent.ipc.messages import ListResumeCandidates, ResumeCandidate, ResumeCandidateList, ResumeInspectionReport
from yagent.ipc.vocabulary import ErrorCode, TaskState

from ..registry import MAX_LIST_LIMIT, TaskRow
from ..resume_inspections import MAX_AT_ONCE, Inspection, inspect_stopped_turns
from . import CommandError, DaemonView, command
from .task_control import last_turn_stopped_midway
from .tasks import summarize

__all__ = ["MAX_INSPECTED", "list_resume_candidates"]

MAX_INSPECTED = 20  # newest stopped tasks inspected per request: the reply stays within seconds
# One gate per daemon, over all requests: a client asking many times at once starts no more processes.
_GATES: weakref.WeakKeyDictionary[DaemonView, asyncio.Semaphore] = weakref.WeakKeyDictionary()


@command(ListResumeCandidates, in_background=True)
async def list_resume_candidates(daemon: DaemonView, msg: ListResumeCandidates) -> ResumeCandidateList:
    if msg.limit < 1:
        raise CommandError(ErrorCode.BAD_REQUEST, f"limit must be at least 1 (got {msg.limit}); "
                                                  f"at most {MAX_LIST_LIMIT} tasks are looked at")
    rows = [row for row in daemon.registry.list_tasks(None, msg.limit) if _candidate(daemon, row)]
    # Failed turns are listed too, saying `continue` does not pick them up: never silently left out.
    resumable = {row.id: row.state == TaskState.PAUSED or last_turn_stopped_midway(daemon, row) for row in rows}
    targets: list[Inspection] = []
    skipped: dict[str, str] = {}
    for row in rows:
        if row.state == TaskState.PAUSED or not resumable[row.id]:
            continue
        turns = daemon.registry.turns(row.id)
        if not turns or not turns[-1].root_run:
            skipped[row.id] = "it has no turn to resume; send it a new message instead"
        elif len(targets) >= MAX_INSPECTED:
            skipped[row.id] = (f"only the {MAX_INSPECTED} most recent stopped tasks are inspected at once; "
                               f"`yagent continue {row.id}` resumes it all the same")
        else:
            targets.append(Inspection(row, turns[-1]))
    gate = _GATES.setdefault(daemon, asyncio.Semaphore(MAX_AT_ONCE))
    reports = await inspect_stopped_turns(daemon.launcher, daemon.settings, home=daemon.home,
                                          runtime_dir=daemon.paths.root, abi=daemon.landlock_abi, targets=targets,
                                          gate=gate) if targets else {}
    candidates = []
    for row in rows:
        candidate = ResumeCandidate(task=summarize(daemon, row, {}), resumable=resumable[row.id])
        got = reports.get(row.id, skipped.get(row.id))
        if isinstance(got, ResumeInspectionReport):
            candidate.children, candidate.problem = got.children, got.problem
            candidate.unconfined = got.unconfined.value if got.unconfined else ""
        elif got:
            candidate.uninspected = got
        candidates.append(candidate)
    return ResumeCandidateList(id=msg.id, candidates=candidates)


def _candidate(daemon: DaemonView, row: TaskRow) -> bool:
    """Paused (continues in place), or with no turn in flight and its last turn stopped midway (`continue`
    resumes it) or failed (listed as not resumed)."""
    if row.state == TaskState.PAUSED:
        return True
    task = daemon.tasks.get(row.id)
    if task is not None and task.in_flight:
        return False
    return row.state == TaskState.FAILED or last_turn_stopped_midway(daemon, row)
