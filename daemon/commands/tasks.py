"""`list_tasks` and `task_info`: what `yagent ps`, `yagent top` and clients show."""

from __future__ import annotations

import asyncio

from yagent.ipc.messages import ListTasks, TaskDetail, TaskInfo, TaskList, TaskSummary
from yagent.ipc.vocabulary import ErrorCode

from ..registry import MAX_LIST_LIMIT, TaskRow
from ..run_accounting import ProcessSample, sample_tree
from ..task_views import LiveFigures, task_summary, turn_summary
from . import CommandError, DaemonView, command, resolve_task


async def _sample(daemon: DaemonView, rows: list[TaskRow]) -> dict[str, LiveFigures]:
    """The live runs' figures, their process trees sampled in one thread (psutil blocks)."""
    runs = [run for row in rows if (task := daemon.tasks.get(row.id)) is not None for run in task.runs.values()]
    pids = {run.id: run.pid for run in runs if run.pid and not run.exited.is_set()}
    samples: dict[str, ProcessSample | None] = {}
    if pids:
        samples = await asyncio.to_thread(lambda: {rid: sample_tree(pid) for rid, pid in pids.items()})
    limit = daemon.settings.max_in_flight_requests
    figures: dict[str, LiveFigures] = {}
    for run in runs:
        live = LiveFigures(usage=run.usage, unconfined=run.unconfined.value if run.unconfined else "")
        if run.leases.waiting and not run.ended:
            live.waiting = (f"a model slot ([llm] max_in_flight_requests = {limit}, all in use)"
                            if not run.turn.over_budget else "an answer about the spending limit")
        if run.approvals.running and not run.ended:
            live.waiting = run.approvals.running
        sample = samples.get(run.id)
        if sample is not None:
            live.sample, live.cpu_percent = sample, sample.cpu_percent(run.last_sample)
            run.last_sample = sample
        figures[run.id] = live
    return figures


def summarize(daemon: DaemonView, row: TaskRow, live: dict[str, LiveFigures], *, current_turn_only: bool = True,
              exact_seq: bool = False) -> TaskSummary:
    task = daemon.tasks.get(row.id)
    turn = daemon.registry.last_turn(row.id) if current_turn_only else None
    questions = [p.question for p in task.questions.values()] if task else []
    # Only from memory: listing thousands of old tasks must not read (and repair) their event logs.
    hub = daemon.hub
    runs = daemon.registry.runs_of(row.id, turn)
    if current_turn_only and task is not None:  # and what earlier turns kept working in the background
        shown = {r.id for r in runs}
        kept = [r.id for r in task.background_runs if r.id not in shown]
        runs = daemon.registry.runs_by_id(kept) + runs
    return task_summary(row, runs, questions=questions, live=live,
                        last_seq=lambda: hub.last_seq(row.id) if exact_seq else hub.cached_last_seq(row.id),
                        cost_limit=task.cost_limit if task else daemon.settings.max_cost_per_task)


@command(ListTasks)
async def list_tasks(daemon: DaemonView, msg: ListTasks) -> TaskList:
    if msg.limit < 1:
        raise CommandError(ErrorCode.BAD_REQUEST, f"limit must be at least 1 (got {msg.limit}); "
                                                  f"at most {MAX_LIST_LIMIT} tasks are listed at once")
    rows = daemon.registry.list_tasks(msg.project, msg.limit)
    live = await _sample(daemon, rows)
    return TaskList(id=msg.id, tasks=[summarize(daemon, row, live) for row in rows])


@command(TaskInfo)
async def task_info(daemon: DaemonView, msg: TaskInfo) -> TaskDetail:
    row = resolve_task(daemon, msg.task)
    live = await _sample(daemon, [row])
    return TaskDetail(id=msg.id, task=summarize(daemon, row, live, current_turn_only=False, exact_seq=True),
                      turns=[turn_summary(t) for t in daemon.registry.turns(row.id)])
