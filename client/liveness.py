"""Following a task from the CLI without waiting on a daemon that is gone.

A daemon killed mid-run leaves its sockets silent: requests would only fail at their timeout. While a
command follows a task, a plain Unix connect to control.sock is tried every `interval` seconds (refused
at once when nobody listens), and the follow is stopped with `DaemonLost` as soon as it fails.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from typing import Any, TypeVar

from yagent.ipc import DaemonClient, IpcError, daemon_listening

__all__ = ["DaemonLost", "run_while_daemon_lives"]

T = TypeVar("T")


class DaemonLost(IpcError):
    """yagentd stopped accepting connections while a command was following a task."""

    def __init__(self, task: str, control: str) -> None:
        super().__init__(
            f"yagentd stopped while following task {task} (nothing accepts connections on {control}; "
            f"it was stopped or crashed). Its unfinished runs are marked interrupted when it starts again: "
            f"`yagent daemon start`, then `yagent attach {task}` to see where it stands")
        self.task = task


async def _until_daemon_gone(client: DaemonClient, interval: float) -> None:
    assert client.paths is not None, "connect the client first"
    while True:
        await asyncio.sleep(interval)
        if not await asyncio.to_thread(daemon_listening, client.paths):
            return


async def run_while_daemon_lives(client: DaemonClient, task: str, follow: Coroutine[Any, Any, T], *,
                                 interval: float = 1.0) -> T:
    """Await `follow`; raise `DaemonLost` (after cancelling it) once the daemon stops listening."""
    follower = asyncio.ensure_future(follow)
    watcher = asyncio.ensure_future(_until_daemon_gone(client, interval))
    try:
        await asyncio.wait({follower, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for pending in (follower, watcher):
            if not pending.done():
                pending.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await pending
    lost = DaemonLost(task, str(client.paths.control if client.paths else client.runtime_dir))
    if follower.cancelled():
        raise lost
    error = follower.exception()
    if isinstance(error, IpcError) and client.paths is not None and not daemon_listening(client.paths):
        raise lost from error  # a request that timed out because the daemon died says less than this
    return follower.result()
