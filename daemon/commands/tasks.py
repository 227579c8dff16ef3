"""`list_tasks` and `task_info`: what `yagent ps` and clients show."""

from __future__ import annotations

from yagent.ipc.messages import ListTasks, TaskDetail, TaskInfo, TaskList, TaskSummary

from ..registry import MAX_LIST_LIMIT
from . import CommandError, command, resolve_task


def summarize(daemon, row, *, current_turn_only: bool = True, exact_seq: bool = False) -> TaskSummary:
    live = daemon.tasks.get(row.id)
    turn = daemon.registry.last_turn(row.id) if current_turn_only else None
    runs = daemon.registry.run_summaries(row.id, turn)
    if live:
        limit = daemon.settings.max_in_flight_requests
        for r in runs:
            run = daemon.runs.get(r.run)
            if run is not None and run.queued_leases and not run.finished:
                r.waiting = f"a model slot ([llm] max_in_flight_requests = {limit}, all in use)"
    questions = [p.question for p in live.questions.values()] if live else []
    summary = daemon.registry.task_summary(row, runs, questions)
    # Only from memory: listing thousands of old tasks must not read (and repair) their event logs.
    if daemon.hub is None:
        return summary
    cached = daemon.hub.last_seq(row.id) if exact_seq else daemon.hub.cached_last_seq(row.id)
    if cached is not None:
        summary.last_seq = max(cached, row.last_seq)
    return summary


@command(ListTasks)
async def list_tasks(daemon, msg: ListTasks) -> TaskList:
    if msg.limit < 1:
        raise CommandError("bad_request", f"limit must be at least 1 (got {msg.limit}); "
                                          f"at most {MAX_LIST_LIMIT} tasks are listed at once")
    rows = daemon.registry.list_tasks(msg.project, msg.limit)
    return TaskList(id=msg.id, tasks=[summarize(daemon, row) for row in rows])


@command(TaskInfo)
async def task_info(daemon, msg: TaskInfo) -> TaskDetail:
    row = resolve_task(daemon, msg.task)
    return TaskDetail(id=msg.id, task=summarize(daemon, row, current_turn_only=False, exact_seq=True),
                      turns=daemon.registry.turns(row.id))
