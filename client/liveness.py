"""Following a task from the CLI without waiting on a daemon that is gone.

A daemon killed mid-run leaves its sockets silent: requests would only fail at their timeout. While a
command follows a task, a plain Unix connect to control.sock is tried every `interval` seconds (refused
at once when nobody listens), and the follow is stopped with `DaemonLost` as soon as it fails.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from yagent.ipc import DaemonClient, IpcError, daemon_listening

__all__ = ["DaemonLost", "FollowStopped", "LivenessUnknown", "run_while_daemon_lives"]

T = TypeVar("T")


class FollowStopped(IpcError):
    """A command stopped following a task before the task ended; the message says why and what to do."""


class DaemonLost(FollowStopped):
    """yagentd stopped accepting connections while a command was following a task."""

    def __init__(self, task: str, control: str) -> None:
        super().__init__(
            f"yagentd stopped while following task {task} (nothing accepts connections on {control}; "
            f"it was stopped or crashed). Its unfinished runs are marked interrupted when it starts again: "
            f"`yagent daemon start`, then `yagent attach {task}` to see where it stands")
        self.task = task


class LivenessUnknown(FollowStopped):
    """Checking whether yagentd still listens failed; the follow stopped, the task goes on."""

    def __init__(self, task: str, control: str, cause: BaseException) -> None:
        super().__init__(
            f"cannot tell whether yagentd is still running: probing {control} failed "
            f"({type(cause).__name__}: {cause}); stopped following task {task}, which goes on in yagentd — "
            f"check the runtime directory, then `yagent attach {task}` or `yagent logs -f {task}` follows it again")
        self.task = task


async def _until_daemon_gone(client: DaemonClient, interval: float) -> None:
    assert client.paths is not None, "connect the client first"
    while True:
        await asyncio.sleep(interval)
        if not await asyncio.to_thread(daemon_listening, client.paths):
            return


async def run_while_daemon_lives(client: DaemonClient, task: str, follow: Coroutine[Any, Any, T], *,
                                 interval: float = 1.0) -> T:
    """Await `follow`; raise `DaemonLost` (after cancelling it) once the daemon stops listening, or
    `LivenessUnknown` if checking that fails. Both tasks are owned here: each one's end is read."""
    follower = asyncio.ensure_future(follow)
    watcher = asyncio.ensure_future(_until_daemon_gone(client, interval))
    try:
        await asyncio.wait({follower, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        followed_to_the_end = follower.done()
        for pending in (follower, watcher):
            if not pending.done():
                pending.cancel()
        # Not `await task`: a cancellation of our own would be mistaken for theirs. Their outcomes are read below.
        await asyncio.wait({follower, watcher})
        watch_failure = None if watcher.cancelled() else watcher.exception()
        error = None if follower.cancelled() else follower.exception()
    control = str(client.paths.control if client.paths else client.runtime_dir)
    if followed_to_the_end:
        if isinstance(error, IpcError) and client.paths is not None and not daemon_listening(client.paths):
            raise DaemonLost(task, control) from error  # a request that timed out because the daemon died
        return follower.result()
    if watch_failure is not None:
        raise LivenessUnknown(task, control, watch_failure) from watch_failure
    raise DaemonLost(task, control)
