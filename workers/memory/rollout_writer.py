"""The rollout writer: `enqueue` returns at once; one thread writes batches (32 records or 20 ms).

A batch's window opens at its first record, and its records are encoded when it closes: what a run records on its
way to its next model request (a child's result as the parent resumes) is encoded and written once that request is
out, instead of taking the interpreter from the run meanwhile. `drain` and `close` close the window at once.

The agent loop must never wait on the disk, and must never fail because of it: a write error is reported
once through `on_error` (and kept in `error`), the records that could not be written are dropped, and the
loop goes on. `drain` waits until everything enqueued so far is in the file (read-back safe); `close`
drains and stops the thread, and hands the file to `workers/late_sync.py` to be fsynced off the run's way out.
From its opening to its close the file is under an exclusive `flock`: a reader that needs the whole of it (a
follow-up continuing the conversation, which may start while the run's end is still being written after its
result went out) waits for the lock with `wait_for_writer`; the kernel drops the lock if the writer dies.
Each batch is written and flushed in one go, so a `kill -9` loses at
most the batch in flight and leaves at worst a torn last line, which the reader tolerates.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import json
import os
import queue
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, BinaryIO

from yagent.ipc.state_files import open_state_dir, open_state_file
from yagent.workers.late_sync import LATE_SYNC
from yagent.workers.quick_thread import QuickThread

from .rollout_records import json_safe

__all__ = ["BATCH_RECORDS", "BATCH_SECONDS", "RolloutWriter", "wait_for_writer"]

BATCH_RECORDS = 32
BATCH_SECONDS = 0.020

_STOP = object()


class _Drain:
    def __init__(self) -> None:
        self.done = threading.Event()


def _open_append(path: Path) -> BinaryIO:
    """The rollout opened for appending, never through a link: neither the file nor its directory may be one (a run
    may write its task's directory, so a link planted there would lead a later run's records elsewhere)."""
    directory = open_state_dir(path.parent)
    try:
        fd = open_state_file(path.name, os.O_WRONLY | os.O_CREAT | os.O_APPEND, dir_fd=directory, shown=path)
    finally:
        os.close(directory)
    return os.fdopen(fd, "ab")


def encode(rec: dict[str, Any]) -> bytes:
    """One record as one line of strict JSON (no NaN, nothing that is not JSON)."""
    try:
        text = json.dumps(rec, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError):
        text = json.dumps(json_safe(rec), ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return text.encode("utf-8", errors="replace") + b"\n"


async def wait_for_writer(path: Path, timeout: float, *,
                          sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
                          clock: Callable[[], float] = time.monotonic) -> bool:
    """Wait until no `RolloutWriter` has `path` open (its last records are in the file); False when one still had
    it after `timeout` seconds. A file that cannot be opened (gone, a link) is not waited on: True, and the reader
    that opens it next says what is wrong. `sleep` and `clock` are the time seams."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return True
    try:
        deadline = clock() + timeout
        pause = 0.001
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    return True  # a file system without flock: there is no lock to wait for
            else:
                return True
            left = deadline - clock()
            if left <= 0:
                return False
            # flock has no timed wait: the writer's end takes a millisecond or two, so short naps, growing.
            await sleep(min(pause, left))
            pause = min(pause * 2, 0.05)
    finally:
        os.close(fd)  # the shared lock, if taken, goes with it


def _flock(fh: BinaryIO, operation: int) -> None:
    # Nobody else takes the exclusive lock: only a file system without flock (or a seam's file) says no.
    with contextlib.suppress(OSError, ValueError, AttributeError):
        fcntl.flock(fh.fileno(), operation)


