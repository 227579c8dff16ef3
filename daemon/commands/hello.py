"""`hello`: the version handshake every client starts with, and its credential: the client token.

A client shows the token yagentd wrote to the runtime directory at its start; `dispatch` then marks the
connection authenticated. The version is checked first, so an old client learns that it is old.
"""

from __future__ import annotations

import hmac
import os

from yagent.ipc.messages import PROTOCOL_VERSION, Hello, HelloReply
from yagent.ipc.vocabulary import ErrorCode

from ..turn_keys import daemon_env_provider
from . import CommandError, DaemonView, command


@command(Hello)
async def hello(daemon: DaemonView, msg: Hello) -> HelloReply:
    if msg.version < PROTOCOL_VERSION:
        raise CommandError(
            ErrorCode.PROTOCOL_MISMATCH,
            f"this yagent client is older than yagentd (protocol {msg.version}, yagentd speaks {PROTOCOL_VERSION}): "
            "run the `yagent` installed together with this yagentd (`command -v yagent yagentd` shows which ones "
            "your shell finds)")
    if msg.version != PROTOCOL_VERSION:
        raise CommandError(
            ErrorCode.PROTOCOL_MISMATCH,
            f"this client speaks protocol {msg.version} but yagentd speaks {PROTOCOL_VERSION}: restart the daemon "
            "after upgrading (`yagent daemon stop && yagent daemon start`)")
    if not hmac.compare_digest(msg.token.encode(), daemon.client_token.encode()):
        raise CommandError(
            ErrorCode.UNAUTHENTICATED,
            f"this hello carries {'a wrong' if msg.token else 'no'} client token: yagentd writes a new one to "
            f"{daemon.paths.token} at each start and answers only clients that show it; run `yagent` as the user "
            "who started yagentd (a process confined by yagent's sandbox cannot read it, by design), or restart "
            "yagentd (`yagent daemon stop && yagent daemon start`) if the file is gone")
    return HelloReply(id=msg.id, version=PROTOCOL_VERSION, daemon_pid=os.getpid(), started_at=daemon.started_at,
                      runtime_dir=str(daemon.paths.root), home=str(daemon.home), config=str(daemon.config_path),
                      env_provider=daemon_env_provider())
