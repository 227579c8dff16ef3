"""The on-disk format of a task's event log, and reading it past damage.

A log is a sequence of records, one per published frame (an encoded `PublishedEvents`):

    offset  0  0xC6                 msgpack's bin32 header ...
            1  body length, u32     ... and its length: a record is one msgpack value (see below)
            5  b"yEv1"              magic (format 1)
            9  first seq, u64       the seq of the frame's first event (for the offset index)
           17  crc32 of the payload u32
           21  crc32 of bytes 0..20 u32 (the header's own checksum: a false magic costs 25 bytes to reject)
           25  payload              the frame as it was published

The payload is one run's batch with its first seq (`run`, `agent`, `seq` beside `[type, ts, data]` events); a
payload written before protocol 3 carries every event whole (`[seq, run, agent, type, ts, data]`): both are read.

All integers are big-endian. A reader that meets bytes which are not a valid record (a bad checksum, a
length past the end, garbage) searches for the next magic whose header and payload check out and goes
on from there: damage costs the events inside it, never those after it. Nothing here writes.

Logs written before records had a frame ("bare": frames concatenated, the first byte a msgpack map header,
never 0xC6) are still read: in a log that starts like a bare frame, the bytes before the first record
header are taken as bare frames, and after damage among them the reader resynchronises on the next bare
frame of the same task (every such frame starts `{"task": <task id>, "events": [...`). Bare frames carry
no checksum: what decodes as a frame is taken as one, as before. A record being a bin32 value means a
yagent from before this format reads a new log as a stream of opaque values it skips, rather than as
damage it would cut off.
"""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Iterator
from enum import Enum
from typing import Any, BinaryIO, NamedTuple

import msgpack

from yagent.ipc.records import MAX_FRAME_BYTES

__all__ = ["HEADER_SIZE", "MAGIC", "Item", "ItemKind", "Window", "frame_record", "legacy_end", "legacy_needle",
           "walk"]

MAGIC = b"yEv1"
_BIN32 = 0xC6
_HEAD = struct.Struct(">BI4sQII")
HEADER_SIZE = _HEAD.size  # 25
_MAGIC_AT = 5  # where the magic sits in a record
_BODY_EXTRA = HEADER_SIZE - 5  # bytes of header the bin32 length counts besides the payload
# Bytes read from the file at a time; a window keeps at most about this much behind its read position.
_CHUNK = 1 << 20
# Bytes kept before a search position, so a match can step back to the start of its record or frame.
_MARGIN = 16


class ItemKind(Enum):
    RECORD = "record"  # a framed record; `value` is its payload (bytes)
    LEGACY = "legacy"  # a bare frame of a log from before records; `value` is the decoded frame
    DAMAGE = "damage"  # bytes that hold neither; `value` is None


class Item(NamedTuple):
    kind: ItemKind
    start: int
    end: int
    first_seq: int  # 0 for damage
    value: Any


def frame_record(first_seq: int, payload: bytes) -> bytes:
    """One record holding `payload`, a published frame whose first event has seq `first_seq`."""
    head = struct.pack(">BI4sQI", _BIN32, _BODY_EXTRA + len(payload), MAGIC, first_seq, zlib.crc32(payload))
    return head + struct.pack(">I", zlib.crc32(head)) + payload


def legacy_needle(task: str) -> bytes:
    """What every bare frame of `task` carries one byte after its start: the key "task" and the task id."""
    return msgpack.packb("task") + msgpack.packb(task)


