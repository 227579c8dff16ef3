"""Peers a socket refused (a worker without its run's proof, a client without the token): each is logged, and
answered, only the first time.

An impostor that keeps sending must not fill the log, nor make the daemon write a reply per frame it ignores;
one that cycles through identities must not grow memory or the log without bound either: at most `capacity`
peers are remembered (the oldest forgotten first), and at most `log_budget` new ones are logged per `window`
seconds — the rest are counted, and the count goes into the next line that is written.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable

__all__ = ["RefusedPeers"]

log = logging.getLogger(__name__)


class RefusedPeers:
    def __init__(self, socket_name: str, clock: Callable[[], float] = time.monotonic, *, capacity: int = 4096,
                 log_budget: int = 20, window: float = 60.0) -> None:
        self.socket_name = socket_name
        self._clock = clock
        self._capacity = capacity
        self._log_budget = log_budget
        self._window = window
        self._seen: OrderedDict[bytes, None] = OrderedDict()
        self._window_start = -window
        self._logged_in_window = 0
        self._unlogged = 0
        self.refusals = 0  # every refusal, first or not: for tests and benches

    def first(self, identity: bytes, why: str) -> bool:
        """Note one refusal of `identity`; True (and a log line, budget permitting) the first time it is seen."""
        self.refusals += 1
        if identity in self._seen:
            self._seen.move_to_end(identity)
            return False
        self._seen[identity] = None
        if len(self._seen) > self._capacity:
            self._seen.popitem(last=False)
        self._log(identity, why)
        return True

    def forget(self, identity: bytes) -> None:
        """`identity` was admitted after all (a worker that said hello late): its next refusal is news again."""
        self._seen.pop(identity, None)

    def _log(self, identity: bytes, why: str) -> None:
        now = self._clock()
        if now - self._window_start >= self._window:
            self._window_start, self._logged_in_window = now, 0
        if self._logged_in_window >= self._log_budget:
            self._unlogged += 1
            return
        self._logged_in_window += 1
        more = ""
        if self._unlogged:
            more = f" ({self._unlogged} other peers refused before this one were not logged one by one)"
            self._unlogged = 0
        last = " (more this minute are counted, not logged)" if self._logged_in_window == self._log_budget else ""
        log.warning("%s: refused peer %s: %s; its further frames are ignored without a word%s%s",
                    self.socket_name, identity.hex(), why, more, last)
