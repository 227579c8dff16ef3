"""Configuration files that once passed validation and broke yagentd, made at a path for a test.

Each maker replaces whatever is at `path` and returns a phrase the first of the three error lines holds.
Shared by the loader's unit tests, the client commands' tests and the daemon's start and reload tests.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

__all__ = ["FILE_KIND_CASES", "HOSTILE_CASES", "VALUE_CASES", "make_hostile"]


def _write(text: str) -> Callable[[Path], None]:
    def make(path: Path) -> None:
        path.write_text(text)

    return make


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _dev_zero(path: Path) -> None:
    path.symlink_to("/dev/zero")


def _dangling(path: Path) -> None:
    path.symlink_to(path.parent / "moved-away.toml")


# name -> (maker, phrase of the first error line)
VALUE_CASES: dict[str, tuple[Callable[[Path], None], str]] = {
    "nan idle timeout": (_write("[agent]\ndelegate_idle_timeout = nan\n"), "delegate_idle_timeout = nan"),
    "inf heartbeat": (_write("[daemon]\nheartbeat_interval = inf\n"), "heartbeat_interval = inf"),
    "huge pub_hwm": (_write("[daemon]\npub_hwm = 99999999999\n"), "pub_hwm must be at most"),
    "deep nesting": (_write("a = " + "[" * 3000 + "]" * 3000 + "\n"), "nest more than 16 levels deep"),
}
FILE_KIND_CASES: dict[str, tuple[Callable[[Path], None], str]] = {
    "fifo": (_fifo, "the file is a named pipe (FIFO)"),
    "link to /dev/zero": (_dev_zero, "the file is a character device"),
    "dangling link": (_dangling, "which does not exist"),
}
HOSTILE_CASES = {**VALUE_CASES, **FILE_KIND_CASES}


def make_hostile(name: str, path: Path) -> str:
    """Put the hostile file `name` at `path`; the phrase its error line holds."""
    maker, phrase = HOSTILE_CASES[name]
    if path.is_symlink() or path.exists():
        path.unlink()
    maker(path)
    return phrase
