"""The configuration the daemon acts on, re-read from config.toml when the file changed.

Read again when a turn is submitted and on SIGHUP, so `yagent setup` needs no restart: the turn's runs get
the new provider tables, timeouts and limits. What the daemon sized at start (the PUB high-water mark,
the event ring, the event-log cap) stays as it started.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

from yagent.ipc.config import Settings, load_settings
from yagent.ipc.home import config_path

__all__ = ["SettingsSource"]

log = logging.getLogger(__name__)


def _file_stamp(path: Path) -> tuple[object, ...] | None:
    """What tells a changed file from the one read before (None: nothing there). The link itself counts too:
    a symlink that appears, dangling, must be read (and refused), not taken for a missing file."""
    try:
        link = path.lstat()
    except OSError:
        return None
    try:
        st = path.stat()
        target: tuple[int, int, int] | None = (st.st_mtime_ns, st.st_size, st.st_ino)
    except OSError:
        target = None
    return (link.st_ino, link.st_mtime_ns, target)


class SettingsSource:
    def __init__(self, home: Path, settings: Settings) -> None:
        self.path = config_path(home)
        self.current = settings
        self._stamp = _file_stamp(self.path)

    def refresh(self) -> bool:
        """Load the file again if it changed since it was last read; True when the settings were replaced.

        A broken file raises `ConfigError` and changes nothing; the next call tries again.
        """
        stamp = _file_stamp(self.path)
        if stamp == self._stamp:
            return False
        fresh = load_settings(self.path)
        old = self.current
        self.current = dataclasses.replace(fresh, pub_hwm=old.pub_hwm, event_ring=old.event_ring,
                                           event_log_max_bytes=old.event_log_max_bytes)
        self._stamp = stamp
        log.info("configuration reloaded from %s", self.path)
        for warning in self.current.warnings:
            log.warning("%s: %s", self.path, warning)
        return True
