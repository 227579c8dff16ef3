"""`compact`: ask a task's running turn to compact its context now (`/compact`); its root run does it before its
next model call. A task with no turn in progress has no context in memory to compact: that is said, not done."""

from __future__ import annotations

from yagent.ipc.messages import Ack, CompactContext
from yagent.ipc.vocabulary import ErrorCode

from . import CommandError, DaemonView, command, resolve_task


@command(CompactContext)
async def compact(daemon: DaemonView, msg: CompactContext) -> Ack:
    row = resolve_task(daemon, msg.task)
    task = daemon.tasks.get(row.id)
    root = task.root if task is not None and task.in_flight else None
    if root is None:
        raise CommandError(ErrorCode.NOT_RUNNING, (
            f"task {row.id} has no turn in progress (state: {row.state}); a turn compacts its own context when it "
            "fills up, so there is nothing to compact now — your next message starts a turn"))
    if not root.request_compaction():
        raise CommandError(ErrorCode.NOT_RUNNING, (
            f"the {root.agent} of task {row.id} has finished its turn (its delegations are ending); there is nothing "
            "to compact now"))
    return Ack(id=msg.id, task=row.id, state=task.row.state if task is not None else row.state,
               detail=f"{root.agent} compacts its context before its next model call")
