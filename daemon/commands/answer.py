"""`answer`: a client answers a pending question; every other client sees it closed."""

from __future__ import annotations

from yagent.ipc.messages import Ack, Answer
from yagent.ipc.vocabulary import ErrorCode

from . import CommandError, DaemonView, command, resolve_task


@command(Answer)
async def answer(daemon: DaemonView, msg: Answer) -> Ack:
    row = resolve_task(daemon, msg.task)
    task = daemon.tasks.get(row.id)
    if task is None or msg.request_id not in task.questions:
        raise CommandError(ErrorCode.NO_QUESTION, f"question {msg.request_id!r} of task {row.id} is not pending "
                                                  "(already answered, or its run ended)")
    task.answer(msg.request_id, msg.answer, by=msg.by.strip()[:80] or "another client")
    return Ack(id=msg.id, task=row.id, state=task.row.state, detail="answered")
