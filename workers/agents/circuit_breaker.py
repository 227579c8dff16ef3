"""Circuit breaker over the Director's model calls, shared by every Director run through a file.

Each user turn is its own worker process, so the breaker's state lives in
`$YAGENT_HOME/breaker/{provider}.json` (read and written under an exclusive lock): when a provider
keeps failing, the next turns fail fast instead of hammering it, until `reset_timeout` has passed.
There is one breaker per provider (`ProviderBreakers`), picked at each call for the provider the
agent's engine resolves to at that moment — after routing — so a failing provider never blocks
another one the router or an override chose.

`allow()` is itself the probe: in half-open state it admits exactly one caller, so every query must
be followed, in the same step, by the call and by `record_success` / `record_failure`. A probe that
never reports (its caller died) expires after `reset_timeout`, so the breaker cannot stay locked.
A threshold of 0 means no breaker at all — the Director must not stall on a network blip.
A breaker file that cannot be used (unwritable, or something a run planted at its name: a link, a pipe) is
warned about once and the breaker then counts in this process's memory: it must never fail the model call.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import math
import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from yagent.ipc.state_files import StateFileError, open_state_file

__all__ = ["CircuitBreaker", "ProviderBreakers"]

log = logging.getLogger(__name__)


class CircuitBreaker:
    def __init__(self, threshold: int, reset_timeout: float = 60.0, *, path: Path | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        if threshold <= 0:
            raise ValueError("a breaker needs a positive threshold; use None for no breaker")
        self.threshold = threshold
        self.reset_timeout = reset_timeout
        self._path = path
        self._clock = clock
        self._state: dict[str, Any] = {"failures": 0, "opened_at": None, "probe_at": None}

    @contextlib.contextmanager
    def _shared(self) -> Iterator[dict[str, Any]]:
        """The state, loaded from and saved back to the shared file under its lock (or kept in memory)."""
        opened = self._load()
        if opened is None:
            yield self._state
            return
        fd, state = opened
        try:
            yield state
            data = json.dumps(state).encode()
            try:
                os.ftruncate(fd, 0)
                os.pwrite(fd, data, 0)
            except OSError as exc:
                self._state = state  # what this call counted carries on in memory
                self._give_up_file(exc)
        finally:
            os.close(fd)  # closing the descriptor releases the lock

    def _load(self) -> tuple[int, dict[str, Any]] | None:
        """The shared file, opened and locked, with the state read from it; None when the state is in memory."""
        if self._path is None:
            return None
        try:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            fd = open_state_file(self._path, os.O_RDWR | os.O_CREAT)  # never through a link a run planted
        except OSError as exc:
            self._give_up_file(exc)
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            raw = os.pread(fd, 4096, 0)
        except OSError as exc:
            os.close(fd)
            self._give_up_file(exc)
            return None
        try:
            saved = json.loads(raw) if raw else {}
        except ValueError:
            saved = {}
        state: dict[str, Any] = {"failures": 0, "opened_at": None, "probe_at": None}
        if isinstance(saved, dict):  # only finite numbers are taken: anything else must not break (or jam) a call
            state.update((k, v) for k, v in saved.items()
                         if k in state and isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v))
        return fd, state

    def _give_up_file(self, exc: OSError) -> None:
        """From now on this process counts in memory; said once, since every model call would say it again."""
        if isinstance(exc, StateFileError):  # its message names the file and what to do
            problem = exc.strerror
        else:
            problem = f"{self._path} cannot be used ({exc.strerror or exc}): make it a writable file or remove it"
        log.warning("circuit breaker: %s; meanwhile it counts only this process's model calls", problem)
        self._path = None

    def _state_name(self, state: dict[str, Any]) -> str:
        if state["opened_at"] is None:
            return "closed"
        if self._clock() - state["opened_at"] < self.reset_timeout:
            return "open"
        return "half-open"

    @property
    def state(self) -> str:
        with self._shared() as state:
            return self._state_name(state)

    def allow(self) -> bool:
        with self._shared() as state:
            name = self._state_name(state)
            if name == "closed":
                return True
            if name == "open":
                return False
            now = self._clock()
            if state["probe_at"] is not None and now - state["probe_at"] < self.reset_timeout:
                return False  # one probe is already out
            state["probe_at"] = now
            return True

    def record_success(self) -> None:
        with self._shared() as state:
            state.update(failures=0, opened_at=None, probe_at=None)

    def record_failure(self) -> None:
        with self._shared() as state:
            state["failures"] += 1
            if state["opened_at"] is not None or state["failures"] >= self.threshold:
                state["opened_at"] = self._clock()
                state["probe_at"] = None


class ProviderBreakers:
    """One breaker per provider, sharing threshold and reset timeout; `directory` None keeps them in memory."""

    def __init__(self, threshold: int, reset_timeout: float = 60.0, *, directory: Path | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        if threshold <= 0:
            raise ValueError("a breaker needs a positive threshold; use None for no breaker")
        self.threshold = threshold
        self.reset_timeout = reset_timeout
        self.directory = directory
        self._clock = clock
        self._breakers: dict[str, CircuitBreaker] = {}

    def path_for(self, provider: str) -> Path | None:
        if self.directory is None:
            return None
        # Provider names are config keys; keep them from escaping the directory.
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", provider).lstrip(".") or "_"
        return self.directory / f"{safe}.json"

    def for_provider(self, provider: str) -> CircuitBreaker:
        breaker = self._breakers.get(provider)
        if breaker is None:
            breaker = CircuitBreaker(self.threshold, self.reset_timeout, path=self.path_for(provider),
                                     clock=self._clock)
            self._breakers[provider] = breaker
        return breaker
