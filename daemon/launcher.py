"""Starting worker processes.

`Launcher` is the narrow edge: `launch(run_id, agent, endpoint, confinement=) -> RunHandle`, and `begin_launch`,
which the daemon uses: the same start, reported through a callback on the event loop. The default
starts each run from a `multiprocessing` forkserver whose server process has already imported the worker code (and
loaded the tokenizer), so a start costs a fork rather than an interpreter boot. The forkserver must be
running before the daemon creates its ZeroMQ context: libzmq's I/O threads do not survive a fork.
Workers are children of the forkserver, not of the daemon, so they are tracked by pid, process
group and the run id they carry in their environment.

Each worker gets its run's secret (`yagent.ipc.run_secret`) through a pipe of its own, passed as an inherited
descriptor (the forkserver receives it over its Unix socket with the request, the child finds it among its
inherited fds): never in the environment, argv or the pickled process arguments, and the worker closes the
pipe once it has read the secret. The daemon keeps the secret only in the run's supervisor.
"""

from __future__ import annotations

import abc
import asyncio
import concurrent.futures
import io
import logging
import multiprocessing
import multiprocessing.context
import os
import signal
from collections.abc import Callable, Sequence
from multiprocessing import forkserver, popen_forkserver, reduction, spawn, util
from multiprocessing.connection import Connection

import psutil

from yagent.ipc.confinement import ConfinementSpec
from yagent.ipc.messages import BlueprintViewSpec, CheckpointJob, ResumeInspectionSpec
from yagent.ipc.process_entry import call_entry

__all__ = ["MultiprocessingLauncher", "RunHandle", "kill_run_tree", "run_processes"]

WORKER_ENTRY = "yagent.workers.entry:worker_main"
OPERATION_ENTRY = "yagent.workers.approved_operation:operation_main"
INSPECTION_ENTRY = "yagent.workers.resume_inspection:inspection_main"
CHECKPOINT_ENTRY = "yagent.workers.checkpoints.process:checkpoint_main"
BLUEPRINT_ENTRY = "yagent.workers.blueprint.view_process:blueprint_view_main"
WORKER_PRELOAD = ("yagent.workers.entry", "yagent.workers.preload", "yagent.workers.resume_inspection",
                  "yagent.workers.checkpoints.process", "yagent.workers.blueprint.view_process")
RUN_ENV = "YAGENT_RUN_ID"

log = logging.getLogger(__name__)


class RunHandle(abc.ABC):
    """One launched worker process."""

    pid: int

    @property
    @abc.abstractmethod
    def sentinel(self) -> int:
        """A file descriptor that becomes readable when the process has exited."""

    @abc.abstractmethod
    def exitcode(self) -> int | None:
        """The exit status once known (negative = killed by that signal), else None."""

    @abc.abstractmethod
    def close(self) -> None:
        """Free the handle's resources once the exit was observed."""


class Launcher(abc.ABC):
    @abc.abstractmethod
    def start(self) -> None:
        """Prepare (e.g. start the forkserver). Called once, before the daemon creates sockets."""

    @abc.abstractmethod
    def launch(self, run_id: str, agent: str, workers_endpoint: str, secret: bytes, *,
               confinement: ConfinementSpec | None = None) -> RunHandle:
        """Start the run's worker, handing it `secret` so that its hello can prove it is that worker, and
        `confinement`: what it restricts itself to first thing (None: nothing)."""

    def begin_launch(self, run_id: str, agent: str, workers_endpoint: str, secret: bytes, *,
                     confinement: ConfinementSpec | None, done: Callable[[RunHandle | Exception], None]) -> None:
        """Start the run's worker as `launch` does and hand `done` the handle, or the exception the start
        raised, on the event loop's thread. This default calls `done` before it returns."""
        try:
            handle = self.launch(run_id, agent, workers_endpoint, secret, confinement=confinement)
        except Exception as exc:
            done(exc)
            return
        done(handle)

    def launch_operation(self, run_id: str, request: dict, *, confinement: ConfinementSpec
                         ) -> tuple[RunHandle, Connection]:
        """Start a process for one approved operation of the run (`approved_operation.py`); its result arrives
        on the returned connection (EOF if it died first)."""
        raise NotImplementedError(f"{type(self).__name__} cannot start approved operations")

    def launch_inspection(self, task: str, spec: ResumeInspectionSpec, *, confinement: ConfinementSpec
                          ) -> tuple[RunHandle, Connection]:
        """Start a resume inspection of the task's stopped turn (`resume_inspection.py`); its report arrives as
        bytes on the returned connection (EOF if it died first)."""
        raise NotImplementedError(f"{type(self).__name__} cannot start resume inspections")

    def launch_checkpoint(self, key: str, job: CheckpointJob, *, confinement: ConfinementSpec
                          ) -> tuple[RunHandle, Connection]:
        """Start a process for one checkpoint job (`workers/checkpoints/process.py`); its result arrives as bytes on
        the returned connection (EOF if it died first)."""
        raise NotImplementedError(f"{type(self).__name__} cannot start checkpoint jobs")

    def launch_blueprint_view(self, key: str, spec: BlueprintViewSpec, *, confinement: ConfinementSpec
                              ) -> tuple[RunHandle, Connection]:
        """Start a process that renders a project's blueprint (`workers/blueprint/view_process.py`); its reply
        arrives as bytes on the returned connection (EOF if it died first)."""
        raise NotImplementedError(f"{type(self).__name__} cannot show blueprints")

    def stop(self) -> None:  # noqa: B027 - optional hook
        """Release launcher resources at daemon exit."""