class Window:
    """A file read forward in chunks, addressed by absolute offset; bytes before `release` are let go."""

    def __init__(self, fh: BinaryIO, start: int) -> None:
        fh.seek(start)
        self._fh = fh
        self._base = start  # file offset of _buf[0]
        self._buf = bytearray()
        self._eof = False

    @property
    def end(self) -> int:
        """The offset of the last byte read plus one (the file's size once `at_eof`)."""
        return self._base + len(self._buf)

    @property
    def at_eof(self) -> bool:
        return self._eof

    def _more(self, at_least: int = 0) -> bool:
        if self._eof:
            return False
        chunk = self._fh.read(max(_CHUNK, at_least))
        if not chunk:
            self._eof = True
            return False
        self._buf += chunk
        return True

    def release(self, before: int) -> None:
        """Bytes before `before` are not needed again (called at item boundaries)."""
        drop = before - _MARGIN - self._base
        if drop > _CHUNK:
            del self._buf[:drop]
            self._base += drop

    def get(self, pos: int, n: int, *, partial: bool = False) -> bytes | None:
        """The `n` bytes at `pos`; when the file ends before them, None (or with `partial`, what there is)."""
        while self.end < pos + n:
            if not self._more(pos + n - self.end):
                if not partial:
                    return None
                break
        i = pos - self._base
        return bytes(self._buf[i:i + n])

    def find(self, needle: bytes, pos: int) -> int | None:
        """The offset of the first `needle` at or after `pos`, or None; releases what it searched past."""
        while True:
            i = self._buf.find(needle, max(0, pos - self._base))
            if i >= 0:
                return self._base + i
            pos = max(pos, self.end - len(needle) + 1)
            self.release(pos)
            if not self._more():
                return None


def _payload_size_at(win: Window, pos: int) -> tuple[bytes, int] | None:
    """The header at `pos` and its payload's size, if a valid record header starts there."""
    head = win.get(pos, HEADER_SIZE)
    if head is None or head[0] != _BIN32 or head[_MAGIC_AT:_MAGIC_AT + 4] != MAGIC:
        return None
    _, body, _, _, _, head_crc = _HEAD.unpack(head)
    size = body - _BODY_EXTRA
    if zlib.crc32(head[:HEADER_SIZE - 4]) != head_crc or not 0 <= size <= MAX_FRAME_BYTES:
        return None
    return head, size


def _record_at(win: Window, pos: int) -> Item | None:
    found = _payload_size_at(win, pos)
    if found is None:
        return None
    head, size = found
    _, _, _, first_seq, payload_crc, _ = _HEAD.unpack(head)
    payload = win.get(pos + HEADER_SIZE, size)
    if payload is None or zlib.crc32(payload) != payload_crc:
        return None
    return Item(ItemKind.RECORD, pos, pos + HEADER_SIZE + size, first_seq, payload)


def _next_record(win: Window, pos: int, *, header_only: bool = False) -> int | None:
    """Where the first valid record (or with `header_only`, record header) at or after `pos` starts."""
    check = _payload_size_at if header_only else _record_at
    while True:
        at = win.find(MAGIC, pos + _MAGIC_AT)
        if at is None:
            return None
        if check(win, at - _MAGIC_AT) is not None:
            return at - _MAGIC_AT
        pos = at - _MAGIC_AT + 1


def _is_map_header(byte: int) -> bool:
    return 0x80 <= byte <= 0x8F or byte in (0xDE, 0xDF)


def legacy_end(fh: BinaryIO) -> int:
    """Where the bare frames of a log begun before records end: at its first record header, or at its end.

    0 for a log that does not start like a bare frame (a map header): a log of records, even one whose
    first record is damaged. A header is enough to end the bare part — its own checksum makes a false
    one improbable — so a first record with a damaged payload is skipped as a record, not read as frames.
    """
    fh.seek(0)
    first = fh.read(1)
    if not first or not _is_map_header(first[0]):
        return 0
    found = _next_record(Window(fh, 0), 0, header_only=True)
    return found if found is not None else os.fstat(fh.fileno()).st_size


def _is_frame(obj: Any) -> bool:
    events = obj.get("events") if isinstance(obj, dict) else None
    return (isinstance(events, list) and bool(events)
            and all(type(e) is list and e and type(e[0]) is int for e in events))


