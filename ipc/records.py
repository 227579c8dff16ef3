"""Typed records that cross process boundaries, and their msgpack codec.

A record is a slotted dataclass declared once (in `messages.py`); its annotations are turned into a
field table at class creation, used both to build the wire map and to validate what arrives. Nothing
outside this package builds message dicts by hand.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Callable
from typing import Any, ClassVar, Union

import msgpack

from .errors import MalformedMessage, MessageTooLarge

__all__ = ["MAX_FRAME_BYTES", "Message", "Record", "cut_to_frame", "decode", "decode_keeping", "encode", "encode_with",
           "message", "message_kinds"]

# Large enough for a replay page of events or a big tool result; small enough that one peer cannot
# make the daemon allocate without bound.
MAX_FRAME_BYTES = 8 * 1024 * 1024

Checker = Callable[[Any], Any]


def _fail(expected: str, value: Any) -> typing.NoReturn:
    raise MalformedMessage(f"expected {expected}, got {type(value).__name__}")


def _checker_for(tp: Any) -> Checker:
    """Build a function that validates (and, for nested records, converts) one field value."""
    origin = typing.get_origin(tp)
    if tp is Any:
        return lambda v: v
    if origin in (Union, types.UnionType):
        args = typing.get_args(tp)
        optional = type(None) in args
        rest = [a for a in args if a is not type(None)]
        if len(rest) != 1:
            raise TypeError(f"unsupported union {tp}")
        inner = _checker_for(rest[0])
        if optional:
            return lambda v: None if v is None else inner(v)
        return inner
    if tp is bool:
        return lambda v: v if isinstance(v, bool) else _fail("bool", v)
    if tp is int:
        return lambda v: v if isinstance(v, int) and not isinstance(v, bool) else _fail("int", v)
    if tp is float:

        def check_float(v: Any) -> float:
            if isinstance(v, bool) or not isinstance(v, int | float):
                _fail("float", v)
            return float(v)

        return check_float
    if tp is str:
        return lambda v: v if isinstance(v, str) else _fail("str", v)
    if isinstance(tp, type) and issubclass(tp, enum.StrEnum):
        members = {m.value: m for m in tp}
        names = "|".join(members)

        def check_member(v: Any) -> enum.StrEnum:
            member = members.get(v) if isinstance(v, str) else None
            if member is None:
                raise MalformedMessage(f"expected one of {names}, got {v!r}"[:300])
            return member

        return check_member
    if tp is bytes:
        return lambda v: v if isinstance(v, bytes) else _fail("bytes", v)
    if origin is dict and _record_values(tp):
        rec = typing.get_args(tp)[1]
        return lambda v: ({k: rec.from_wire(x) for k, x in v.items()} if isinstance(v, dict)
                          and all(isinstance(k, str) for k in v) else _fail("map of str to records", v))
    if tp is dict or origin is dict:
        return lambda v: v if isinstance(v, dict) else _fail("map", v)
    if tp is list or origin is list:
        args = typing.get_args(tp)
        if args and isinstance(args[0], type) and issubclass(args[0], Record):
            rec = args[0]
            return lambda v: [rec.from_wire(x) for x in v] if isinstance(v, list) else _fail("list", v)
        if args and args[0] is str:
            return lambda v: (
                v if isinstance(v, list) and all(isinstance(x, str) for x in v) else _fail("list of str", v)
            )
        return lambda v: v if isinstance(v, list) else _fail("list", v)
    if isinstance(tp, type) and issubclass(tp, Record):
        return tp.from_wire
    raise TypeError(f"unsupported field type {tp!r}")


def _record_values(tp: Any) -> bool:
    """`dict[str, SomeRecord]`: a map whose values are records, converted both ways."""
    args = typing.get_args(tp)
    return len(args) == 2 and isinstance(args[1], type) and issubclass(args[1], Record)


def _encoder_for(tp: Any) -> Callable[[Any], Any] | None:
    """Return a converter for fields holding records; None when the value is already wire-ready."""
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        rest = [a for a in typing.get_args(tp) if a is not type(None)]
        inner = _encoder_for(rest[0]) if len(rest) == 1 else None
        return None if inner is None else (lambda v: None if v is None else inner(v))
    if origin is list:
        args = typing.get_args(tp)
        if args and isinstance(args[0], type) and issubclass(args[0], Record):
            return lambda v: [x.to_wire() for x in v]
    if origin is dict and _record_values(tp):
        return lambda v: {k: x.to_wire() for k, x in v.items()}
    if isinstance(tp, type) and issubclass(tp, Record):
        return lambda v: v.to_wire()
    return None


class Record:
    """Base of every typed record. Subclasses are `@dataclass(slots=True, kw_only=True)`."""

    __slots__ = ()
    _fields: ClassVar[tuple[tuple[str, Checker, Callable[[Any], Any] | None, bool], ...]] = ()

    @classmethod
    def _build_field_table(cls) -> None:
        hints = typing.get_type_hints(cls)
        table = []
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            tp = hints[f.name]
            required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            table.append((f.name, _checker_for(tp), _encoder_for(tp), required))
        cls._fields = tuple(table)

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, _check, enc, _req in self._fields:
            value = getattr(self, name)
            out[name] = enc(value) if enc is not None else value
        return out

    @classmethod
    def read(cls, data: Any) -> Any:
        """A lenient reading for data written by another version (an old event log): a field that is
        missing or does not check takes its default. None when a field without a default cannot be read."""
        if not isinstance(data, dict):
            return None
        kwargs: dict[str, Any] = {}
        for name, check, _enc, required in cls._fields:
            try:
                kwargs[name] = check(data[name])
            except (KeyError, MalformedMessage, TypeError):
                if required:
                    return None
        return cls(**kwargs)

    @classmethod
    def from_wire(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            _fail(f"map for {cls.__name__}", data)
        kwargs: dict[str, Any] = {}
        for name, check, _enc, required in cls._fields:
            if name in data:
                try:
                    kwargs[name] = check(data[name])
                except MalformedMessage as exc:
                    raise MalformedMessage(f"{cls.__name__}.{name}: {exc}") from None
            elif required:
                raise MalformedMessage(f"{cls.__name__}: missing field {name!r}")
        return cls(**kwargs)


def record(cls: type) -> type:
    """Finish a record class declaration (dataclass + field table)."""
    cls = dataclasses.dataclass(slots=True, kw_only=True)(cls)
    cls._build_field_table()
    return cls


class Message(Record):
    """A record that travels alone in a frame; `kind` names it on the wire."""

    __slots__ = ()
    kind: ClassVar[str] = ""


_KINDS: dict[str, type[Message]] = {}


def message(kind: str) -> Callable[[type], type]:
    def register(cls: type) -> type:
        if kind in _KINDS:
            raise ValueError(f"message kind {kind!r} declared twice")
        cls.kind = kind  # type: ignore[attr-defined]
        cls = record(cls)
        _KINDS[kind] = cls
        return cls

    return register


def message_kinds() -> dict[str, type[Message]]:
    return dict(_KINDS)


def encode(msg: Message) -> bytes:
    wire = msg.to_wire()
    wire["k"] = msg.kind
    frame = msgpack.packb(wire, use_bin_type=True)
    if len(frame) > MAX_FRAME_BYTES:
        raise MessageTooLarge(
            f"{msg.kind} message is {len(frame)} bytes, over the {MAX_FRAME_BYTES}-byte frame cap; "
            "send it in smaller pieces"
        )
    return frame


def encode_with(msg: Message, field: str, encoded: bytes) -> bytes:
    """`encode(msg)` with `field` given as bytes already encoded (as `decode_keeping` kept them), placed last in
    the map: what a relay forwards without packing it again."""
    wire = msg.to_wire()
    wire["k"] = msg.kind
    if wire.pop(field, _MISSING) is _MISSING or len(wire) >= 15:  # a one-byte map header below
        raise ValueError(f"{msg.kind} has no field {field!r} to fill with encoded bytes")
    rest = msgpack.packb(wire, use_bin_type=True)  # its own one-byte header is replaced by the whole map's
    frame = b"".join((bytes((0x80 | (len(wire) + 1),)), rest[1:], msgpack.packb(field), encoded))
    if len(frame) > MAX_FRAME_BYTES:
        raise MessageTooLarge(
            f"{msg.kind} message is {len(frame)} bytes, over the {MAX_FRAME_BYTES}-byte frame cap; "
            "send it in smaller pieces"
        )
    return frame


_MISSING = object()
# Per field name: (what a frame of a one-field message starts with, {what it ends with: its class}).
_KEPT_LAYOUTS: dict[str, tuple[bytes, dict[bytes, type[Message]]]] = {}


def _layout(field: str) -> tuple[bytes, dict[bytes, type[Message]]]:
    layout = _KEPT_LAYOUTS.get(field)
    if layout is None:
        head = b"\x82" + msgpack.packb(field)
        tails = {msgpack.packb("k") + msgpack.packb(cls.kind): cls for cls in _KINDS.values()
                 if [name for name, *_ in cls._fields] == [field]}
        layout = _KEPT_LAYOUTS[field] = (head, tails)
    return layout


def decode_keeping(frame: bytes, field: str) -> tuple[Message, bytes | None]:
    """`decode(frame)`, and the bytes `field` arrived as when they can be relayed as they are: the frame is
    `encode`'s own layout of a message whose one field is `field` (`{field: value, "k": kind}`), and the value
    decodes strictly (maps with text keys only), so what was decoded is exactly what those bytes say. None
    otherwise (the decoded value must then be encoded anew)."""
    head, tails = _layout(field)
    if frame.startswith(head) and len(frame) <= MAX_FRAME_BYTES:
        for tail, cls in tails.items():
            if frame.endswith(tail) and len(frame) >= len(head) + len(tail):
                kept = frame[len(head):len(frame) - len(tail)]
                try:  # one whole value exactly (no bytes left over, none missing): the frame is that map
                    value = msgpack.unpackb(kept, raw=False, strict_map_key=True)
                except Exception:  # non-text keys inside, or not this layout: the plain decoder reads or refuses it
                    break
                return _message_from({field: value, "k": cls.kind}), kept
    return decode(frame), None


def cut_to_frame(data: Any, keep_chars: int) -> dict[str, Any]:
    """What is kept of packable data too big for one frame: a map's scalar fields, texts cut to `keep_chars`,
    and a `truncated` note saying so."""
    size = len(msgpack.packb(data, use_bin_type=True))
    kept = {k: (v[:keep_chars] + "…" if isinstance(v, str) and len(v) > keep_chars else v)
            for k, v in data.items() if isinstance(k, str) and (isinstance(v, str | int | float | bool) or v is None)
            } if isinstance(data, dict) else {}
    kept["truncated"] = f"data was {size} bytes, over the {MAX_FRAME_BYTES}-byte frame cap; cut"
    return kept


def _text_keys(pairs: list[tuple[Any, Any]]) -> dict[str, Any]:
    return {k if isinstance(k, str) else k.decode("utf-8", "replace") if isinstance(k, bytes) else str(k): v
            for k, v in pairs}


def decode(frame: bytes) -> Message:
    if len(frame) > MAX_FRAME_BYTES:
        raise MessageTooLarge(f"frame of {len(frame)} bytes exceeds the {MAX_FRAME_BYTES}-byte cap")
    try:
        data = msgpack.unpackb(frame, raw=False, strict_map_key=True)
    except ValueError as exc:
        # A map with int (or other) keys, e.g. event data an agent built as {1: ...}: valid msgpack that the
        # fast strict path refuses. Read it with text keys rather than lose the whole frame.
        try:
            data = msgpack.unpackb(frame, raw=False, strict_map_key=False, object_pairs_hook=_text_keys)
        except Exception:
            raise MalformedMessage(f"frame is not valid msgpack: {exc.__class__.__name__}") from None
    except Exception as exc:  # msgpack raises several unrelated types for garbage input
        raise MalformedMessage(f"frame is not valid msgpack: {exc.__class__.__name__}") from None
    if not isinstance(data, dict):
        raise MalformedMessage("frame is not a msgpack map")
    return _message_from(data)


def _message_from(data: dict[str, Any]) -> Message:
    kind = data.get("k")
    cls = _KINDS.get(kind) if isinstance(kind, str) else None
    request_id = data.get("id") if type(data.get("id")) is int else None
    if cls is None:
        raise MalformedMessage(f"unknown message kind {kind!r}", request_id=request_id)
    try:
        return cls.from_wire(data)
    except MalformedMessage as exc:  # the peer may be waiting for this id: say which request failed
        exc.request_id = request_id
        exc.kind = cls.kind
        raise
