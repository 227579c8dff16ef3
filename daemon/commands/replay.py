"""`replay`: a range of a task's events, for gap fill and late attach."""

from __future__ import annotations

import sqlite3

from yagent.ipc.messages import Replay, ReplayReply
from yagent.ipc.vocabulary import ErrorCode

from . import CommandError, DaemonView, command, resolve_task


@command(Replay)
async def replay(daemon: DaemonView, msg: Replay) -> ReplayReply:
    if msg.limit < 1:
        raise CommandError(ErrorCode.BAD_REQUEST, f"limit must be at least 1 (got {msg.limit})")
    try:
        task_id = resolve_task(daemon, msg.task).id
    except sqlite3.DatabaseError:
        # The registry cannot answer, but a task whose events the hub still holds (one that just ended, say)
        # can be replayed: its follower must see the end it waits for.
        if daemon.hub.cached_last_seq(msg.task.strip()) is None:
            raise
        task_id = msg.task.strip()
    page = daemon.hub.replay(task_id, max(0, msg.after_seq), msg.limit)
    return ReplayReply(id=msg.id, task=task_id, events=page.events, last_seq=page.last_seq,
                       first_available=page.first_available, dropped=page.dropped, more=page.more)
