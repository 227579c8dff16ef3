"""The configuration the daemon acts on, re-read from config.toml when the file changed.

Read again when a turn is submitted and on SIGHUP, so `yagent setup` needs no restart: the turn's runs get
the new provider tables, timeouts and limits. What the daemon sized at start (the PUB high-water mark,
the event ring, the event-log cap) stays as it started. The file is the one the daemon started with
(`ConfigLocation`): a file named with --config that disappears is an error at the next reload, never a silent
switch to the defaults.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

from yagent.ipc.config import Settings, load_settings
from yagent.ipc.config_location import ConfigLocation
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
    def __init__(self, home: Path, settings: Settings, location: ConfigLocation | None = None) -> None:
        self.location = location or ConfigLocation(config_path(home))
        self.path = self.location.path
        self.current = settings
        self._stamp = _file_stamp(self.path)

    def refresh(self) -> bool:
        """Load the file again if it changed since it was last read; True when the settings were replaced.

        A broken file raises `ConfigError` and changes nothing; the next call tries again.
        """
        stamp = _file_stamp(self.path)
        if stamp == self._stamp:
            return False
        self.location.prepare()  # a named file that went away is an error; the default one is written again
        stamp = _file_stamp(self.path)
        fresh = load_settings(self.path)
        old = self.current
        self.current = dataclasses.replace(fresh, pub_hwm=old.pub_hwm, event_ring=old.event_ring,
                                           event_log_max_bytes=old.event_log_max_bytes)
        self._stamp = stamp
        log.info("configuration reloaded from %s", self.path)
        for warning in [*self.current.warnings, *self.current.run_settings.llm.warnings]:
            log.warning("%s: %s", self.path, warning)
        return True
