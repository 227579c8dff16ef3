"""The fields of events agents emit, read leniently: a value of the wrong type reads as the default.

Agents' event data is whatever a worker (or a third-party agent kind, or an event log written by another
version) put there; a surface that shows it must never fail on it. Daemon-stamped events have records of
their own (`stamped.py`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = ["number", "whole"]


def number(data: Mapping[str, Any], key: str, default: float = 0.0) -> float:
    """A finite number, or `default`."""
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return default
    try:
        value = float(value)
    except OverflowError:
        return default
    return value if math.isfinite(value) else default


def whole(data: Mapping[str, Any], key: str, default: int = 0) -> int:
    """A whole number, or `default`."""
    value = data.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else default
