"""Freed heap memory handed back after traffic: one trim per burst, on the loop's real timers, none without traffic."""

from __future__ import annotations

import asyncio
import platform

import pytest

from yagent.daemon.heap_trim import HeapTrim, malloc_trim
from yagent.daemon.schedule import Scheduler


def test_a_burst_past_the_threshold_is_trimmed_once_after_the_delay_and_quiet_costs_nothing() -> None:
    async def main() -> tuple[int, int, int]:
        trimmed = asyncio.Event()
        calls = 0

        def trim() -> None:
            nonlocal calls
            calls += 1
            trimmed.set()

        heap = HeapTrim(Scheduler().after, threshold=1000, delay=0.05, trim=trim)
        heap.passed(999)
        below = heap._timer is None
        for _ in range(500):  # a burst: one timer, however many frames
            heap.passed(100)
        async with asyncio.timeout(10):
            await trimmed.wait()
        after_burst = calls
        heap.passed(999)  # below the threshold again: nothing is armed
        return after_burst, int(below and heap._timer is None), heap.trims

    after_burst, quiet, trims = asyncio.run(main())
    assert after_burst == 1 and trims == 1 and quiet == 1


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc only")
def test_glibc_malloc_trim_is_found_and_callable() -> None:
    assert malloc_trim is not None
    malloc_trim()
