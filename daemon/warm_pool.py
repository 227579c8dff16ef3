"""Workers forked before a run wants them, so that a start costs a write to a pipe instead of a fork.

A warm worker (`yagent.workers.entry.warm_worker_main`) has done only what belongs to no run: it is forked, has
let go of the forkserver's pipe, is non-dumpable, in its own process group, with the parent-death signal armed.
It has no thread, no secret, no socket, no lease and no confinement: it blocks on its assignment pipe, having copied
the pages the daemon's page profile names (`page_profile.py`). `assign`
writes the run's id, endpoint and confinement, then its secret, then its spec, on that pipe; the worker confines
itself (the `.git` view first, then Landlock, still single-threaded), takes the secret and the spec, and only then
opens its socket and says hello — the same order as a cold start. With the spec in hand it builds its run while the
hello travels; the daemon's start message then only says whether the run starts paused.

The pool is one for every agent kind: the kind, its confinement and its secret are all decided at assignment, so
its size bounds warm workers per kind and overall alike, with the fewest idle processes. It is filled one fork
at a time on the launcher's thread (a run's start never waits behind more than one refill), the daemon's
`REFILL_DELAY` after the start that took a worker (so the fork does not take a CPU from that run's start), and
emptied when no run has started for `idle_after` seconds: an idle daemon keeps no process it does not need. A
warm worker ends when its pipe closes: reaped here, or the daemon gone (`kill -9` included: the kernel closes the
pipe), and the forkserver's exit sends it the parent-death signal besides.
"""

from __future__ import annotations

import fcntl
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from multiprocessing.reduction import ForkingPickler

from yagent.ipc.config import MAX_WARM_WORKERS
from yagent.ipc.confinement import ConfinementSpec
from yagent.ipc.messages import RunSpec

__all__ = ["MAX_WARM_WORKERS", "WARM_IDLE_SECONDS", "Assignment", "WarmPool", "WarmWorker", "assignment_bytes",
           "pipe_capacity"]

log = logging.getLogger(__name__)

# No run started for this long: the warm workers are ended; the next start is cold and fills the pool again.
WARM_IDLE_SECONDS = 300.0
# An assignment must fit a pipe's buffer at once, so that writing it can never block the launcher's thread on a
# worker that does not read (stopped, or stuck); a larger one (a spec with very many paths) starts cold.
_ASSIGNMENT_MAX_BYTES = 48 * 1024
_EXIT_WAIT = 2.0


@dataclass
class WarmWorker:
    """One pre-forked worker and the write end of its assignment pipe (held by the daemon alone); `capacity`: what
    that pipe holds unread (its size, which a user past `pipe-user-pages-soft` gets cut to a page)."""

    process: BaseProcess
    pipe: Connection
    capacity: int
    born: float = field(default_factory=time.monotonic)

    @property
    def pid(self) -> int:
        assert self.process.pid is not None
        return self.process.pid

    def alive(self) -> bool:
        return self.process.exitcode is None

    def holds(self, assignment: Assignment, secret: bytes) -> bool:
        """Whether its pipe takes the assignment's head and the secret at once (the spec may be left out), so that
        writing them can never block the daemon's loop."""
        return _written(assignment.head, secret, _NO_SPEC) <= self.capacity

    def assign(self, assignment: Assignment, secret: bytes) -> bool:
        """Hand the worker its run (`assignment`, from `assignment_bytes`, which its pipe `holds`): its head, its
        secret, then its spec (left out when the pipe could not take it at once: the start message brings it); False
        when it is gone or its pipe broke, and it must not be used."""
        spec = assignment.spec if _written(assignment.head, secret, assignment.spec) <= self.capacity else _NO_SPEC
        try:
            if not self.alive():
                return False
            self.pipe.send_bytes(assignment.head)
            self.pipe.send_bytes(secret)
            self.pipe.send_bytes(spec)
            return True
        except OSError:
            return False
        finally:
            self.pipe.close()

    def release(self) -> None:
        """End a worker that will get no run: close its pipe (it leaves on EOF) and free its handle."""
        self.pipe.close()
        self.process.join(_EXIT_WAIT)
        if self.process.exitcode is None:
            log.warning("warm worker %d did not leave when its pipe closed; killing it", self.pid)
            self.process.kill()
            self.process.join(_EXIT_WAIT)
        try:
            self.process.close()
        except ValueError:
            log.error("warm worker %d survived SIGKILL", self.pid)


@dataclass(frozen=True)
class Assignment:
    """What a warm worker reads at assignment: `head` (run id, endpoint, confinement, whether to report its pages)
    before its secret, `spec` (the run's spec, or None) after it — the spec holds the provider keys, which are read
    only where the secret is: untraced and non-dumpable."""

    head: bytes
    spec: bytes