class _ProcessHandle(RunHandle):
    def __init__(self, process: multiprocessing.process.BaseProcess) -> None:
        self._process = process
        assert process.pid is not None
        self.pid = process.pid

    @property
    def sentinel(self) -> int:
        return self._process.sentinel

    def exitcode(self) -> int | None:
        return self._process.exitcode

    def close(self) -> None:
        try:
            self._process.close()
        except ValueError:
            pass  # still running: the caller reaps it later


class _MainlessPopen(popen_forkserver.Popen):
    """Forkserver start without re-running the parent's `__main__` in the child.

    The stdlib hands every child the parent's main module to re-execute (so pickled targets defined
    there resolve); our target lives in a preloaded module, and re-executing the daemon's entry point
    would import the whole daemon into every worker and cost tens of milliseconds per start.
    """

    def _launch(self, process_obj: multiprocessing.process.BaseProcess) -> None:
        prep_data = spawn.get_preparation_data(process_obj._name)
        prep_data.pop("init_main_from_name", None)
        prep_data.pop("init_main_from_path", None)
        buf = io.BytesIO()
        multiprocessing.context.set_spawning_popen(self)
        try:
            reduction.dump(prep_data, buf)
            reduction.dump(process_obj, buf)
        finally:
            multiprocessing.context.set_spawning_popen(None)
        self.sentinel, w = forkserver.connect_to_new_process(self._fds)
        # The run's liveness pipe: the worker reads EOF on it once this process is gone, however it died
        # (`workers/daemon_watch.py`). Non-inheritable, so no other child of ours keeps it open.
        parent_w = os.dup(w)
        self.finalizer = util.Finalize(self, util.close_fds, (parent_w, self.sentinel))
        with open(w, "wb", closefd=True) as f:
            f.write(buf.getbuffer())
        self.pid = forkserver.read_signed(self.sentinel)


class _WorkerProcess(multiprocessing.context.ForkServerProcess):
    @staticmethod
    def _Popen(process_obj: multiprocessing.process.BaseProcess) -> _MainlessPopen:
        return _MainlessPopen(process_obj)


