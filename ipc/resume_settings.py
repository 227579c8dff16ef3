"""`[resume]`: how long rollouts are kept and how much a replay may take on, read by the daemon's one parser.

    [resume]
    rollout_retention = "30d"    # a rollout unwritten this long may be removed (0 = kept forever)
    replay_max_steps = 500       # a delegated run stopped past this step is not replayed (0 = no limit)
    replay_max_messages = 2000   # nor one whose history holds more messages than this (0 = no limit)

The values reach workers resolved, in `RunSettings` (workers never read config.toml).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .provider_config import shown_value

__all__ = ["DEFAULT_REPLAY_MAX_MESSAGES", "DEFAULT_REPLAY_MAX_STEPS", "DEFAULT_ROLLOUT_RETENTION", "RESUME_KEYS",
           "parse_resume"]

DEFAULT_ROLLOUT_RETENTION = 30 * 86400.0
DEFAULT_REPLAY_MAX_STEPS = 500
DEFAULT_REPLAY_MAX_MESSAGES = 2000
RESUME_KEYS = ("rollout_retention", "replay_max_steps", "replay_max_messages")
_MAX_COUNT = 10_000_000


def _count(section: Mapping[str, Any], key: str, default: int) -> int:
    value = section.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX_COUNT:
        raise ValueError(f"[resume] {key} must be a whole number from 0 (no limit) to {_MAX_COUNT}, "
                         f"got {shown_value(value)}")
    return value


def parse_resume(section: Mapping[str, Any], parse_duration: Any) -> dict[str, Any]:
    """The `RunSettings` fields `[resume]` sets; `parse_duration` is the config's own duration reader."""
    retention = DEFAULT_ROLLOUT_RETENTION
    if "rollout_retention" in section:
        retention = parse_duration(section["rollout_retention"], "[resume] rollout_retention")
    return {"rollout_retention": float(retention),
            "replay_max_steps": _count(section, "replay_max_steps", DEFAULT_REPLAY_MAX_STEPS),
            "replay_max_messages": _count(section, "replay_max_messages", DEFAULT_REPLAY_MAX_MESSAGES)}
