"""The blackboard's two kill switches, one predicate each.

Every reader and writer of notes and artifacts asks these (the worker's board, its tools, the index, the
daemon's prune), so turning one off can never leave one path still on. They live in `ipc` because the
daemon's prune honours them too and may import nothing of `workers`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

__all__ = ["ARTIFACT_SWITCH", "BLACKBOARD_SWITCH", "artifacts_enabled", "blackboard_enabled"]

BLACKBOARD_SWITCH = "YAGENT_BLACKBOARD"  # "0" turns the board off: no note written, read, indexed or pruned
ARTIFACT_SWITCH = "YAGENT_ARTIFACT_DISABLE"  # "1" turns artifacts off: deliverables stay inline


def blackboard_enabled(environ: Mapping[str, str] | None = None) -> bool:
    return (os.environ if environ is None else environ).get(BLACKBOARD_SWITCH, "").strip() != "0"


def artifacts_enabled(environ: Mapping[str, str] | None = None) -> bool:
    """Artifacts need the board (a note carries the artifact's id), and their own switch on."""
    env = os.environ if environ is None else environ
    return blackboard_enabled(env) and env.get(ARTIFACT_SWITCH, "").strip() != "1"
