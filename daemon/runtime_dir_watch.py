"""Noticing that control.sock is gone or no longer ours while the daemon runs.

systemd-logind removes /run/user/UID when the user's last session ends; `rm -rf` does the same. A daemon
that went on would be unreachable, and a second one could start beside it on the same state home.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["ControlSocketWatch"]


def _stamp(path: Path) -> tuple[int, int] | None:
    """Which file a path names (device, inode); None when nothing is there."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


class ControlSocketWatch:
    def __init__(self, path: Path) -> None:
        """Call once the socket is bound: the file there now is the one that is ours."""
        self.path = path
        self._stamp = _stamp(path)

    def problem(self) -> str | None:
        """What happened to the socket file, or None while it is the one bound at start."""
        stamp = _stamp(self.path)
        if stamp == self._stamp:
            return None
        return "was removed" if stamp is None else "was replaced by another process"