def assignment_bytes(run_id: str, workers_endpoint: str, confinement: ConfinementSpec | None, *,
                     learn: bool = False, spec: RunSpec | None = None) -> Assignment | None:
    """A run's assignment (`learn`: report the pages the run copies on write; `spec`: the run's spec, so that it
    builds its run while its hello travels); None when it would not fit the pipe at once. A spec that would not
    fit is left out: the worker then waits for it in the start message, as a cold one does. So is the spec of a run
    with a `.git` view: its worker is dumpable while it writes its uid map, with what its pipe holds unread."""
    head = bytes(ForkingPickler.dumps((run_id, workers_endpoint, confinement, learn)))
    if len(head) > _ASSIGNMENT_MAX_BYTES:
        return None
    ahead = _NO_SPEC
    if spec is not None and not (confinement is not None and confinement.git_namespace):
        try:
            ahead = bytes(ForkingPickler.dumps(spec))
        except Exception:  # the start message carries it anyway
            log.exception("the spec of run %s could not go with its assignment", run_id)
            ahead = _NO_SPEC
        if len(head) + len(ahead) > _ASSIGNMENT_MAX_BYTES:
            ahead = _NO_SPEC
    return Assignment(head, ahead)


_NO_SPEC = bytes(ForkingPickler.dumps(None))


def pipe_capacity(pipe: Connection) -> int:
    """How many bytes `pipe` (a write end) holds before a write blocks; the usual 64 KiB where Linux cannot say."""
    try:
        return fcntl.fcntl(pipe.fileno(), fcntl.F_GETPIPE_SZ)
    except (OSError, AttributeError):
        return 64 * 1024


def _written(*messages: bytes) -> int:
    return sum(len(m) + 4 for m in messages)  # each goes with a 4-byte length (`Connection.send_bytes`)


class WarmPool:
    """Up to `size` warm workers. `take` is safe from any thread; `refill_one`, `reap_if_idle` and `resize` fork or
    wait, so the launcher calls them on its own thread."""

    def __init__(self, fork: Callable[[], WarmWorker], *, clock: Callable[[], float] = time.monotonic,
                 idle_after: float = WARM_IDLE_SECONDS) -> None:
        self._fork = fork
        self._clock = clock
        self._idle_after = idle_after
        self._lock = threading.Lock()
        self._ready: deque[WarmWorker] = deque()
        self._size = 0
        self._closed = False
        self._last_start = clock()
        self.forked = 0  # warm workers made so far
        self.assigned = 0  # of those, handed a run

    @property
    def size(self) -> int:
        return self._size

    def ready(self) -> int:
        with self._lock:
            return len(self._ready)

    def pids(self) -> list[int]:
        with self._lock:
            return [w.pid for w in self._ready]

    def started(self) -> None:
        """A run started (warm or cold): the pool is in use, so it is not idle."""
        self._last_start = self._clock()

    def take(self) -> WarmWorker | None:
        """The oldest warm worker, or None (it may have died meanwhile: `WarmWorker.assign` says so)."""
        with self._lock:
            return self._ready.popleft() if self._ready else None

    def give_back(self, worker: WarmWorker) -> bool:
        """Put back a worker taken for a run it could not be handed: first in line again. False when the pool was
        closed or shrunk meanwhile: the caller ends the worker (`release` waits for it)."""
        with self._lock:
            keep = not self._closed and len(self._ready) < self._size
            if keep:
                self._ready.appendleft(worker)
        return keep

    def resize(self, size: int) -> None:
        """A new size (0: off); workers above it are ended."""
        with self._lock:
            self._size = max(0, min(size, MAX_WARM_WORKERS))
            extra = [self._ready.pop() for _ in range(max(0, len(self._ready) - self._size))]
        for worker in extra:
            worker.release()

    def wants(self) -> bool:
        """Whether a refill would fork: below size, not closed, and a run started within `idle_after`."""
        with self._lock:
            return (not self._closed and len(self._ready) < self._size
                    and self._clock() - self._last_start < self._idle_after)

    def refill_one(self) -> bool:
        """Fork one warm worker if the pool wants one; returns whether it wants another after that."""
        if not self.wants():
            return False
        worker = self._fork()
        self.forked += 1
        with self._lock:
            keep = not self._closed and len(self._ready) < self._size
            if keep:
                self._ready.append(worker)
        if not keep:  # closed or shrunk while it forked
            worker.release()
            return False
        return self.wants()

    def reap_if_idle(self) -> int:
        """End every warm worker once no run has started for `idle_after`; returns how many were ended."""
        if self._clock() - self._last_start < self._idle_after:
            return 0
        return self._empty()

    def close(self) -> None:
        """End every warm worker and make no more (the daemon is stopping)."""
        with self._lock:
            self._closed = True
        self._empty()

    def _empty(self) -> int:
        with self._lock:
            workers = list(self._ready)
            self._ready.clear()
        for worker in workers:
            worker.release()
        return len(workers)
