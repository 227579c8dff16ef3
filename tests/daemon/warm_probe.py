"""Scenarios for `test_warm_workers.py`, each in a process of its own: the launcher's forkserver must not be left
behind in the pytest process. `python -m tests.daemon.warm_probe SCENARIO RUNTIME_DIR` prints one JSON line.

The probe plays the daemon's part on a real ROUTER socket: a start is done when its hello proves the run's
secret; the worker is then refused (`unknown_run`) and exits, as a worker of a run the daemon no longer has.
"""

from __future__ import annotations

import base64
import ctypes
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import zmq

from yagent.daemon.launcher import MultiprocessingLauncher, RunHandle
from yagent.ipc.confinement import ConfinementSpec, landlock_abi, user_namespaces
from yagent.ipc.messages import ErrorReply, WorkerHello
from yagent.ipc.records import decode, encode
from yagent.ipc.run_secret import new_run_secret, proves
from yagent.ipc.sockets import bind_router
from yagent.ipc.vocabulary import ErrorCode

_PTRACE_SEIZE = 0x4206
_PTRACE_CONT = 7
_WALL = 0x40000000  # waitpid's __WALL: a tracee that is not our child
_DEADLINE = 60.0


def _until(predicate: Callable[[], Any], what: str, timeout: float = _DEADLINE) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := predicate()):
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.005)
    return found


def _status(pid: int, task: int | None = None) -> dict[str, str]:
    path = f"/proc/{pid}/task/{task}/status" if task else f"/proc/{pid}/status"
    with open(path) as f:
        return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)


def _threads_no_new_privs(pid: int) -> list[str]:
    """NoNewPrivs of every thread: a thread that existed before the worker confined itself would show 0."""
    return [_status(pid, int(t))["NoNewPrivs"].strip() for t in os.listdir(f"/proc/{pid}/task")]


def _waiting_on_its_pipe(pid: int) -> bool:
    try:
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
        wchan = Path(f"/proc/{pid}/wchan").read_text()
    except OSError:
        return False
    return comm == "yagent:warm" and "poll" in wchan


def _state(pid: int) -> str:
    """The process's state letter ("" when it is gone)."""
    try:
        return _status(pid)["State"].strip()[:1]
    except (OSError, KeyError):
        return ""


def _socket_names(pid: int) -> list[str] | None:
    """The address of each socket the process holds ("" for an unnamed one, "?" for one that is no Unix socket);
    None where its descriptors cannot be listed (not dumpable, and we are not root)."""
    try:
        links = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
    except OSError:
        return None
    inodes = {link[len("socket:["):-1] for link in links if link.startswith("socket:[")}
    named: dict[str, str] = {}
    for line in Path("/proc/net/unix").read_text().splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 7 and fields[6] in inodes:
            named[fields[6]] = fields[7] if len(fields) > 7 else ""
    return [named.get(inode, "?") for inode in inodes]


class Daemonside:
    """The daemon's end: a ROUTER on workers.sock, and the launcher."""

    def __init__(self, runtime: Path, *, clock: Callable[[], float] = time.monotonic, warm_idle: float = 300.0):
        self.root = runtime
        self.endpoint = f"ipc://{runtime}/workers.sock"
        self.launcher = MultiprocessingLauncher("forkserver", clock=clock, warm_idle=warm_idle)
        self.launcher.start()  # before any zmq context, as in the daemon
        self.ctx = zmq.Context()
        self.router = bind_router(self.ctx, self.endpoint)

    def start(self, run_id: str, confinement: ConfinementSpec | None = None) -> tuple[RunHandle, bool, dict]:
        """Launch, wait for the hello; (handle, whether the hello proves the secret, what was seen meanwhile)."""
        secret = new_run_secret()
        handle = self.launcher.launch(run_id, "coding", self.endpoint, secret, confinement=confinement)
        if not self.router.poll(_DEADLINE * 1000):
            raise SystemExit(f"no hello from {run_id}")
        identity, frame = self.router.recv_multipart()
        hello = decode(frame)
        seen = {"threads_no_new_privs": _threads_no_new_privs(handle.pid), "leaks": _leaks(handle.pid, secret)}
        proved = isinstance(hello, WorkerHello) and proves(secret, run_id, identity, hello.proof)
        self.router.send_multipart([identity, encode(ErrorReply(id=0, code=ErrorCode.UNKNOWN_RUN, message="over"))])
        _until(lambda: handle.exitcode() is not None, f"{run_id} to exit")
        handle.close()
        return handle, proved, seen

    def ready(self, n: int) -> list[int]:
        _until(lambda: self.launcher.warm.ready() == n, f"{n} warm workers")
        pids = self.launcher.warm.pids()
        _until(lambda: all(_waiting_on_its_pipe(p) for p in pids), "the warm workers to block on their pipes")
        return pids

    def close(self) -> None:
        self.launcher.stop()
        self.router.close(0)
        self.ctx.term()


