"""`list_tasks` and `task_info`: what `yagent ps` and clients show."""

from __future__ import annotations

from yagent.ipc.messages import ListTasks, TaskDetail, TaskInfo, TaskList, TaskSummary
from yagent.ipc.vocabulary import ErrorCode

from ..registry import MAX_LIST_LIMIT, TaskRow
from ..task_views import task_summary, turn_summary
from . import CommandError, DaemonView, command, resolve_task


def summarize(daemon: DaemonView, row: TaskRow, *, current_turn_only: bool = True,
              exact_seq: bool = False) -> TaskSummary:
    live = daemon.tasks.get(row.id)
    turn = daemon.registry.last_turn(row.id) if current_turn_only else None
    waiting: dict[str, str] = {}
    if live is not None:
        limit = daemon.settings.max_in_flight_requests
        for run in live.runs.values():
            if run.queued_leases and not run.ended:
                waiting[run.id] = f"a model slot ([llm] max_in_flight_requests = {limit}, all in use)"
    questions = [p.question for p in live.questions.values()] if live else []
    # Only from memory: listing thousands of old tasks must not read (and repair) their event logs.
    hub = daemon.hub
    return task_summary(row, daemon.registry.runs_of(row.id, turn), questions=questions, waiting=waiting,
                        last_seq=lambda: hub.last_seq(row.id) if exact_seq else hub.cached_last_seq(row.id))


@command(ListTasks)
async def list_tasks(daemon: DaemonView, msg: ListTasks) -> TaskList:
    if msg.limit < 1:
        raise CommandError(ErrorCode.BAD_REQUEST, f"limit must be at least 1 (got {msg.limit}); "
                                                  f"at most {MAX_LIST_LIMIT} tasks are listed at once")
    rows = daemon.registry.list_tasks(msg.project, msg.limit)
    return TaskList(id=msg.id, tasks=[summarize(daemon, row) for row in rows])


@command(TaskInfo)
async def task_info(daemon: DaemonView, msg: TaskInfo) -> TaskDetail:
    row = resolve_task(daemon, msg.task)
    return TaskDetail(id=msg.id, task=summarize(daemon, row, current_turn_only=False, exact_seq=True),
                      turns=[turn_summary(t) for t in daemon.registry.turns(row.id)])
