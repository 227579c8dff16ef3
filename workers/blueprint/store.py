"""The persisted blueprint on disk: `$YAGENT_HOME/data/blueprint/{project}/blueprint.md`, with `revisions/` holding
the file as it was before each of the last `KEEP_REVISIONS` writes ("deleted the wrong thing" needs an undo).

Only a Repo run's completion writes (`completion.py`); the daemon makes the directory and grants it to that run's
worker alone, every other run reads it. A write holds an exclusive lock on `.lock` for its read-fold-write (two Repo
runs of a turn may finish together), is atomic (`ipc.atomic_file.write_atomic`, 0600), and is skipped when the new
text is the old one byte for byte. A file that could not be read is set aside into `revisions/` before the new one
replaces it; a reader never repairs it. Nothing here follows a link: the file and its directory are opened without.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from yagent.ipc.atomic_file import write_atomic
from yagent.ipc.state_files import is_own_dir, state_dir

from .document import MAX_DOCUMENT_BYTES, Blueprint, parse_document

__all__ = ["DOCUMENT", "KEEP_REVISIONS", "BlueprintStore", "Unreadable"]

DOCUMENT = "blueprint.md"
KEEP_REVISIONS = 5


class Unreadable(Exception):
    """The blueprint's name holds something that cannot be read as its file (a FIFO, a link, no permission)."""


class BlueprintStore:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path = directory / DOCUMENT
        self.revisions = directory / "revisions"

    def raw(self) -> bytes | None:
        """The file's bytes (None: there is none), read without following a link, bounded; `Unreadable` when
        something is there that cannot be read as a file."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise Unreadable(f"it cannot be opened ({exc.strerror})") from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise Unreadable("it is not a regular file")
            chunks, size = [], 0
            while size <= MAX_DOCUMENT_BYTES and (chunk := os.read(fd, MAX_DOCUMENT_BYTES + 1 - size)):
                chunks.append(chunk)
                size += len(chunk)
            return b"".join(chunks)
        finally:
            os.close(fd)

    def read(self) -> Blueprint:
        try:
            raw = self.raw()
        except Unreadable as exc:
            return Blueprint(damaged=str(exc))
        return Blueprint() if raw is None else parse_document(raw)

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Exclusive hold on the blueprint for one read-fold-write."""
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(self.directory / ".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def write(self, text: str, *, now: datetime.datetime | None = None) -> bool:
        """Replace the file with `text` (call under `locked`); False when it held exactly that already."""
        data = text.encode("utf-8")
        try:
            old = self.raw()
        except Unreadable:  # no bytes to keep: the new file takes the place of what is there
            old = None
        if old == data:
            return False
        if old is not None:
            self._keep_revision(old, now or datetime.datetime.now(datetime.UTC))
        write_atomic(self.path, data, mode=0o600)
        return True

    def _keep_revision(self, old: bytes, now: datetime.datetime) -> None:
        # A run may write this directory: a `revisions` link would have the pruning below delete in its target.
        state_dir(self.revisions)  # a `StateFileError` fails the write, the way any unwritable blueprint does
        stamp = now.strftime("%Y%m%dT%H%M%S%fZ")
        write_atomic(self.revisions / f"{stamp}.md", old, mode=0o600)
        kept = sorted(p for p in self.revisions.iterdir() if p.name.endswith(".md") and not p.is_symlink())
        for stale in kept[:-KEEP_REVISIONS]:
            stale.unlink(missing_ok=True)

    def revision_names(self) -> list[str]:
        """The revisions kept, oldest first; none listed through a link put in the revisions directory's place."""
        if not is_own_dir(self.revisions):
            return []
        try:
            return sorted(p.name for p in self.revisions.iterdir() if p.name.endswith(".md"))
        except OSError:
            return []
