"""Every run the daemon supervises, by id: the runs holding a queue place or a live process.

Worker frames are routed through it: a connection's identity is random, and it is bound to its run here
once its hello proved the run's secret (`bind`); frames from any other identity belong to no run. A run
enters when its turn creates it and leaves when its process is gone; its connection is then remembered as
retired for a while, so frames it still had in flight are dropped without a word instead of looking like an
impostor's. `emptied` is set whenever the last run leaves, which is what shutdown waits for; `occupied` is
set while any run is in it (the worker pings run only then).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Iterator

from .run_supervisor import RunSupervisor

__all__ = ["RunTable"]

RETIRED_PEERS = 1024  # connections of ended runs remembered, the oldest forgotten first


class RunTable:
    def __init__(self) -> None:
        self._runs: dict[str, RunSupervisor] = {}
        self._by_peer: dict[bytes, RunSupervisor] = {}
        self._retired: OrderedDict[bytes, None] = OrderedDict()
        self.emptied = asyncio.Event()
        self.occupied = asyncio.Event()

    def add(self, run: RunSupervisor) -> None:
        self._runs[run.id] = run
        self.emptied.clear()
        self.occupied.set()

    def remove(self, run: RunSupervisor) -> None:
        if run.peer is not None and self._by_peer.get(run.peer) is run:
            del self._by_peer[run.peer]
            self._retired[run.peer] = None
            if len(self._retired) > RETIRED_PEERS:
                self._retired.popitem(last=False)
        if self._runs.pop(run.id, None) is not None and not self._runs:
            self.emptied.set()
            self.occupied.clear()

    def bind(self, peer: bytes, run: RunSupervisor) -> None:
        """From now on frames from `peer` are `run`'s (its hello proved the run's secret)."""
        self._by_peer[peer] = run

    def get(self, run_id: str) -> RunSupervisor | None:
        return self._runs.get(run_id)

    def by_peer(self, peer: bytes) -> RunSupervisor | None:
        return self._by_peer.get(peer)

    def retired(self, peer: bytes) -> bool:
        """Whether `peer` was the connection of a run that has ended."""
        return peer in self._retired

    def __contains__(self, run_id: object) -> bool:
        return run_id in self._runs

    def __iter__(self) -> Iterator[RunSupervisor]:
        return iter(list(self._runs.values()))  # a copy: stopping a run may end others while iterating

    def __len__(self) -> int:
        return len(self._runs)
