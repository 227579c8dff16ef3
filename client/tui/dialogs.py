"""Dialogs docked above the status line: questions from agents, and the client's own pickers.

A dialog is plain state with a `key()` method and a `render(width, max_height)` that returns lines
of exactly `width` cells. While one is open, events keep flowing into the task view: the dialog only
owns the keyboard, never the stream.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from yagent.ipc.messages import Question
from yagent.ipc.vocabulary import AUTHORIZE_ANSWERS, QuestionKind

from ..cells import Line, pad_line, text_width, truncate, wrap
from ..line_field import LineField

__all__ = ["AUTHORIZE_CHOICES", "Choice", "Dialog", "Dismiss", "PickerDialog", "QuestionDialog", "render_box"]

_AUTHORIZE_LABELS = {"once": "allow once", "session": "allow for this session",
                     "project": "always allow in this project", "deny": "deny"}
AUTHORIZE_CHOICES = tuple((answer, _AUTHORIZE_LABELS[answer]) for answer in AUTHORIZE_ANSWERS)


@dataclass(frozen=True, slots=True)
class Choice:
    value: Any


@dataclass(frozen=True, slots=True)
class Dismiss:
    """Close for now (a question stays pending and can be reopened)."""


def render_box(title: str, body: Sequence[Line], options: Sequence[Line], hints: Sequence[tuple[str, str]],
               width: int, max_height: int, *, corner: str = "") -> list[Line]:
    """A rounded box `width` cells wide and at most `max_height` lines; options are never cut first."""
    width = max(8, width)
    inner = width - 4
    b = "class:dialog.border"
    top_label = truncate(f" {title} ", max(0, inner - text_width(corner) - 1))
    corner_txt = f" {corner} " if corner and text_width(top_label) + text_width(corner) + 4 <= inner else ""
    fill = width - 3 - text_width(top_label) - text_width(corner_txt)
    top = pad_line([(b, "╭─"), ("class:dialog.title", top_label), (b, "─" * max(0, fill)),
                    ("class:dialog.hint", corner_txt), (b, "╮")], width, b)
    hint_frags: Line = []
    for i, (key, what) in enumerate(hints):
        part: Line = [("class:dialog.hint", " · " if i else " "), ("class:dialog.title", key),
                      ("class:dialog.hint", f" {what}")]
        if sum(text_width(t) for _s, t in [*hint_frags, *part]) + 1 > inner:
            break
        hint_frags += part
    hint_w = sum(text_width(t) for _s, t in hint_frags)
    hint_frags.append(("class:dialog.hint", " ") if hint_frags else ("", ""))
    bottom = pad_line([(b, "╰─"), *hint_frags, (b, "─" * max(0, width - 3 - hint_w - (1 if hint_w else 0))),
                       (b, "╯")], width, b)

    def row(content: Line) -> Line:
        return [(b, "│"), ("class:dialog", " "), *pad_line(content, inner, "class:dialog"), ("class:dialog", " "),
                (b, "│")]

    room = max(1, max_height - 2)
    opts = list(options)
    if len(opts) > room:
        opts = opts[:room]
    body_room = room - len(opts) - (1 if body and opts else 0)
    shown_body = list(body)
    if len(shown_body) > body_room:
        keep = max(0, body_room - 1)
        hidden = len(shown_body) - keep
        shown_body = shown_body[:keep]
        if body_room >= 1:
            shown_body.append([("class:dialog.detail", f"… {hidden} more lines")])
    rows = [*shown_body]
    if shown_body and opts:
        rows.append([])
    rows.extend(opts)
    if max_height < 3:
        return [row(r) for r in rows[:max(1, max_height)]]
    return [top, *(row(r) for r in rows), bottom]


def _body_lines(prompt: str, details: dict[str, Any], inner: int) -> list[Line]:
    lines: list[Line] = [[("class:dialog", t)] for t in wrap(prompt, inner)]
    for key, value in details.items():
        if isinstance(value, list | tuple):
            value = ", ".join(str(v) for v in value)
        if value in ("", None):
            continue
        text = f"{key}: {value}"
        lines.extend([("class:dialog.detail", t)] for t in wrap(text, inner))
    return lines


def _option_lines(labels: Sequence[str], selected: int, inner: int, max_rows: int, numbered: bool) -> list[Line]:
    if not labels:
        return []
    max_rows = max(1, max_rows)
    start = 0
    if len(labels) > max_rows:
        start = min(max(0, selected - max_rows // 2), len(labels) - max_rows)
    out: list[Line] = []
    for i in range(start, min(len(labels), start + max_rows)):
        mark = "▸ " if i == selected else "  "
        number = f"{i + 1}. " if numbered and i < 9 else ("   " if numbered else "")
        style = "class:dialog.option.selected" if i == selected else "class:dialog.option"
        out.append([(style, truncate(f"{mark}{number}{labels[i]}", inner))])
    return out


class Dialog:
    """Base: a title, a body, options or a field, and the keys that drive them."""

    title = ""
    takes_text = False  # True while a text field owns the printable keys

    def hints(self) -> list[tuple[str, str]]:
        return []

    def key(self, key: str, data: str = "") -> Choice | Dismiss | None:
        raise NotImplementedError

    def render(self, width: int, max_height: int) -> list[Line]:
        raise NotImplementedError


class _ListDialog(Dialog):
    def __init__(self, labels: list[str], values: list[Any], selected: int = 0) -> None:
        self.labels = labels
        self.values = values
        self.selected = max(0, min(selected, len(labels) - 1)) if labels else 0

    def _move(self, delta: int) -> None:
        if self.labels:
            self.selected = (self.selected + delta) % len(self.labels)

    def _list_key(self, key: str) -> Choice | Dismiss | None:
        if key in ("up", "left", "s-tab"):
            self._move(-1)
        elif key in ("down", "right", "tab"):
            self._move(1)
        elif key == "enter" and self.values:
            return Choice(self.values[self.selected])
        elif key == "escape":
            return Dismiss()
        elif key.isdigit() and key != "0" and int(key) <= len(self.values):
            self.selected = int(key) - 1
            return Choice(self.values[self.selected])
        return None


class QuestionDialog(_ListDialog):
    """A question a run is waiting on: confirm, select, input or authorize."""

    def __init__(self, question: Question, position: int = 1, total: int = 1) -> None:
        self.question = question
        self.position = position
        self.total = total
        self.sending = False
        self.error = ""
        kind = question.kind
        self.field: LineField | None = None
        if kind == QuestionKind.AUTHORIZE:
            values = [v for v, _l in AUTHORIZE_CHOICES]
            labels = [f"{label}" for _v, label in AUTHORIZE_CHOICES]
        elif kind == QuestionKind.CONFIRM:
            values = list(question.options) or ["yes", "no"]
            labels = list(values)
        elif kind == QuestionKind.SELECT:
            values = list(question.options)
            labels = list(values)
        else:
            values, labels = [], []
            self.field = LineField(question.default or "")
            self.takes_text = True
        default_index = values.index(question.default) if question.default in values else 0
        super().__init__(labels, values, default_index)
        self.title = (f"{question.agent or 'agent'} needs your authorisation" if kind == QuestionKind.AUTHORIZE
                      else f"{question.agent or 'agent'} asks")

    def hints(self) -> list[tuple[str, str]]:
        kind = self.question.kind
        if kind == QuestionKind.AUTHORIZE:
            return [("o", "once"), ("s", "session"), ("p", "project"), ("d", "deny"), ("esc", "later")]
        if kind == QuestionKind.CONFIRM:
            return [("y", self.values[0]), ("n", self.values[1] if len(self.values) > 1 else "no"),
                    ("enter", "choose"), ("esc", "later")]
        if kind == QuestionKind.SELECT:
            return [("↑↓", "move"), ("enter", "choose"), ("1-9", "pick"), ("esc", "later")]
        return [("enter", "send"), ("esc", "later")]

    def key(self, key: str, data: str = "") -> Choice | Dismiss | None:
        if self.sending:
            return Dismiss() if key == "escape" else None
        kind = self.question.kind
        if self.field is not None:
            return self._field_key(key, data)
        if kind == QuestionKind.AUTHORIZE and key in ("o", "s", "p", "d"):
            value = {"o": "once", "s": "session", "p": "project", "d": "deny"}[key]
            self.selected = self.values.index(value)
            return Choice(value)
        if kind == QuestionKind.CONFIRM and key in ("y", "n") and self.values:
            self.selected = 0 if key == "y" or len(self.values) < 2 else 1
            return Choice(self.values[self.selected])
        return self._list_key(key)

    def _field_key(self, key: str, data: str) -> Choice | Dismiss | None:
        f = self.field
        assert f is not None
        if key == "enter":
            return Choice(f.text)
        if key == "escape":
            return Dismiss()
        actions = {"backspace": f.backspace, "delete": f.delete, "left": f.left, "right": f.right,
                   "home": f.home, "end": f.end, "c-u": f.clear}
        if key in actions:
            actions[key]()
        elif key in ("text", "paste"):
            f.insert(data)
        return None

    def render(self, width: int, max_height: int) -> list[Line]:
        inner = max(4, width - 4)
        body = _body_lines(self.question.prompt, dict(self.question.details), inner)
        if self.error:
            body.extend([("class:error", t)] for t in wrap(self.error, inner))
        if self.sending:
            body.append([("class:dialog.detail", "sending your answer…")])
        if self.field is not None:
            opts: list[Line] = [self.field.render(inner, focused=not self.sending)]
        else:
            opts = _option_lines(self.labels, self.selected, inner, max(1, max_height - 2), numbered=True)
        corner = f"{self.position} of {self.total}" if self.total > 1 else ""
        return render_box(self.title, body, opts, self.hints(), width, max_height, corner=corner)


class PickerDialog(_ListDialog):
    """Pick one of several things (an earlier task, a model)."""

    def __init__(self, title: str, prompt: str, items: list[tuple[Any, str]], selected: int = 0) -> None:
        super().__init__([label for _v, label in items], [v for v, _l in items], selected)
        self.title = title
        self.prompt = prompt

    def hints(self) -> list[tuple[str, str]]:
        return [("↑↓", "move"), ("enter", "choose"), ("esc", "close")]

    def key(self, key: str, data: str = "") -> Choice | Dismiss | None:
        return self._list_key(key)

    def render(self, width: int, max_height: int) -> list[Line]:
        inner = max(4, width - 4)
        body = _body_lines(self.prompt, {}, inner) if self.prompt else []
        opts = _option_lines(self.labels, self.selected, inner, max(1, max_height - 2 - min(len(body), 2)),
                             numbered=True)
        return render_box(self.title, body[:2] if len(body) > 2 else body, opts, self.hints(), width, max_height)
