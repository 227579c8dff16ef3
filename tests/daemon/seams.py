"""Seams the daemon takes, for in-process tests: a launcher whose 'processes' the test ends itself, and one whose
resume inspections are real processes that misbehave as told."""

from __future__ import annotations

import itertools
import multiprocessing
import os
import signal
import struct
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection, wait

from yagent.daemon.launcher import Launcher, RunHandle
from yagent.daemon.resume_inspections import MAX_REPORT_BYTES
from yagent.ipc.confinement import ConfinementSpec
from yagent.ipc.messages import InterruptedChild, ResumeInspectionReport, ResumeInspectionSpec, Shutdown
from yagent.ipc.records import encode
from yagent.ipc.vocabulary import ReplayVerdict

__all__ = ["HostileInspections", "PipeHandle", "ScriptedLauncher"]


class PipeHandle(RunHandle):
    """A 'process' that exits when the test calls `exit(code)`: the sentinel is a pipe's read end."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._read, self._write = os.pipe()
        self.code: int | None = None

    @property
    def sentinel(self) -> int:
        return self._read

    def exitcode(self) -> int | None:
        return self.code

    def exit(self, code: int = 0) -> None:
        self.code = code
        os.close(self._write)

    def close(self) -> None:
        os.close(self._read)


class ScriptedLauncher(Launcher):
    """Starts at once, or with `defer`, only when the test calls `report(run_id)`: a forkserver that is slow to
    answer, with the daemon's loop free meanwhile."""

    def __init__(self, fail: bool = False, defer: bool = False) -> None:
        self.fail = fail
        self.defer = defer
        self.pending: dict[str, Callable[[], None]] = {}  # deferred starts, by run
        self.handles: dict[str, PipeHandle] = {}
        self.secrets: dict[str, bytes] = {}  # what each run's worker would have been handed
        self.confinements: dict[str, ConfinementSpec | None] = {}  # what each run's worker was handed
        self._pids = itertools.count(900_000)  # no real process has these: a stray signal hits nothing

    def start(self) -> None:
        pass

    def launch(self, run_id: str, agent: str, workers_endpoint: str, secret: bytes, *,
               confinement: ConfinementSpec | None = None) -> RunHandle:
        self.confinements[run_id] = confinement
        if self.fail:
            raise OSError("no more processes")
        handle = PipeHandle(next(self._pids))
        self.handles[run_id] = handle
        self.secrets[run_id] = secret
        return handle

    def begin_launch(self, run_id: str, agent: str, workers_endpoint: str, secret: bytes, *,
                     confinement: ConfinementSpec | None, done: Callable[[RunHandle | Exception], None],
                     cold: bool = False, spec: object = None) -> None:
        if not self.defer:
            super().begin_launch(run_id, agent, workers_endpoint, secret, confinement=confinement, done=done)
            return

        self.secrets[run_id] = secret  # the process being started has it already

        def report() -> None:  # the start as the base class makes it, only later
            Launcher.begin_launch(self, run_id, agent, workers_endpoint, secret, confinement=confinement, done=done)

        self.pending[run_id] = report

    def report(self, run_id: str) -> None:
        self.pending.pop(run_id)()


def _inspection(how: str, reply: Connection) -> None:
    """A resume inspection process that behaves as `how` says (spawned: its own interpreter)."""
    if how == "kill -9":
        os.kill(os.getpid(), signal.SIGKILL)
    elif how == "garbage":
        reply.send_bytes(b"\xc1\xff not msgpack")
    elif how == "oversized":
        reply.send_bytes(b"\x90" * (MAX_REPORT_BYTES + 1))
    elif how == "another kind":
        reply.send_bytes(encode(Shutdown(id=7)))
    elif how == "half a frame":  # a length that promises more than ever comes, then silence
        os.write(reply.fileno(), struct.pack("!i", 100) + b"\x81")
        signal.pause()
    elif how == "honest":
        reply.send_bytes(encode(ResumeInspectionReport(children=[InterruptedChild(
            call_id="c1", agent="repo", verdict=ReplayVerdict.REPLAYABLE, reason="replayable from step 2", step=2)])))
    signal.pause()  # "hang", and every other one after it spoke: it never exits by itself


class _ProcessHandle(RunHandle):
    def __init__(self, process: multiprocessing.process.BaseProcess) -> None:
        self.process = process
        assert process.pid is not None
        self.pid = process.pid

    @property
    def sentinel(self) -> int:
        return self.process.sentinel

    def exitcode(self) -> int | None:
        return self.process.exitcode

    def close(self) -> None:
        self.process.join(0)
        if self.process.exitcode is not None:  # as the real handle: one still running is reaped later
            self.process.close()

    def gone(self, timeout: float) -> bool:
        """Whether the process has exited (waiting up to `timeout` for it)."""
        try:
            return bool(wait([self.process.sentinel], timeout=timeout))
        except ValueError:  # closed: the daemon saw it exit
            return True


class HostileInspections(ScriptedLauncher):
    """Resume inspections as real (spawned) processes that behave as `how` says; every start is kept."""

    def __init__(self, how: str) -> None:
        super().__init__()
        self.how = how
        self.started: list[tuple[ResumeInspectionSpec, ConfinementSpec, _ProcessHandle]] = []
        self.launched = threading.Event()  # set once the first inspection's process exists
        self.hold: threading.Event | None = None  # when given, a start waits for it (a forkserver still preloading)
        self.holding = threading.Event()  # set once a start waits on `hold`

    def launch_inspection(self, task: str, spec: ResumeInspectionSpec, *, confinement: ConfinementSpec
                          ) -> tuple[RunHandle, Connection]:
        if self.hold is not None:
            self.holding.set()
            self.hold.wait(60)
        ctx = multiprocessing.get_context("spawn")
        reader, writer = ctx.Pipe(duplex=False)
        process = ctx.Process(target=_inspection, args=(self.how, writer), daemon=True)
        process.start()
        writer.close()
        handle = _ProcessHandle(process)
        self.started.append((spec, confinement, handle))
        self.launched.set()
        return handle, reader
