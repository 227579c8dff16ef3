"""Handing freed heap memory back to the OS after large events streamed through the daemon.

glibc keeps what large objects freed inside its heap: after freeing a big block it raises its mmap
threshold, so later blocks up to 32 MiB come from the heap, and their pages stay resident after `free`.
A daemon that streamed 500 MB of events kept ~800 MiB of RSS for good that way, with every ring within
its budget. `HeapTrim` counts the bytes that passed and, a second after they passed `threshold`, calls
`malloc_trim(0)`; while they go on flowing it looks again every second, so the last trim comes after the
flood, and once they stop it sets no timer at all. Where libc has no `malloc_trim` (musl, macOS) it does
nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import time
from collections.abc import Callable

from .schedule import Timer

__all__ = ["HeapTrim", "malloc_trim"]

log = logging.getLogger(__name__)

TRIM_AFTER_BYTES = 32 * 1024 * 1024
DELAY = 1.0  # seconds from passing the threshold to the trim: a burst is trimmed once, not per frame
STILL_FLOWING = 1024 * 1024  # bytes in a second after a trim that make it look again a second later

After = Callable[[float, Callable[[], None], str], Timer]


def _libc_malloc_trim() -> Callable[[], None] | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return lambda: trim(0)


malloc_trim = _libc_malloc_trim()


class HeapTrim:
    def __init__(self, after: After, *, threshold: int = TRIM_AFTER_BYTES, delay: float = DELAY,
                 still_flowing: int = STILL_FLOWING, trim: Callable[[], None] | None = malloc_trim) -> None:
        self._after = after
        self._threshold = threshold
        self._delay = delay
        self._still_flowing = still_flowing
        self._trim = trim
        self._since = 0  # bytes passed since the last trim
        self._timer: Timer | None = None
        self.trims = 0

    def passed(self, nbytes: int) -> None:
        """`nbytes` of events or replies went through (read, decoded, encoded, queued, freed)."""
        self._since += nbytes
        if self._since >= self._threshold and self._timer is None and self._trim is not None:
            self._timer = self._after(self._delay, self._trim_now, "heap-trim")

    def _trim_now(self) -> None:
        self._timer = None
        flowed, self._since = self._since, 0
        if not flowed:
            return  # nothing passed since the last trim: nothing more to hand back
        assert self._trim is not None
        started = time.perf_counter()
        self._trim()
        self.trims += 1
        log.debug("returned freed heap memory to the OS in %.1f ms", (time.perf_counter() - started) * 1000)
        if flowed >= self._still_flowing:  # a flood may still be on: trim once more after it
            self._timer = self._after(self._delay, self._trim_now, "heap-trim")
