"""Pages copied on write ahead of a run (`workers/page_warmth.py`), on the real kernel: what a forked process made
its own is read from its page map, and copying a report's pages in advance leaves the run no fault to take there.

Each case runs in a child forked from a parent that filled a private mapping first, as the forkserver's memory is
filled when a worker is forked; faults are counted by the kernel (`ru_minflt`), never timed."""

from __future__ import annotations

import ctypes
import json
import mmap
import os
import resource
from collections.abc import Callable

import pytest

from yagent.workers import page_warmth
from yagent.workers.page_warmth import PAGE_SIZE, PageMap, clipped, prefault, writable_ranges

PAGES = 256


def _region() -> tuple[mmap.mmap, int]:
    """A private anonymous mapping of PAGES pages, every page written (present), and its first page number."""
    region = mmap.mmap(-1, PAGES * PAGE_SIZE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    for page in range(PAGES):
        region[page * PAGE_SIZE] = 1
    address = ctypes.addressof(ctypes.c_char.from_buffer(region))
    return region, address // PAGE_SIZE


def _in_child(body: Callable[[], object]) -> object:
    """`body()` in a forked child; its JSON-able answer, or the child's error raised here."""
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(reader)
        try:
            answer = {"ok": body()}
        except BaseException as exc:  # the parent reports it: nothing may escape a forked pytest
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        os.write(writer, json.dumps(answer).encode())
        os._exit(0)
    os.close(writer)
    with os.fdopen(reader, "rb") as pipe:
        data = pipe.read()
    os.waitpid(pid, 0)
    answer = json.loads(data)
    assert "error" not in answer, answer.get("error")
    return answer["ok"]


def _faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def _write_pages(region: mmap.mmap, pages: range) -> int:
    """Faults taken writing one byte to each of `pages`."""
    before = _faults()
    for page in pages:
        region[page * PAGE_SIZE] = 2
    return _faults() - before


def test_the_page_map_names_exactly_the_pages_a_forked_process_wrote_and_reads_after_it_turns_non_dumpable() -> None:
    region, first = _region()

    def body() -> list:
        page_map = PageMap.open()
        assert page_map is not None
        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0, as a worker is: the open map still reads
        for page in (*range(10, 20), *range(50, 55), PAGES - 1):
            region[page * PAGE_SIZE] = 2
        # No cap: the default keeps the lowest addresses, and this process's own heap, dirtied by a collection
        # after the fork, may lie below the region and fill it.
        owned = page_map.owned(limit=1 << 40)
        page_map.close()
        # Clipped to the region: a page right after it (this process's heap, written since the fork) joins its stretch.
        return [[start - first, min(count, first + PAGES - start)] for start, count in owned
                if first <= start < first + PAGES]

    assert _in_child(body) == [[10, 10], [50, 5], [PAGES - 1, 1]]


def test_the_page_map_stops_at_its_limit() -> None:
    region, _ = _region()

    def body() -> int:
        page_map = PageMap.open()
        assert page_map is not None
        _write_pages(region, range(PAGES))
        return sum(count for _, count in page_map.owned(limit=7))

    assert _in_child(body) == 7


def test_copying_a_reports_pages_ahead_leaves_no_fault_to_take_there_and_the_rest_still_faults() -> None:
    region, first = _region()

    def body() -> dict:
        copied = prefault([(first, 100)])
        _write_pages(region, range(PAGES - 1, PAGES))  # the counting code's own pages copied, outside what is counted
        return {"copied": copied, "ahead": _write_pages(region, range(100)),
                "rest": _write_pages(region, range(100, 200))}

    seen = _in_child(body)
    assert seen["copied"] == 100
    assert seen["ahead"] <= 3  # a page of the interpreter's own may still fault; the region's pages do not
    assert seen["rest"] >= 100


def test_stretches_outside_the_writable_mappings_are_never_touched_and_the_limit_holds() -> None:
    region, first = _region()
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    read_only = libc.mmap(None, 4 * PAGE_SIZE, mmap.PROT_READ, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
    assert read_only not in (None, ctypes.c_void_p(-1).value)

    def body() -> dict:
        ranges = writable_ranges()
        unmapped = max(start + count for start, count in ranges) + 1_000_000  # far past every mapping
        # Never mapped, page 1, and a mapping this process may only read: none is copied, nothing fails.
        copied_outside = prefault([(unmapped, 50), (1, 3), (read_only // PAGE_SIZE, 4)])
        limited = prefault([(first, PAGES)], limit=40)
        _write_pages(region, range(PAGES - 1, PAGES))  # the counting code's own pages copied, outside what is counted
        return {"outside": copied_outside, "limited": limited, "ahead": _write_pages(region, range(40)),
                "after": _write_pages(region, range(40, 80)), "alive": True}

    seen = _in_child(body)
    libc.munmap(ctypes.c_void_p(read_only), 4 * PAGE_SIZE)
    assert seen["outside"] == 0 and seen["limited"] == 40
    assert seen["ahead"] <= 3 and seen["after"] >= 40 and seen["alive"]


def test_clipping_keeps_only_what_lies_inside_the_ranges_in_address_order() -> None:
    ranges = [(100, 10), (200, 5)]
    assert clipped([(95, 10), (203, 10), (150, 3)], ranges, limit=100) == [(100, 5), (203, 2)]
    assert clipped([(0, 1000)], ranges, limit=12) == [(100, 10), (200, 2)]
    assert clipped([(300, 5)], ranges, limit=100) == []


def test_without_the_kernels_call_nothing_is_copied(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(page_warmth, "_MADVISE", None)
    assert prefault([(1, 1)]) == 0


def test_the_writable_ranges_hold_the_heap_and_leave_out_the_stack(tmp_path) -> None:
    maps = tmp_path / "maps"
    maps.write_text(
        "55d0c0000000-55d0c0021000 rw-p 00000000 00:00 0                          [heap]\n"
        "7f0000000000-7f0000004000 rw-p 00000000 00:00 0 \n"
        "7f0000004000-7f0000005000 r--p 00000000 08:01 123                        /usr/lib/libc.so.6\n"
        "7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0                          [stack]\n"
        "garbage line\n")
    starts = [start for start, _ in writable_ranges(str(maps))]
    assert starts == [0x55d0c0000000 // PAGE_SIZE, 0x7f0000000000 // PAGE_SIZE]
    assert writable_ranges(str(tmp_path / "missing")) == []
