"""The pages runs copy on write, learned from a few warm workers and handed to the warm workers forked after them.

See `yagent.workers.page_warmth` for why. The first `LEARN_RUNS` runs handed to warm workers are asked to report
(the assignment's learn flag); each report that reads as page stretches (`yagent.ipc.page_runs`) is joined to what
is known, for as long as it comes from the same forkserver (its pid): pages of another process's memory would be
guesses. A report that does not read is refused whole and logged once per reason. The profile lives as long as the
daemon: a new daemon has a new forkserver, whose memory lies elsewhere.
"""

from __future__ import annotations

import logging
import threading

from yagent.ipc.page_runs import MAX_PREFAULT_PAGES, PageRuns, merged_runs, page_runs_of

__all__ = ["LEARN_RUNS", "PageProfile"]

log = logging.getLogger(__name__)

# Runs asked to report: a Director turn and a couple of delegations cover what most runs touch.
LEARN_RUNS = 3


class PageProfile:
    """What is known of the pages runs make their own. The launcher's thread and the event loop both use it."""

    def __init__(self, learn_runs: int = LEARN_RUNS) -> None:
        self._lock = threading.Lock()
        self._learn_runs = learn_runs
        self._asked = 0
        self._parent = 0
        self._runs: PageRuns = ()
        self._refused: set[str] = set()
        self.reports = 0  # reports joined so far

    def ask(self) -> bool:
        """Whether the run being handed to a warm worker now should report its pages (True for the first few)."""
        with self._lock:
            if self._asked >= self._learn_runs:
                return False
            self._asked += 1
            return True

    def learning(self) -> bool:
        """Whether a run may still be asked: a warm worker forked now opens its page map only then."""
        with self._lock:
            return self._asked < self._learn_runs

    def current(self) -> tuple[int, PageRuns] | None:
        """(the forkserver's pid, the page stretches) for a warm worker being forked; None while nothing is known."""
        with self._lock:
            return (self._parent, self._runs) if self._runs else None

    def learn(self, runs: object, parent: object, *, run: str = "") -> bool:
        """Join a run's report; False (and a log line) when it does not read."""
        found = page_runs_of(runs)
        if type(parent) is not int or parent <= 1:
            found = f"forkserver pid {parent!r} is no process"
        if isinstance(found, str):
            with self._lock:
                first = found not in self._refused
                if first and len(self._refused) < 16:
                    self._refused.add(found)
            if first:
                log.warning("run %s: its page report was left out: %s", run or "?", found)
            return False
        with self._lock:
            known = self._runs if parent == self._parent else ()
            self._parent = parent
            self._runs = merged_runs(known, found, limit=MAX_PREFAULT_PAGES)
            self.reports += 1
            pages = sum(count for _, count in self._runs)
        log.info("run %s reported the pages it copied on write: warm workers now copy %d pages ahead", run or "?",
                 pages)
        return True
