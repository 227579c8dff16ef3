"""Pins the wire spelling of the whole closed vocabulary: every enum value, every message kind and record
with its field names, every daemon-stamped event with the fields of its data. A change to any of them is a
protocol change and must be an explicit update of the golden file.

To accept a deliberate change, review the diff this test prints, then run:

    YAGENT_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/ipc/test_vocabulary_golden.py

The spellings live only in the golden file; this module renders them from `yagent.ipc` and types none.
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
import os
import typing
from pathlib import Path

from yagent.ipc import vocabulary
from yagent.ipc.daemon_events import DAEMON_EVENT_DATA
from yagent.ipc.records import Record, message_kinds

GOLDEN = Path(__file__).parent / "golden" / "vocabulary.golden"
UPDATE_COMMAND = "YAGENT_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/ipc/test_vocabulary_golden.py"


def _fields(cls: type) -> str:
    return ", ".join(f.name for f in dataclasses.fields(cls)) or "(no fields)"


def _nested_records(cls: type, found: dict[str, type]) -> None:
    """Records carried inside `cls` (a TaskList's TaskSummary, its RunSummary…): their keys are wire too."""
    for tp in typing.get_type_hints(cls).values():
        for candidate in (tp, *typing.get_args(tp)):
            if isinstance(candidate, type) and issubclass(candidate, Record) and candidate.__name__ not in found:
                found[candidate.__name__] = candidate
                _nested_records(candidate, found)


def _render_vocabulary() -> list[str]:
    out: list[str] = []
    for name in sorted(vocabulary.__all__):
        value = getattr(vocabulary, name)
        out.append("")
        if isinstance(value, type) and issubclass(value, enum.Enum):
            out.append(f"[enum {name}]")
            out.extend(f"{member.name} = {member.value}" for member in value)
        else:  # a fixed tuple of values (the answers an authorisation prompt takes)
            out.append(f"[values {name}]")
            out.append(", ".join(str(v) for v in value))
    return out


def render_golden() -> str:
    out = [
        "# The wire spelling of yagent's closed vocabulary, rendered from yagent.ipc.",
        "# enums: NAME = value; messages: kind, class and field names (plus the kind key `k`);",
        "# records nested in messages; daemon-stamped events: type, data record and its field names.",
        f"# Update on purpose only: {UPDATE_COMMAND}",
    ]
    out.extend(_render_vocabulary())
    nested: dict[str, type] = {}
    for kind, cls in sorted(message_kinds().items()):
        out += ["", f"[message {kind}] {cls.__name__}", _fields(cls)]
        _nested_records(cls, nested)
    for cls in DAEMON_EVENT_DATA.values():
        _nested_records(cls, nested)
    daemon_data = {cls.__name__ for cls in DAEMON_EVENT_DATA.values()}
    for name in sorted(set(nested) - daemon_data):
        out += ["", f"[record {name}]", _fields(nested[name])]
    for event_type, cls in sorted(DAEMON_EVENT_DATA.items()):
        out += ["", f"[event {event_type.value}] {cls.__name__}", _fields(cls)]
    return "\n".join(out) + "\n"


def test_the_wire_vocabulary_matches_its_golden_file() -> None:
    actual = render_golden()
    if os.environ.get("YAGENT_UPDATE_GOLDEN") == "1":
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(actual, encoding="utf-8")
    expected = GOLDEN.read_text(encoding="utf-8") if GOLDEN.exists() else ""
    if actual != expected:
        diff = "".join(difflib.unified_diff(
            expected.splitlines(keepends=True), actual.splitlines(keepends=True), "golden", "actual"
        ))
        raise AssertionError(
            f"the wire vocabulary differs from {GOLDEN.name} (peers of other versions read these words):\n"
            f"{diff}\nIf the change is intended (and PROTOCOL_VERSION says so where peers would misread it), "
            f"review it and run: {UPDATE_COMMAND}"
        )

