"""Checkpoint jobs run one at a time per repository, each in a process of its own (`workers/checkpoints/process.py`).

`JobQueues.enqueue(project, step)` appends a step (an async function that runs jobs) to its project's line at once —
so a `yagent diff` sent after a turn ended always comes after that turn's last checkpoint — and returns a future of
its result; one task per line runs the steps in order. `run(job)` runs one job: it starts the job's process from
the forkserver off the event loop, gives it `DEADLINE` seconds, reads its one reply (msgpack, at most
`MAX_REPLY_BYTES`, never unpickled), kills it (and the git it runs) if it lingers or overruns, and removes its
scratch directory. A job that dies, hangs or answers garbage is a failed result saying so, never an exception for
the caller and never a stuck line.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import uuid
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path

from yagent.ipc.confinement import ConfinementSpec
from yagent.ipc.errors import ProtocolError
from yagent.ipc.messages import CheckpointJob, CheckpointJobResult
from yagent.ipc.private_files import make_private_dirs
from yagent.ipc.records import decode

from .job_process import EXIT_GRACE, JobProcess
from .launcher import Launcher, RunHandle
from .task_scope import TaskScope

__all__ = ["DEADLINE", "MAX_REPLY_BYTES", "JobQueues", "scratch_root"]

log = logging.getLogger(__name__)

DEADLINE = 300.0  # seconds one job may take once started: hashing a large first checkpoint takes seconds
START_LIMIT = 30.0  # seconds its start from the forkserver may take (the preload after a daemon start)
MAX_REPLY_BYTES = 6 * 1024 * 1024  # a diff with patches is cut at 2 MiB of patch text


def scratch_root(home: Path) -> Path:
    return home / "data" / "checkpoints" / "scratch"


@dataclass
class _Queue:
    pending: deque[tuple[Callable[[], Awaitable[object]], asyncio.Future[object]]] = field(default_factory=deque)
    draining: bool = False


class JobQueues:
    """One queue per project; `confine(project, scratch)` is the job process's confinement (the daemon's probe)."""

    def __init__(self, launcher: Launcher, scope: TaskScope, home: Path,
                 confine: Callable[[str, str], ConfinementSpec], deadline: float = DEADLINE) -> None:
        self._launcher = launcher
        self._scope = scope
        self._home = home
        self._confine = confine
        self._deadline = deadline
        self._queues: dict[str, _Queue] = {}

    def enqueue(self, project: str, step: Callable[[], Awaitable[object]]) -> asyncio.Future[object]:
        """Put `step` in `project`'s line; steps enqueued after it start once it is over. Its result, in time."""
        queue = self._queues.setdefault(project, _Queue())
        future: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        queue.pending.append((step, future))
        if not queue.draining:
            queue.draining = True
            self._scope.spawn(f"checkpoint-queue-{os.path.basename(project)}", self._drain(project, queue))
        return future

    async def _drain(self, project: str, queue: _Queue) -> None:
        try:
            while queue.pending:
                step, future = queue.pending.popleft()
                try:
                    result = await step()
                except Exception as exc:  # a failed step costs its caller, never the line
                    log.exception("a checkpoint step in %s failed", project)
                    if not future.done():
                        future.set_exception(exc)
                    continue
                if not future.done():
                    future.set_result(result)
        finally:
            queue.draining = False
            for _step, future in queue.pending:  # cancelled with the daemon: nobody waits forever
                if not future.done():
                    future.cancel()
            queue.pending.clear()
            if self._queues.get(project) is queue:
                del self._queues[project]

    async def run(self, job: CheckpointJob) -> CheckpointJobResult:
        """Run `job` in a process of its own now (its `scratch_dir` is made here and removed after); its result."""
        scratch = scratch_root(self._home) / uuid.uuid4().hex
        await asyncio.to_thread(make_private_dirs, scratch)
        job.scratch_dir = str(scratch)
        confinement = self._confine(job.project_root, str(scratch))
        process = JobProcess(group=True)  # git runs as its children, in its group
        work = asyncio.ensure_future(asyncio.to_thread(_run_blocking, self._launcher, job, confinement, process))
        try:
            async with asyncio.timeout(START_LIMIT + self._deadline):
                return await asyncio.shield(work)
        except TimeoutError:
            return CheckpointJobResult(ok=False, problem=f"the git work took longer than {self._deadline:g}s and was "
                                                         "stopped; nothing half-done is kept (refs are written last)")
        finally:
            process.abandon()
            with contextlib.suppress(BaseException):
                await asyncio.shield(work)  # the thread is done once the process is gone
            await asyncio.to_thread(shutil.rmtree, scratch, True)


def _run_blocking(launcher: Launcher, job: CheckpointJob, confinement: ConfinementSpec, process: JobProcess
                  ) -> CheckpointJobResult:
    try:
        handle, reader = launcher.launch_checkpoint(uuid.uuid4().hex[:8], job, confinement=confinement)
    except (OSError, ValueError, NotImplementedError) as exc:
        return CheckpointJobResult(ok=False, problem=f"the checkpoint process could not be started ({exc})")
    try:
        if not process.started(handle):
            return CheckpointJobResult(ok=False, problem="the job was given up on before it started")
        return _reply(reader, handle)
    finally:
        process.finish(handle, reader)


def _reply(reader: Connection, handle: RunHandle) -> CheckpointJobResult:
    try:
        frame = reader.recv_bytes(MAX_REPLY_BYTES)
    except EOFError:
        code = handle.exitcode() if wait([handle.sentinel], timeout=EXIT_GRACE) else None
        how = f"exit status {code}" if code is not None else "it closed its pipe"
        return CheckpointJobResult(ok=False, problem=f"the checkpoint process ended without a result ({how})")
    except OSError as exc:  # over the cap
        return CheckpointJobResult(ok=False, problem=f"the checkpoint process's result was refused ({exc})")
    try:
        result = decode(frame)
    except ProtocolError as exc:
        return CheckpointJobResult(ok=False, problem=f"the checkpoint process's result could not be read ({exc})")
    if not isinstance(result, CheckpointJobResult):
        return CheckpointJobResult(ok=False, problem=f"the checkpoint process sent a {result.kind} message")
    return result
