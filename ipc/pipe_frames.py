"""Messages over a byte stream (a child's stdin and stdout): each is a 4-byte big-endian length, then the message as
`records.encode` makes it. Used between the daemon and a project's browser host.

The reader is fed whatever bytes arrived and returns the whole messages among them; a length over the frame cap
(a peer gone mad, or junk on the stream) is `MessageTooLarge` before any of it is buffered, so a peer can never make
the reader allocate without bound.
"""

from __future__ import annotations

import struct

from .errors import MessageTooLarge
from .records import MAX_FRAME_BYTES, Message, decode, encode

__all__ = ["FrameReader", "framed"]

_LENGTH = struct.Struct(">I")


def framed(msg: Message) -> bytes:
    """`msg` as one frame on a stream; `MessageTooLarge` over the cap."""
    body = encode(msg)
    return _LENGTH.pack(len(body)) + body


class FrameReader:
    def __init__(self, limit: int = MAX_FRAME_BYTES) -> None:
        self._buffer = bytearray()
        self._limit = limit

    def feed(self, data: bytes) -> list[Message]:
        """The whole messages `data` completes, in order. A frame that does not decode is `MalformedMessage`; one
        announced over the cap is `MessageTooLarge` (the stream cannot be trusted after either)."""
        self._buffer += data
        found: list[Message] = []
        while len(self._buffer) >= _LENGTH.size:
            (size,) = _LENGTH.unpack_from(self._buffer)
            if size > self._limit:
                raise MessageTooLarge(f"a frame of {size} bytes was announced, over the {self._limit}-byte cap")
            if len(self._buffer) < _LENGTH.size + size:
                break
            body = bytes(self._buffer[_LENGTH.size:_LENGTH.size + size])
            del self._buffer[:_LENGTH.size + size]
            found.append(decode(body))
        return found