class RolloutWriter:
    """Appends records to one rollout file from a thread of its own. `open_file` is the disk seam.

    `start=False` leaves the file unopened and the thread unstarted until `start` (or the first `drain` or `close`):
    records enqueued meanwhile wait in the queue. A run starts its writer once its first model request is out, so
    the open, the lock and the thread's start are not on that request's way."""

    def __init__(self, path: Path, *, on_error: Callable[[str], None] | None = None,
                 open_file: Callable[[Path], BinaryIO] = _open_append,
                 batch_records: int = BATCH_RECORDS, batch_seconds: float = BATCH_SECONDS,
                 start: bool = True) -> None:
        self.path = path
        self.error = ""
        self._on_error = on_error
        self._open_file = open_file
        self._batch_records = batch_records
        self._batch_seconds = batch_seconds
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._hurry = threading.Event()  # closes the open window: a drain, the close, or a full batch
        self._closed = False
        self._started = False
        self._written = 0
        self._fh: BinaryIO | None = None
        self._thread = QuickThread(self._run, name=f"rollout-{path.name}")
        if start:
            self.start()

    def start(self) -> None:
        """Open and lock the file, and start the thread; once (later calls do nothing)."""
        if self._started:
            return
        self._started = True
        # Opened and locked here, not on the thread: the lock is held before anything the run does next.
        try:
            self._fh = self._open_file(self.path)
        except OSError as exc:
            self._report("opening", exc)
        else:
            _flock(self._fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        try:
            self._thread.start()  # not waited for
        except RuntimeError as exc:  # no thread to be had: nothing is written, and the run is told so
            self._report("starting its writer thread", exc)
            if self._fh is not None:
                self._fh.close()  # and the lock with it: no reader waits for records that cannot come
                self._fh = None

    @property
    def written(self) -> int:
        """Records in the file so far (for tests and the benchmark)."""
        return self._written

    def enqueue(self, rec: dict[str, Any]) -> None:
        """Never blocks, never raises; after `close` the record is dropped."""
        if not self._closed:
            self._queue.put(rec)
            if self._queue.qsize() >= self._batch_records and not self._hurry.is_set():
                self._hurry.set()  # once per batch: a flood's every record would otherwise pay for the wake-up call

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until every record enqueued before this call is in the file; False on timeout or when closed."""
        if not self._closed:
            self.start()
        if self._closed or not self._thread.is_alive():
            return False
        marker = _Drain()
        self._queue.put(marker)
        self._hurry.set()
        return marker.done.wait(timeout)

    def close(self, timeout: float | None = None) -> bool:
        """Write what is queued, stop the thread (the fsync comes later: `LATE_SYNC`). Idempotent; False if the thread
        did not end in time."""
        if not self._closed:
            self.start()  # what was enqueued before is written all the same
            self._closed = True
            self._queue.put(_STOP)
            self._hurry.set()
        return self._thread.join(timeout)

    # -- the writer thread ------------------------------------------------------------------------------

    def _report(self, what: str, exc: BaseException) -> None:
        if self.error:
            return  # reported once: a full disk would otherwise say so on every batch
        self.error = f"rollout {self.path}: {what} failed ({type(exc).__name__}: {exc}); resuming this run may not work"
        if self._on_error is not None:
            try:
                self._on_error(self.error)
            except Exception:  # the report must not stop the writer
                pass

    def _run(self) -> None:
        fh = self._fh
        stop = False
        backlog = False  # the last batch was full: the next one is waiting already
        while not stop:
            records: list[dict[str, Any]] = []
            markers: list[_Drain] = []
            item = self._queue.get()
            if not backlog and item is not _STOP and not isinstance(item, _Drain):
                self._hurry.wait(self._batch_seconds)  # the window: records gather without waking this thread
            self._hurry.clear()
            while True:
                if item is _STOP:
                    stop = True
                    break
                if isinstance(item, _Drain):
                    markers.append(item)
                else:
                    records.append(item)
                    if len(records) >= self._batch_records:
                        break
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
            backlog = len(records) >= self._batch_records
            batch = [encode(rec) for rec in records]
            if batch and fh is not None:
                try:
                    fh.write(b"".join(batch))
                    fh.flush()
                    self._written += len(batch)
                except OSError as exc:
                    self._report("writing", exc)
            for marker in markers:
                marker.done.set()
        if fh is not None:
            try:
                fh.flush()
                _flock(fh, fcntl.LOCK_UN)  # the last records are in: readers waiting for them go on
                # Durable later, off the run's way out (its end waits for this thread, not for the disk).
                LATE_SYNC.add(os.dup(fh.fileno()))
            except (OSError, ValueError) as exc:
                self._report("syncing", exc)
            finally:
                try:
                    fh.close()
                except OSError:
                    pass
