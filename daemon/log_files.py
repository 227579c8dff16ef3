"""Where the daemon logs: stderr (journald under systemd) and a rotating file under `$YAGENT_HOME/logs`."""

from __future__ import annotations

import logging
import logging.handlers
import os
import sys
from pathlib import Path
from typing import TextIO

from yagent.ipc.http_request_logs import quiet_request_lines

__all__ = ["reopen_log_files", "setup_logging"]


def setup_logging(home: Path, level: str) -> None:
    logs = home / "logs"
    logs.mkdir(mode=0o700, parents=True, exist_ok=True)
    fmt = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    stderr = logging.StreamHandler(sys.stderr)
    stderr.setFormatter(fmt)
    filelog = _PrivateRotatingFileHandler(logs / "yagentd.log", maxBytes=5_000_000, backupCount=3)
    filelog.setFormatter(fmt)
    root = logging.getLogger()
    root.handlers[:] = [stderr, filelog]
    root.setLevel(getattr(logging, level.upper(), logging.INFO))
    quiet_request_lines(root.level)


class _PrivateRotatingFileHandler(logging.handlers.RotatingFileHandler):
    """Every file it opens (the first, each rotation's, each reopen) is created 0600, whatever the umask."""

    def _open(self) -> TextIO:
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        return open(fd, self.mode, encoding=self.encoding, errors=self.errors)


def reopen_log_files() -> None:
    """Close every log file; the next record opens it again (logrotate moved it away)."""
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.FileHandler):
            with handler.lock:  # type: ignore[union-attr]
                if handler.stream is not None:
                    handler.stream.close()
                    handler.stream = None  # type: ignore[assignment]  # reopened by the next record
