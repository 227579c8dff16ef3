"""`hello`: the version handshake every client starts with."""

from __future__ import annotations

import os

from yagent.ipc.messages import PROTOCOL_VERSION, Hello, HelloReply
from yagent.ipc.vocabulary import ErrorCode

from . import CommandError, DaemonView, command


@command(Hello)
async def hello(daemon: DaemonView, msg: Hello) -> HelloReply:
    if msg.version != PROTOCOL_VERSION:
        raise CommandError(
            ErrorCode.PROTOCOL_MISMATCH,
            f"this client speaks protocol {msg.version} but yagentd speaks {PROTOCOL_VERSION}: restart the daemon "
            "after upgrading (`yagent daemon stop && yagent daemon start`)")
    return HelloReply(id=msg.id, version=PROTOCOL_VERSION, daemon_pid=os.getpid(), started_at=daemon.started_at,
                      runtime_dir=str(daemon.paths.root), home=str(daemon.home))
