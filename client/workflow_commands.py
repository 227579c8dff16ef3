"""`yagent workflow run NAME` and `yagent workflow status`.

A workflow runs as a task whose root run is the workflow's engine; running it again sends a new turn to the
same task (found by its title), so its role nodes — continuable sub-agents — go on from their conversations.
Its status is what its engine last decided and why, read from the task's events: the client never reads a
workflow's fact files (they are the workers' format), and the daemon never parses them.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from yagent.ipc import DaemonClient, IpcError
from yagent.ipc.event_data import WorkflowDecision
from yagent.ipc.messages import Event, ListTasks, Replay, ReplayReply, TaskList, TaskSummary
from yagent.ipc.vocabulary import EventType
from yagent.ipc.workflows import BUILTIN_WORKFLOWS, WORKFLOW_AGENT, workflow_dir, workflow_title

from . import exit_codes, headless

__all__ = ["describe_decision", "workflow_run", "workflow_status"]

_PREFIX = workflow_title("")
_LOOK_BACK = 2000  # events before a task's newest where its last decision is looked for
_TASKS = 200


async def _task_of(project: Path, name: str) -> str | None:
    async with DaemonClient() as client:
        found = await client.request(ListTasks(id=0, project=str(project), limit=_TASKS), TaskList)
    return next((t.task for t in found.tasks if t.title == workflow_title(name)), None)  # newest first


def workflow_run(name: str, project: Path, *, yolo: str, detach: bool, as_json: bool, verbose: bool,
                 env: dict[str, str] | None = None) -> int:
    """Run (or go on with) the project's workflow `name` as a task; `env`: the key variables its node runs use."""
    if name not in BUILTIN_WORKFLOWS:
        print(f"yagent: there is no workflow {name!r}; built in: {', '.join(BUILTIN_WORKFLOWS)}", file=sys.stderr)
        return exit_codes.USAGE
    try:
        task = asyncio.run(_task_of(project, name))
    except IpcError as exc:
        print(f"yagent: {exc}", file=sys.stderr)
        return exit_codes.for_ipc_error(exc)
    if task is None and not as_json:
        print(f"yagent: a new {name} workflow in {project}; its facts go to {workflow_dir(project, name)}",
              file=sys.stderr)
    return headless.run_headless(project, workflow_title(name), task=task, agent=WORKFLOW_AGENT, yolo=yolo,
                                 detach=detach, as_json=as_json, verbose=verbose, env=env)


async def _last_decision(client: DaemonClient, summary: TaskSummary) -> WorkflowDecision | None:
    after, last = max(0, summary.last_seq - _LOOK_BACK), None
    while True:
        page = await client.request(Replay(id=0, task=summary.task, after_seq=after), ReplayReply)
        for item in page.events:
            ev = Event.from_published(summary.task, item)
            after = ev.seq
            if ev.type == EventType.WORKFLOW_DECISION:
                last = WorkflowDecision.read(ev.data) or last
        if not page.more or not page.events:
            return last


async def _status(project: Path | None) -> list[tuple[TaskSummary, WorkflowDecision | None]]:
    async with DaemonClient() as client:
        tasks = await client.request(ListTasks(id=0, project=str(project) if project else None, limit=_TASKS),
                                     TaskList)
        found = [t for t in tasks.tasks if t.title.startswith(_PREFIX)]
        return [(t, await _last_decision(client, t)) for t in found]


def describe_decision(decision: WorkflowDecision) -> str:
    """One line: what the engine chose at its last decision and why."""
    if decision.error:
        return f"stopped: {decision.error}"
    if decision.agent:
        return f"{decision.agent} — {decision.task} ({decision.reason})"
    return f"no step: {decision.situation} → {decision.action} ({decision.reason})"


def workflow_status(project: Path | None, as_json: bool) -> int:
    try:
        found = asyncio.run(_status(project))
    except IpcError as exc:
        print(f"yagent: {exc}", file=sys.stderr)
        return exit_codes.for_ipc_error(exc)
    if as_json:
        rows: list[dict[str, Any]] = [
            {"task": t.task, "workflow": t.title.removeprefix(_PREFIX), "state": t.state, "project": t.project,
             "decision": d.to_wire() if d is not None else None} for t, d in found]
        print(json.dumps(rows))
        return exit_codes.OK
    if not found:
        print("no workflows yet — start one with `yagent workflow run fiction --project DIR`")
        return exit_codes.OK
    for summary, decision in found:
        print(f"{summary.title.removeprefix(_PREFIX)} · task {summary.task} · {summary.state} · {summary.project}")
        if decision is None:
            print("  no decision yet")
            continue
        if decision.progress:
            print(f"  {decision.progress}")
        print(f"  decision {decision.step}: {describe_decision(decision)}")
    return exit_codes.OK
