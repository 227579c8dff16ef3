"""The timing every bench script shares: the best of several runs, the figure the rest of the machine disturbs least."""

from __future__ import annotations

import time
from collections.abc import Callable


def best_of(work: Callable[[], object], runs: int = 3) -> float:
    """Seconds of the fastest of `runs` calls of `work`."""
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - started)
    return best
