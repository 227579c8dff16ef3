"""`list_tasks` and `task_info`: what `yagent ps` and clients show."""

from __future__ import annotations

from yagent.ipc.messages import ListTasks, TaskDetail, TaskInfo, TaskList, TaskSummary

from . import command, resolve_task


def summarize(daemon, row, *, current_turn_only: bool = True) -> TaskSummary:
    live = daemon.tasks.get(row.id)
    turn = None
    if current_turn_only:
        turns = daemon.registry.turns(row.id)
        turn = turns[-1].turn if turns else None
    runs = daemon.registry.run_summaries(row.id, turn)
    questions = [p.question for p in live.questions.values()] if live else []
    summary = daemon.registry.task_summary(row, runs, questions)
    if daemon.hub is not None:
        summary.last_seq = daemon.hub.last_seq(row.id)
    return summary


@command(ListTasks)
async def list_tasks(daemon, msg: ListTasks) -> TaskList:
    rows = daemon.registry.list_tasks(msg.project, msg.limit)
    return TaskList(id=msg.id, tasks=[summarize(daemon, row) for row in rows])


@command(TaskInfo)
async def task_info(daemon, msg: TaskInfo) -> TaskDetail:
    row = resolve_task(daemon, msg.task)
    return TaskDetail(id=msg.id, task=summarize(daemon, row, current_turn_only=False),
                      turns=daemon.registry.turns(row.id))
