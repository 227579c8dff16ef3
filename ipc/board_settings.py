"""`[blackboard]`: the budgets of the hand-off board and its artifacts, read by the daemon's one config parser.

    [blackboard]
    index_max_notes = 30          # notes listed in the index each model call sees; 0 = no index at all
    index_line_chars = 240        # characters per index line; 0 = lines are never trimmed
    summary_max_runes = 400       # characters of a note's summary (v1 notes, artifact summaries); <=0 = default
    max_notes_per_board = 200     # notes one board keeps, oldest removed first; <=0 = default
    ttl = "30d"                   # a board idle this long is removed; "0" = never
    artifact_budget_tokens = 500  # a deliverable longer than this is stored as an artifact; 0 = never
    artifact_retention = "30d"    # an artifact of a task idle this long is removed; "0" = never

Where zero has a meaning the key's existence decides (`index_max_notes = 0` is "off", a missing key is
the default); the two caps without an "off" take zero or less as the default. The values arrive in the
worker resolved, in `RunSettings.blackboard`; the daemon reads `ttl` and `artifact_retention` for its prune.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from .provider_config import shown_value
from .records import Record, record

__all__ = ["BLACKBOARD_KEYS", "BoardSettings", "parse_board"]

BLACKBOARD_KEYS = ("index_max_notes", "index_line_chars", "summary_max_runes", "max_notes_per_board", "ttl",
                   "artifact_budget_tokens", "artifact_retention")
_DAY = 86400.0
_MAX_COUNT = 100_000


@record
class BoardSettings(Record):
    """The resolved `[blackboard]` values; every field already means exactly what it says."""

    index_max_notes: int = 30  # 0 = no index
    index_line_chars: int = 240  # 0 = no trim
    summary_max_runes: int = 400
    max_notes_per_board: int = 200
    ttl: float = 30 * _DAY  # seconds; 0 = boards are never removed
    artifact_budget_tokens: int = 500  # 0 = deliverables are never moved to artifacts
    artifact_retention: float = 30 * _DAY  # seconds; 0 = artifacts are never removed


def _count(section: Mapping[str, Any], key: str, default: int, *, zero_is_default: bool) -> int:
    if key not in section:
        return default
    value = section[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"[blackboard] {key} must be a whole number, got {shown_value(value)}; "
                         f"remove the key for the default ({default})")
    if zero_is_default and value <= 0:
        return default
    if value < 0:
        raise ValueError(f"[blackboard] {key} must not be negative (0 turns it off), got {shown_value(value)}")
    if value > _MAX_COUNT:
        raise ValueError(f"[blackboard] {key} must be at most {_MAX_COUNT}, got {shown_value(value)}")
    return value


def parse_board(table: Mapping[str, Any], parse_duration: Callable[[Any, str], float]) -> BoardSettings:
    """The `[blackboard]` section resolved; `ValueError` naming the key for a value that cannot be meant.

    `parse_duration` is the config parser's own (one reading of "30d" for every section)."""
    section = table.get("blackboard", {})
    if not isinstance(section, Mapping):
        raise ValueError("[blackboard] must be a table")
    defaults = BoardSettings()
    kwargs: dict[str, Any] = {
        "index_max_notes": _count(section, "index_max_notes", defaults.index_max_notes, zero_is_default=False),
        "index_line_chars": _count(section, "index_line_chars", defaults.index_line_chars, zero_is_default=False),
        "summary_max_runes": _count(section, "summary_max_runes", defaults.summary_max_runes, zero_is_default=True),
        "max_notes_per_board": _count(section, "max_notes_per_board", defaults.max_notes_per_board,
                                      zero_is_default=True),
        "artifact_budget_tokens": _count(section, "artifact_budget_tokens", defaults.artifact_budget_tokens,
                                         zero_is_default=False),
    }
    for key in ("ttl", "artifact_retention"):
        if key in section:
            seconds = parse_duration(section[key], f"[blackboard] {key}")
            if not math.isfinite(seconds):
                raise ValueError(f"[blackboard] {key} must be a finite duration")
            kwargs[key] = seconds
    return BoardSettings(**kwargs)
