"""Deliverables too long for a parent's context: stored whole under `artifacts/{id}`, read back in pages.

An id is `YYYYMMDD-HHMMSS-xxxxxxxx` (UTC time, 32 random bits); the file is created exclusively, so two
writers never share one. What stays in the context is a summary: the hand-off's conclusion when there is
one, else the start of the text itself.
"""

from __future__ import annotations

import datetime
import os
import re
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

from yagent.ipc.state_files import state_dir

from .exclusive_file import place_exclusive
from .handoff_parse import Handoff

__all__ = ["ARTIFACT_ID", "ArtifactPage", "ArtifactStore", "artifact_summary"]

ARTIFACT_ID = re.compile(r"^\d{8}-\d{6}-[0-9a-f]{8}$")
MAX_ARTIFACT_BYTES = 16 * 1024 * 1024
_MAX_TRIES = 64
_IMAGE_SUFFIXES = (".png", ".jpg")


@dataclass(frozen=True, slots=True)
class ArtifactPage:
    artifact_id: str
    text: str
    offset: int
    total: int

    @property
    def next_offset(self) -> int | None:
        end = self.offset + len(self.text)
        return end if end < self.total else None


def artifact_summary(handoff: Handoff | None, text: str, max_chars: int) -> str:
    """The hand-off's conclusion if there is a real one, else the text's first `max_chars` characters."""
    if handoff is not None and not handoff.degraded and handoff.conclusion.strip():
        summary = handoff.conclusion.strip()
    else:
        summary = text.strip()
    return summary if len(summary) <= max_chars else summary[: max_chars - 1] + "…"


class ArtifactStore:
    """The artifacts of one task: `root` is `state_layout.artifacts_dir(home, task)`."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def put(self, text: str) -> str:
        return self._place(text.encode("utf-8", "replace"), "")

    def put_image(self, data: bytes, suffix: str) -> Path:
        """An image (a browser screenshot) stored as `{id}{suffix}`, so that a viewer opens it by its name; read back
        by path, never by `read` (which pages text)."""
        if suffix not in _IMAGE_SUFFIXES:
            raise ValueError(f"an image artifact ends in one of {', '.join(_IMAGE_SUFFIXES)}, not {suffix!r}")
        if len(data) > MAX_ARTIFACT_BYTES:
            raise OSError(f"the image is {len(data)} bytes, over the {MAX_ARTIFACT_BYTES}-byte artifact cap")
        return self.root / (self._place(data, suffix) + suffix)

    def _place(self, data: bytes, suffix: str) -> str:
        state_dir(self.root)  # a run may write its task's directory: `artifacts` may be a link to elsewhere
        for _ in range(_MAX_TRIES):
            now = datetime.datetime.now(datetime.UTC)
            artifact_id = f"{now:%Y%m%d-%H%M%S}-{secrets.token_hex(4)}"
            if place_exclusive(self.root / f".{artifact_id}.tmp", self.root / f"{artifact_id}{suffix}", data):
                return artifact_id
        raise OSError(f"could not find a free artifact id in {self.root} after {_MAX_TRIES} tries")

    def read(self, artifact_id: str, offset: int = 0, limit: int = 8_000) -> ArtifactPage | None:
        """`limit` characters from `offset`; None for an id that is malformed or names no regular file."""
        artifact_id = artifact_id.strip().removeprefix("artifact:")
        if not ARTIFACT_ID.match(artifact_id):
            return None
        try:
            fd = os.open(self.root / artifact_id, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            with os.fdopen(os.dup(fd), "rb") as src:
                text = src.read(MAX_ARTIFACT_BYTES).decode("utf-8", "replace")
        finally:
            os.close(fd)
        offset = min(max(offset, 0), len(text))
        return ArtifactPage(artifact_id, text[offset: offset + max(limit, 1)], offset, len(text))
