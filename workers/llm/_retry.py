"""When and how long to wait before another attempt; the clock and the sleep are injectable seams."""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from ._errors import LLMError

__all__ = ["RetryPolicy", "parse_retry_after"]

MAX_BACKOFF = 30.0


def parse_retry_after(headers: Mapping[str, str], now: Callable[[], float] = time.time) -> float | None:
    """Seconds the server asked us to wait: `retry-after-ms`, else `retry-after` (seconds or HTTP date)."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - now())


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Exponential backoff capped at `max_delay`, honouring Retry-After.

    `attempt` counts from 1 (the first attempt that failed). `jitter` shortens a delay by up to that
    fraction so that workers hit by the same outage do not retry in lockstep; tests pass 0.
    `sleep` and `clock` are the time seams: tests hand in a recording sleep and a fake clock.
    """

    max_retries: int = 5
    base_delay: float = 1.0
    max_delay: float = MAX_BACKOFF
    jitter: float = 0.25
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    clock: Callable[[], float] = time.monotonic
    rng: Callable[[], float] = field(default=random.random)

    def delay(self, attempt: int, error: LLMError) -> float:
        if error.retry_after is not None:
            return error.retry_after
        backoff = min(self.max_delay, self.base_delay * (2 ** (attempt - 1)))
        return backoff * (1.0 - self.jitter * self.rng())