def _bare_frames(win: Window, pos: int, limit: int) -> Iterator[Item]:
    """The bare frames from `pos` on, one after another, until one fails to decode or `limit` is reached."""
    unpacker = msgpack.Unpacker(raw=False, max_buffer_size=MAX_FRAME_BYTES + 2 * _CHUNK)
    fed = start = pos
    while True:
        try:
            obj = unpacker.unpack()
        except msgpack.OutOfData:
            # A bare frame is never larger than the frame cap: past it, this is not one.
            if fed >= limit or fed - start > MAX_FRAME_BYTES:
                return
            # Small reads until a frame decodes: a false start after damage should cost little.
            want = _CHUNK if start > pos else max(4096, fed - start)
            chunk = win.get(fed, min(want, limit - fed), partial=True)
            if not chunk:
                return
            try:
                unpacker.feed(chunk)
            except msgpack.BufferFull:
                return
            fed += len(chunk)
            continue
        except Exception:  # garbage: no frame starts here
            return
        if not _is_frame(obj):
            return
        end = pos + unpacker.tell()
        yield Item(ItemKind.LEGACY, start, end, obj["events"][0][0], obj)
        start = end


_EVENTS_KEY = msgpack.packb("events")
_UINT_HEADERS = (0xCC, 0xCD, 0xCE, 0xCF)


def _frame_follows(win: Window, pos: int) -> bool:
    """Whether the bytes at `pos` (after a frame's task id) go on as a frame's events do: the key, an array
    header, a 6-item event and its integer seq. Cheap, and it spares decoding garbage that merely holds
    the task id (decoding nested junk until msgpack gives up costs far more)."""
    head = win.get(pos, len(_EVENTS_KEY) + 7, partial=True) or b""
    i = len(_EVENTS_KEY)
    if len(head) < i + 3 or not head.startswith(_EVENTS_KEY):
        return False
    size = head[i]
    i += 1 if 0x91 <= size <= 0x9F else 3 if size == 0xDC else 5 if size == 0xDD else len(head)
    return i + 1 < len(head) and head[i] == 0x96 and (head[i + 1] <= 0x7F or head[i + 1] in _UINT_HEADERS)


def _next_bare_frame(win: Window, pos: int, limit: int, needle: bytes) -> int | None:
    """Where the first bare frame of the task after `pos` starts (found by its task id), if one does."""
    while True:
        at = win.find(needle, pos + 1)
        if at is None or at >= limit:
            return None
        start = at - 1  # the frame's map header comes just before its first key
        head = win.get(start, 1)
        if (head is not None and 0x80 <= head[0] <= 0x8F and _frame_follows(win, at + len(needle))
                and next(_bare_frames(win, start, limit), None)):
            return start
        pos = at


def _legacy(win: Window, pos: int, limit: int, needle: bytes) -> Iterator[Item]:
    while pos < limit:
        for frame in _bare_frames(win, pos, limit):
            yield frame
            win.release(frame.end)
            pos = frame.end
        if pos >= limit:
            return
        resume = _next_bare_frame(win, pos, limit, needle)
        end = resume if resume is not None else min(limit, win.end) if win.at_eof else limit
        yield Item(ItemKind.DAMAGE, pos, end, 0, None)
        if resume is None:
            return
        pos = resume


def walk(win: Window, start: int, legacy_end: int, needle: bytes) -> Iterator[Item]:
    """Every item from `start` to the end of the file: bare frames before `legacy_end` (where the first
    record starts), records after it, and the damage between them."""
    pos = start
    if pos < legacy_end:
        for item in _legacy(win, pos, legacy_end, needle):
            yield item
            pos = item.end
        if pos < legacy_end:  # the bare part ends in damage up to the end of the file
            return
    while True:
        record = _record_at(win, pos)
        if record is None:
            if win.get(pos, 1) is None:
                return
            resume = _next_record(win, pos + 1)
            yield Item(ItemKind.DAMAGE, pos, resume if resume is not None else win.end, 0, None)
            if resume is None:
                return
            record = _record_at(win, resume)
            assert record is not None
        yield record
        win.release(record.end)
        pos = record.end
