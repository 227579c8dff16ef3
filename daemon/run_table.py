"""Every run the daemon supervises, by id: the runs holding a queue place or a live process.

Worker frames are routed through it (the identity of a frame is its run id); a run enters when its turn
creates it and leaves when its process is gone. `emptied` is set whenever the last one leaves, which
is what shutdown waits for; `occupied` is set while any run is in it (the worker pings run only then).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

from .run_supervisor import RunSupervisor

__all__ = ["RunTable"]


class RunTable:
    def __init__(self) -> None:
        self._runs: dict[str, RunSupervisor] = {}
        self.emptied = asyncio.Event()
        self.occupied = asyncio.Event()

    def add(self, run: RunSupervisor) -> None:
        self._runs[run.id] = run
        self.emptied.clear()
        self.occupied.set()

    def remove(self, run: RunSupervisor) -> None:
        if self._runs.pop(run.id, None) is not None and not self._runs:
            self.emptied.set()
            self.occupied.clear()

    def get(self, run_id: str) -> RunSupervisor | None:
        return self._runs.get(run_id)

    def __contains__(self, run_id: object) -> bool:
        return run_id in self._runs

    def __iter__(self) -> Iterator[RunSupervisor]:
        return iter(list(self._runs.values()))  # a copy: stopping a run may end others while iterating

    def __len__(self) -> int:
        return len(self._runs)
