"""Seams the daemon takes, for in-process tests: a launcher whose 'processes' the test ends itself."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable

from yagent.daemon.launcher import Launcher, RunHandle
from yagent.ipc.confinement import ConfinementSpec

__all__ = ["PipeHandle", "ScriptedLauncher"]


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
                     confinement: ConfinementSpec | None, done: Callable[[RunHandle | Exception], None]) -> None:
        if not self.defer:
            super().begin_launch(run_id, agent, workers_endpoint, secret, confinement=confinement, done=done)
            return

        self.secrets[run_id] = secret  # the process being started has it already

        def report() -> None:  # the start as the base class makes it, only later
            Launcher.begin_launch(self, run_id, agent, workers_endpoint, secret, confinement=confinement, done=done)

        self.pending[run_id] = report

    def report(self, run_id: str) -> None:
        self.pending.pop(run_id)()
