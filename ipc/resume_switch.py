"""The `YAGENT_RESUME=0` kill switch: one predicate, asked by every rollout writer and replay reader.

With the switch off no rollout is written and nothing is replayable; everything else runs as before.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

__all__ = ["RESUME_ENV", "resume_enabled"]

RESUME_ENV = "YAGENT_RESUME"


def resume_enabled(environ: Mapping[str, str] | None = None) -> bool:
    """False only when `YAGENT_RESUME` is exactly "0" (any other value, or none, leaves resume on)."""
    env = os.environ if environ is None else environ
    return env.get(RESUME_ENV, "").strip() != "0"
