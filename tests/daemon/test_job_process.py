"""A job's process (resume inspection, checkpoint, blueprint view): given up on before its start finishes, it is
killed as soon as it is known; its group goes with it when it runs children there; an exited one is never
signalled again; one that outstays its grace after its reply is killed."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
from multiprocessing.connection import wait

import psutil

from yagent.daemon.job_process import JobProcess
from yagent.daemon.launcher import RunHandle


class _PopenHandle(RunHandle):
    """A real child process seen through the launcher's handle (pidfd as the sentinel)."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc, self.pid = proc, proc.pid
        self._fd = os.pidfd_open(proc.pid)

    @property
    def sentinel(self) -> int:
        return self._fd

    def exitcode(self) -> int | None:
        return self.proc.poll()

    def close(self) -> None:
        self.proc.wait(10)
        os.close(self._fd)


def _sleeper(*, group: bool, child: bool = False) -> _PopenHandle:
    code = "import subprocess, sys, time\n"
    if child:  # a grandchild in the job's group, as git runs under a checkpoint process
        code += "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
    code += "print('up', flush=True); time.sleep(600)\n"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, start_new_session=group)
    assert proc.stdout is not None and proc.stdout.readline() == b"up\n"
    return _PopenHandle(proc)


def _reader() -> multiprocessing.connection.Connection:
    reader, writer = multiprocessing.Pipe(duplex=False)
    writer.close()
    return reader


def test_a_job_given_up_on_before_its_start_is_killed_once_it_is_known() -> None:
    told: list[int] = []
    job = JobProcess(on_started=lambda: told.append(1))
    job.abandon()
    handle = _sleeper(group=False)
    assert job.started(handle) is False and told == []
    assert wait([handle.sentinel], timeout=30) and handle.exitcode() == -signal.SIGKILL
    job.finish(handle, _reader())


def test_a_job_abandoned_while_it_runs_takes_its_group_along() -> None:
    job = JobProcess(group=True)
    handle = _sleeper(group=True, child=True)
    assert job.started(handle)
    grandchildren = psutil.Process(handle.pid).children()
    assert len(grandchildren) == 1
    job.abandon()
    assert wait([handle.sentinel], timeout=30) and handle.exitcode() == -signal.SIGKILL
    _gone, alive = psutil.wait_procs(grandchildren, timeout=30)
    assert not alive, "the job's child outlived it"
    job.finish(handle, _reader())
    job.abandon()  # after the end: nothing to kill, nothing raised


def test_a_job_that_outstays_its_grace_is_killed_by_finish_and_an_exited_one_is_left_alone(monkeypatch) -> None:
    monkeypatch.setattr("yagent.daemon.job_process.EXIT_GRACE", 0.01)
    job = JobProcess()
    handle = _sleeper(group=False)
    assert job.started(handle)
    job.finish(handle, _reader())
    assert handle.exitcode() == -signal.SIGKILL
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    exited = _PopenHandle(done)
    assert wait([exited.sentinel], timeout=30)
    killed: list[int] = []
    monkeypatch.setattr("yagent.daemon.job_process.os.kill", lambda pid, sig: killed.append(pid))
    job = JobProcess()
    assert job.started(exited)
    job.abandon()
    assert killed == [] and exited.exitcode() == 0  # its pid may be someone else's by now: never signalled
    job.finish(exited, _reader())