def _leaks(pid: int, secret: bytes) -> list[str]:
    found = []
    for name in ("environ", "cmdline"):
        try:
            data = Path(f"/proc/{pid}/{name}").read_bytes()
        except OSError:
            continue  # non-dumpable and not root: nobody else can read it either
        if any(form in data for form in (secret, secret.hex().encode(), base64.b64encode(secret))):
            found.append(name)
    return found


def _coding_spec(root: Path) -> ConfinementSpec | None:
    abi = landlock_abi()
    if not abi:
        return None
    home, project = root / "home", root / "project"
    for d in (home / "tasks" / "t1", home / "scratch" / "r1", project):
        d.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    return ConfinementSpec(abi=abi, agent="coding", project_root=str(project), home=str(home),
                           runtime_dir=str(root), task_dir=str(home / "tasks" / "t1"),
                           scratch_dir=str(home / "scratch" / "r1"), git_namespace=user_namespaces())


def assignment(side: Daemonside) -> dict:
    """A warm worker waits threadless, unconfined and socketless; its run, confinement and secret reach it only
    at assignment, and every thread it has by its hello was started after it confined itself."""
    (pid,) = side.ready(1)
    status = _status(pid)
    waiting = {"threads": int(status["Threads"]), "no_new_privs": status["NoNewPrivs"].strip(),
               "sockets": _socket_names(pid)}
    spec = _coding_spec(side.root)
    handle, proved, seen = side.start("r-warm", spec)
    return {"waiting": waiting, "pid_was_warm": handle.pid == pid, "warm": handle.warm, "proved": proved,
            "confined": spec is not None, **seen}


def refill_and_reap(side: Daemonside, now: list[float]) -> dict:
    """The pool refills behind each start, skips a worker killed while it waited, and is emptied when idle."""
    first = side.ready(2)
    started = side.start("r-one")
    refilled = side.ready(2)
    killed = refilled[0]
    os.kill(killed, 9)
    # Dead (a zombie, or reaped): its end of the pipe is closed, so a start cannot hand it a run.
    _until(lambda: _state(killed) in ("", "Z"), "the killed warm worker to be gone")
    after_kill = side.start("r-two")
    side.ready(2)
    pool = side.launcher.warm.pids()
    now[0] += 1000.0  # past the idle time: nothing has started since
    side.launcher.tend()
    _until(lambda: side.launcher.warm.ready() == 0, "the idle pool to be emptied")
    _until(lambda: not any(Path(f"/proc/{p}").exists() and _waiting_on_its_pipe(p) for p in pool),
           "the reaped warm workers to exit")
    cold = side.start("r-cold")
    side.ready(2)
    return {"first": first, "one": [started[0].warm, started[1]], "refilled_new": sorted(set(refilled) - set(first)),
            "after_kill": [after_kill[0].warm, after_kill[1], after_kill[0].pid != killed],
            "cold": [cold[0].warm, cold[1]], "forked": side.launcher.warm.forked,
            "refilled_after_cold": side.launcher.warm.ready()}


def traced(side: Daemonside) -> dict:
    """A warm worker someone attached to while it waited takes no secret: it leaves, and says no hello."""
    (pid,) = side.ready(1)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    attached = libc.ptrace(_PTRACE_SEIZE, pid, None, None) == 0
    if not attached:
        return {"attached": False, "errno": ctypes.get_errno()}
    handle = side.launcher.launch("r-traced", "coding", side.endpoint, new_run_secret())
    # As its tracer we are told of its exit first, and its parent (the forkserver) only once we have waited.
    _until(lambda: _reaped_as_tracer(pid, libc), "the traced worker to exit")
    _until(lambda: handle.exitcode() is not None, "the traced worker's exit to reach its parent")
    return {"attached": True, "same": handle.pid == pid, "exitcode": handle.exitcode(),
            "hello": bool(side.router.poll(0))}


def _reaped_as_tracer(pid: int, libc: ctypes.CDLL) -> bool:
    """One look, as its tracer, for the exit of `pid` (not our child); a stop for a signal is let go on."""
    waited, status = os.waitpid(pid, os.WNOHANG | _WALL)
    if waited and os.WIFSTOPPED(status):
        libc.ptrace(_PTRACE_CONT, pid, None, ctypes.c_void_p(os.WSTOPSIG(status)))
        return False
    return bool(waited)


def main() -> None:
    scenario, runtime = sys.argv[1], Path(sys.argv[2])
    os.environ["YAGENT_HOME"], os.environ["YAGENT_RUNTIME_DIR"] = str(runtime / "home"), str(runtime)
    now = [0.0]
    side = Daemonside(runtime, clock=lambda: now[0], warm_idle=100.0)
    try:
        side.launcher.keep_warm(2 if scenario == "refill_and_reap" else 1)
        result = {"assignment": lambda: assignment(side), "refill_and_reap": lambda: refill_and_reap(side, now),
                  "traced": lambda: traced(side)}[scenario]()
    finally:
        side.close()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
