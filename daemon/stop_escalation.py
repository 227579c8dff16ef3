"""Taking a run's processes down: the cancel message first, then SIGTERM, then SIGKILL of the whole tree.

Each step waits for the worker's exit for one stop grace (`[daemon] stop_grace`); the tree is found by
process group, by parent chain and by the run id tools carry in their environment (`launcher.run_processes`),
so a command that left the worker's group dies too. Scanning processes blocks, so it runs in a thread.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal

from .launcher import kill_run_tree

__all__ = ["KILL_WAIT", "escalate", "kill_tree_now"]

log = logging.getLogger(__name__)

# How long SIGKILL is given to take a process tree down before the daemon says it survived.
KILL_WAIT = 10.0


async def escalate(run_id: str, pid: int, exited: asyncio.Event, grace: float) -> None:
    """Wait `grace` for the exit the cancel message asked for; then SIGTERM, then SIGKILL, the tree."""
    for sig in (None, signal.SIGTERM, signal.SIGKILL):
        if sig is not None:
            log.info("run %s still alive; sending %s to its process tree", run_id, sig.name)
            try:
                os.killpg(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
            await asyncio.to_thread(kill_run_tree, run_id, pid, sig)
        try:
            async with asyncio.timeout(grace if sig != signal.SIGKILL else KILL_WAIT):
                await exited.wait()
            return
        except TimeoutError:
            continue
    log.error("run %s (pid %d) survived SIGKILL", run_id, pid)


async def kill_tree_now(run_id: str, pid: int | None) -> None:
    """SIGKILL every process of the run at once."""
    await asyncio.to_thread(kill_run_tree, run_id, pid, signal.SIGKILL)
