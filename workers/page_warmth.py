"""Copy-on-write pages a run will touch, copied while a warm worker waits instead of during the run.

A worker forked from the forkserver shares every page of the forkserver's memory. Python writes to each object it
uses (reference counts), so the first use of any page by a run costs a copy-on-write fault: about 2 600 faults,
some 7 ms of CPU, between a Chat run's assignment and its first model request on the machine this was measured on.
Which pages those are depends on the code, not on the run, so they are learned from a few runs and then copied in
advance: a warm worker, before it blocks on its assignment pipe, asks the kernel to copy them
(`madvise(MADV_POPULATE_WRITE)`, one call per stretch of pages, Linux 5.14 and later).

Learning: a warm worker opens its own page map (`/proc/self/pagemap`) while it is still dumpable — a non-dumpable
process's /proc files belong to root, and the worker turns non-dumpable at once and stays so, for its secret — and
notes the forkserver's writable mappings. When the daemon asks it to learn, the run reports, with its result, the
pages of those mappings it has made its own (present and mapped by it alone), at most `MAX_PAGES` (a Chat run
makes about 4 500 of the forkserver's 17 000 its own). The daemon keeps
the union of a few reports (`daemon/page_profile.py`) and hands it to the warm workers it forks next.

Nothing here can make a worker do more than copy pages it already maps: a stretch outside the worker's writable
private mappings is left out, and at most `MAX_PAGES` pages are copied. Without the call (older kernels) or
without a page map nothing is learned or copied, and workers start as they did.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
from collections.abc import Callable, Iterable, Sequence

from yagent.ipc.page_runs import MAX_PREFAULT_PAGES as MAX_PAGES
from yagent.ipc.page_runs import merged_runs

__all__ = ["MAX_PAGES", "PAGE_SIZE", "PageMap", "clipped", "prefault", "writable_ranges"]

PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
_MADV_POPULATE_WRITE = 23
_PRESENT = 1 << 63
_EXCLUSIVE = 1 << 56
_ENTRY = 8  # bytes per page in the page map

def _libc_madvise() -> Callable[..., int] | None:
    try:
        madvise = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return None
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    madvise.restype = ctypes.c_int
    return madvise


_MADVISE = _libc_madvise()  # resolved in the forkserver, once


def writable_ranges(maps: str = "/proc/self/maps") -> list[tuple[int, int]]:
    """The page stretches of this process's private writable mappings (the heap, the allocator's arenas, the data of
    loaded libraries), sorted; not the stack and not the kernel's [vvar]/[vdso] pages. Empty when unreadable."""
    found = []
    try:
        with open(maps, encoding="ascii", errors="replace") as listing:
            for line in listing:
                parts = line.split(maxsplit=5)
                if len(parts) < 5 or parts[1] != "rw-p":
                    continue
                if len(parts) == 6 and parts[5].strip().startswith("[") and parts[5].strip() != "[heap]":
                    continue
                low, _, high = parts[0].partition("-")
                start, end = int(low, 16) // PAGE_SIZE, int(high, 16) // PAGE_SIZE
                if end > start:
                    found.append((start, end - start))
    except (OSError, ValueError):
        return []
    return sorted(found)


def clipped(runs: Iterable[tuple[int, int]], ranges: Sequence[tuple[int, int]], limit: int) -> list[tuple[int, int]]:
    """`runs` cut to what lies inside `ranges` (both sorted or not), at most `limit` pages in all, in address order."""
    kept: list[tuple[int, int]] = []
    left = limit
    ordered = sorted(ranges)
    for start, count in sorted(runs):
        end = start + count
        for low, size in ordered:
            high = low + size
            if high <= start:
                continue
            if low >= end or left <= 0:
                break
            first, last = max(start, low), min(end, high)
            take = min(last - first, left)
            kept.append((first, take))
            left -= take
        if left <= 0:
            break
    return kept


def prefault(runs: Iterable[tuple[int, int]], *, limit: int = MAX_PAGES,
             ranges: Sequence[tuple[int, int]] | None = None) -> int:
    """Copy now the pages of `runs` that lie in this process's writable private mappings (`ranges`, read now when not
    given), at most `limit`; the number of pages copied. Stops at the first sign the kernel has no such call."""
    if _MADVISE is None:
        return 0
    done = 0
    for start, count in clipped(runs, writable_ranges() if ranges is None else ranges, limit):
        if _MADVISE(start * PAGE_SIZE, count * PAGE_SIZE, _MADV_POPULATE_WRITE) == 0:
            done += count
            continue
        if ctypes.get_errno() in (errno.EINVAL, errno.ENOSYS, errno.EPERM):  # no MADV_POPULATE_WRITE here
            break
        # ENOMEM (a stretch unmapped meanwhile), EFAULT, EHWPOISON: that stretch is left, the others still help
    return done


class PageMap:
    """This process's page map, opened while it could be, with the writable mappings it had then."""

    def __init__(self, fd: int, ranges: list[tuple[int, int]]) -> None:
        self._fd = fd
        self.ranges = ranges

    @classmethod
    def open(cls) -> PageMap | None:
        """Open it now (the process must still be dumpable); None where there is no page map to read."""
        try:
            fd = os.open("/proc/self/pagemap", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None
        return cls(fd, writable_ranges())

    def close(self) -> None:
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = -1

    def owned(self, limit: int = MAX_PAGES) -> list[tuple[int, int]]:
        """The stretches of the noted mappings whose pages are present and mapped by this process alone — the ones
        it copied (or first allocated) since the fork — at most `limit` pages, lowest addresses first."""
        found: list[tuple[int, int]] = []
        for low, size in self.ranges if self._fd >= 0 else ():
            try:
                table = os.pread(self._fd, size * _ENTRY, low * _ENTRY)
            except OSError:
                continue
            run_start = -1
            # A sentinel entry (0: not present) ends a stretch that reaches the mapping's end.
            for index, entry in enumerate((*memoryview(table).cast("Q"), 0)):
                mine = entry & _PRESENT and entry & _EXCLUSIVE
                if mine and run_start < 0:
                    run_start = index
                elif not mine and run_start >= 0:
                    found.append((low + run_start, index - run_start))
                    run_start = -1
        return list(merged_runs(found, limit=limit))
