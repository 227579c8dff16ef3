"""Freed heap memory handed back after traffic: trims while a flood flows, one after it, none without traffic;
on the loop's real timers."""

from __future__ import annotations

import asyncio
import platform

import pytest

from yagent.daemon.heap_trim import HeapTrim, malloc_trim
from yagent.daemon.schedule import Scheduler


def test_a_flood_is_trimmed_while_it_flows_and_once_after_it_and_quiet_arms_nothing() -> None:
    async def main() -> tuple[bool, int, bool, int]:
        trimmed = asyncio.Event()

        def trim() -> None:
            trimmed.set()

        async def next_trim() -> None:
            async with asyncio.timeout(10):
                await trimmed.wait()
            trimmed.clear()

        heap = HeapTrim(Scheduler().after, threshold=1000, delay=0.05, still_flowing=100, trim=trim)
        heap.passed(999)
        below = heap._timer is None
        for _ in range(500):  # the flood: one timer, however many frames
            heap.passed(100)
        await next_trim()
        heap.passed(500)  # still flowing after that trim
        await next_trim()
        heap.passed(50)  # the flood's tail, after which nothing comes
        await next_trim()
        after_tail = heap.trims
        done = heap._timer is None  # quiet: no timer left, no wake-up
        heap.passed(999)  # ordinary traffic below the threshold arms nothing either
        return below, after_tail, done and heap._timer is None, heap.trims

    below, after_tail, quiet, trims = asyncio.run(main())
    assert below and after_tail == 3 and quiet and trims == 3


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc only")
def test_glibc_malloc_trim_is_found_and_callable() -> None:
    assert malloc_trim is not None
    malloc_trim()
