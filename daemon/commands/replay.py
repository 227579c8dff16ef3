"""`replay`: a range of a task's events, for gap fill and late attach."""

from __future__ import annotations

from yagent.ipc.messages import Replay, ReplayReply
from yagent.ipc.vocabulary import ErrorCode

from . import CommandError, DaemonView, command, resolve_task


@command(Replay)
async def replay(daemon: DaemonView, msg: Replay) -> ReplayReply:
    if msg.limit < 1:
        raise CommandError(ErrorCode.BAD_REQUEST, f"limit must be at least 1 (got {msg.limit})")
    row = resolve_task(daemon, msg.task)
    page = daemon.hub.replay(row.id, max(0, msg.after_seq), msg.limit)
    return ReplayReply(id=msg.id, task=row.id, events=page.events, last_seq=page.last_seq,
                       first_available=page.first_available, dropped=page.dropped, more=page.more)
