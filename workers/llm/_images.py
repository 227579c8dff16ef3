"""Images that tool results carry (a browser screenshot), read for the providers that accept them.

A tool message names its images by path (`Message.images`); the file is read only when a request is built, so
the conversation, its memory and its rollout stay text. Only the newest `SENT_IMAGES` images of a conversation
go out: each costs a provider about a thousand tokens or more, and an old page's picture rarely helps. A file
that is gone, larger than `MAX_IMAGE_BYTES` or not a PNG, JPEG, GIF or WebP image is left out, and the text
sent in its place says why.
"""

from __future__ import annotations

import base64
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass

from ._messages import Message

__all__ = ["MAX_IMAGE_BYTES", "SENT_IMAGES", "SentImage", "images_to_send", "read_image"]

SENT_IMAGES = 2
MAX_IMAGE_BYTES = 5 * 1024 * 1024  # Anthropic's limit for one image; OpenAI's is larger


@dataclass(frozen=True, slots=True)
class SentImage:
    """One image as a request carries it, or why it is not there (`data` empty)."""

    path: str
    media_type: str = ""
    data: str = ""  # base64
    problem: str = ""

    @property
    def data_url(self) -> str:
        return f"data:{self.media_type};base64,{self.data}"


def _media_type(head: bytes) -> str:
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return ""


def read_image(path: str) -> SentImage:
    """The file at `path` as a request's image, or why it cannot be one; never raises."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        return SentImage(path, problem=f"cannot be read ({exc.strerror})")
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fh.fileno())
        if not stat.S_ISREG(info.st_mode):
            return SentImage(path, problem="is not a file")
        if info.st_size > MAX_IMAGE_BYTES:
            return SentImage(path, problem=f"is {info.st_size:,} bytes, over the {MAX_IMAGE_BYTES:,} an image may be")
        raw = fh.read(MAX_IMAGE_BYTES + 1)
    if len(raw) > MAX_IMAGE_BYTES:  # it grew after the check
        return SentImage(path, problem=f"is over the {MAX_IMAGE_BYTES:,} bytes an image may be")
    media = _media_type(raw[:12])
    if not media:
        return SentImage(path, problem="is not a PNG, JPEG, GIF or WebP image")
    return SentImage(path, media, base64.b64encode(raw).decode("ascii"))


def images_to_send(messages: Sequence[Message], newest: int = SENT_IMAGES) -> dict[int, list[SentImage]]:
    """Message index → the images sent with it: the newest `newest` of the conversation, read now."""
    chosen: list[tuple[int, str]] = []
    for index in range(len(messages) - 1, -1, -1):
        for path in reversed(messages[index].images):
            if len(chosen) == newest:
                break
            chosen.append((index, path))
        if len(chosen) == newest:
            break
    out: dict[int, list[SentImage]] = {}
    for index, path in reversed(chosen):
        out.setdefault(index, []).append(read_image(path))
    return out