class MultiprocessingLauncher(Launcher):
    """Launch workers with a multiprocessing start method ("forkserver" by default; "spawn" for baselines)."""

    def __init__(self, method: str = "forkserver", preload: Sequence[str] = ()) -> None:
        self.method = method
        self._ctx = multiprocessing.get_context(method)
        self._preload = [*WORKER_PRELOAD, *preload]
        # A start waits for the forkserver's answer, which takes seconds while the forkserver is still
        # importing the worker code or the machine is overloaded: that wait happens on this thread, never
        # on the event loop. One thread, so runs start in the order they were admitted.
        self._starter = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="yagent-launch")

    def start(self) -> None:
        if self.method == "forkserver":
            self._ctx.set_forkserver_preload(self._preload)  # type: ignore[attr-defined]
            forkserver.ensure_running()

    def launch(self, run_id: str, agent: str, workers_endpoint: str, secret: bytes, *,
               confinement: ConfinementSpec | None = None) -> RunHandle:
        cls = _WorkerProcess if self.method == "forkserver" else self._ctx.Process
        # A Connection pickles as an inherited descriptor (multiprocessing's DupFd), never as its content.
        reader, writer = multiprocessing.Pipe(duplex=False)
        try:
            writer.send_bytes(secret)  # 32 bytes: far below a pipe's buffer, so this never blocks
            writer.close()
            process = cls(
                target=call_entry,
                args=(WORKER_ENTRY, run_id, workers_endpoint, tuple(self._preload), reader, confinement),
                name=f"yagent-{agent}-{run_id}",
                daemon=True,
            )
            process.start()
        finally:
            writer.close()
            reader.close()  # the worker has its own copy now; ours would keep the pipe alive for nothing
        return _ProcessHandle(process)

    def begin_launch(self, run_id: str, agent: str, workers_endpoint: str, secret: bytes, *,
                     confinement: ConfinementSpec | None, done: Callable[[RunHandle | Exception], None]) -> None:
        loop = asyncio.get_running_loop()

        def start() -> RunHandle:
            return self.launch(run_id, agent, workers_endpoint, secret, confinement=confinement)

        def report(future: concurrent.futures.Future[RunHandle]) -> None:
            if future.cancelled():  # the launcher stopped (daemon exit) before this start began
                return
            exc = future.exception()
            result: RunHandle | Exception = future.result() if exc is None else (
                exc if isinstance(exc, Exception) else RuntimeError(f"the start was interrupted: {exc!r}"))
            try:
                loop.call_soon_threadsafe(done, result)
            except RuntimeError:  # the loop is closed: the daemon is gone, and the worker sees it and exits
                log.debug("run %s started after the daemon's loop closed", run_id)

        self._starter.submit(start).add_done_callback(report)

    def stop(self) -> None:
        self._starter.shutdown(wait=False, cancel_futures=True)

    def launch_operation(self, run_id: str, request: dict, *, confinement: ConfinementSpec
                         ) -> tuple[RunHandle, Connection]:
        return self._one_reply(OPERATION_ENTRY, f"yagent-approved-{run_id}", run_id, confinement, request)

    def launch_inspection(self, task: str, spec: ResumeInspectionSpec, *, confinement: ConfinementSpec
                          ) -> tuple[RunHandle, Connection]:
        return self._one_reply(INSPECTION_ENTRY, f"yagent-inspect-{task}", task, confinement, spec)

    def launch_checkpoint(self, key: str, job: CheckpointJob, *, confinement: ConfinementSpec
                          ) -> tuple[RunHandle, Connection]:
        return self._one_reply(CHECKPOINT_ENTRY, f"yagent-checkpoint-{key}", key, confinement, job)

    def launch_blueprint_view(self, key: str, spec: BlueprintViewSpec, *, confinement: ConfinementSpec
                              ) -> tuple[RunHandle, Connection]:
        return self._one_reply(BLUEPRINT_ENTRY, f"yagent-blueprint-{key}", key, confinement, spec)

    def _one_reply(self, target: str, name: str, key: str, confinement: ConfinementSpec, request: object
                   ) -> tuple[RunHandle, Connection]:
        """A process that hands back one reply through a pipe: `target(key, writer, confinement, request)`."""
        cls = _WorkerProcess if self.method == "forkserver" else self._ctx.Process
        reader, writer = multiprocessing.Pipe(duplex=False)
        try:
            process = cls(target=call_entry, args=(target, key, writer, confinement, request), name=name, daemon=True)
            process.start()
        except BaseException:
            reader.close()
            raise
        finally:
            writer.close()  # the process has its own copy: ours would keep the pipe from reporting EOF
        return _ProcessHandle(process), reader


def run_processes(run_id: str, pid: int | None) -> list[psutil.Process]:
    """Every live process belonging to a run: the worker, its descendants, and orphans it left behind.

    Descendants are found through the parent chain; orphans that were re-parented (a crashed worker's
    `run_bash` children in their own process group) are found by the run id in their environment.
    """
    found: dict[int, psutil.Process] = {}
    if pid:
        try:
            root = psutil.Process(pid)
            found[root.pid] = root
            for child in root.children(recursive=True):
                found[child.pid] = child
        except psutil.Error:
            pass
    me = os.getpid()
    for proc in psutil.process_iter(["pid"]):
        if proc.pid in found or proc.pid == me:
            continue
        try:
            if proc.environ().get(RUN_ENV) == run_id:
                found[proc.pid] = proc
        except psutil.Error:
            continue
    return list(found.values())


def kill_run_tree(run_id: str, pid: int | None, sig: int = signal.SIGKILL) -> int:
    """Signal every process of the run; returns how many were signalled."""
    procs = run_processes(run_id, pid)
    for proc in procs:
        try:
            proc.send_signal(sig)
        except psutil.Error:
            pass
    return len(procs)
