"""Files an agent's file tools are about to write inside a directory git ignores, noted for the task's checkpoints.

The worker names them (`CheckpointNote`), the daemon records them, a checkpoint process reads them: each side
checks a noted path with `plain_project_path`, so a path from a worker that would leave the project, reach into
`.git` or name nothing is never handed to git.
"""

from __future__ import annotations

__all__ = ["MAX_NOTED_PATHS", "MAX_PATH_CHARS", "plain_project_path"]

MAX_NOTED_PATHS = 1000  # per task: past it a write goes ahead, and the undo cannot put that file back (said)
MAX_PATH_CHARS = 4096


def plain_project_path(path: object) -> bool:
    """Whether `path` is a "/"-separated path below the project root: no "..", ".", empty part or `.git`."""
    if not isinstance(path, str) or not path or len(path) > MAX_PATH_CHARS or "\0" in path or path.startswith("/"):
        return False
    return all(part not in ("", ".", "..", ".git") for part in path.split("/"))
