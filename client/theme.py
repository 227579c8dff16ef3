"""Colour tokens of the terminal client, in one place (one dark theme)."""

from __future__ import annotations

import zlib

from prompt_toolkit.styles import Style

__all__ = ["STYLE", "agent_style"]

_AGENT_COLOURS = ("#af87ff", "#5fafff", "#87d787", "#ffaf5f", "#ff87af", "#5fd7d7", "#d7d75f", "#af87d7")
_KNOWN = {"director": 0, "coding": 1, "repo": 2, "chat": 3, "devops": 4, "browser": 5, "meta": 6}


def agent_style(agent: str) -> str:
    """A stable colour class per agent name (the plain name, never a run id)."""
    index = _KNOWN.get(agent)
    if index is None:
        index = zlib.crc32(agent.encode()) % len(_AGENT_COLOURS)
    return f"class:agent.c{index}"


STYLE = Style.from_dict({
    **{f"agent.c{i}": f"{c} bold" for i, c in enumerate(_AGENT_COLOURS)},
    "title": "bg:#262626 #d0d0d0",
    "title.name": "bg:#262626 #af87ff bold",
    "title.hint": "bg:#262626 #808080",
    "title.key": "bg:#262626 #d0d0d0 bold",
    "user": "#ffffff bold",
    "user.prefix": "#af87ff bold",
    "text": "",
    "md.bold": "bold",
    "md.italic": "italic",
    "md.code": "#d7af87",
    "md.heading": "#ffffff bold underline",
    "md.quote": "#8a8a8a italic",
    "md.rule": "#4e4e4e",
    "md.bullet": "#af87ff",
    "dim": "#808080",
    "thinking": "#808080 italic",
    "tool": "#5f87af",
    "tool.ok": "#87d787",
    "tool.err": "#ff5f5f",
    "tool.running": "#d7af5f",
    "delegation": "#5fafaf",
    "notice": "#808080",
    "diff.add": "#87d787",
    "diff.del": "#ff5f5f",
    "diff.hunk": "#5fd7d7",
    "diff.head": "#d0d0d0 bold",
    "error": "#ff5f5f",
    "question": "#ffd75f bold",
    "answer": "#87d787",
    "status": "bg:#1c1c1c #bcbcbc",
    "status.state.running": "bg:#5faf00 #000000 bold",
    "status.state.paused": "bg:#d7af00 #000000 bold",
    "status.state.waiting": "bg:#ff8700 #000000 bold",
    "status.state.done": "bg:#5f87af #000000 bold",
    "status.state.failed": "bg:#d70000 #ffffff bold",
    "status.state.idle": "bg:#585858 #ffffff bold",
    "status.sep": "bg:#1c1c1c #4e4e4e",
    "status.tree": "bg:#1c1c1c #8a8a8a",
    "banner": "bg:#870000 #ffffff bold",
    "message": "#d7af5f",
    "message.error": "#ff5f5f bold",
    "prompt": "#af87ff bold",
    "dialog": "bg:#1c1c1c #d0d0d0",
    "dialog.border": "bg:#1c1c1c #5f5fd7",
    "dialog.title": "bg:#1c1c1c #ffd75f bold",
    "dialog.hint": "bg:#1c1c1c #808080",
    "dialog.option": "bg:#1c1c1c #d0d0d0",
    "dialog.option.selected": "bg:#5f5fd7 #ffffff bold",
    "dialog.detail": "bg:#1c1c1c #8a8a8a",
    "field": "bg:#303030 #ffffff",
    "field.cursor": "bg:#d0d0d0 #000000",
    "field.label": "#bcbcbc",
    "field.label.focused": "#ffd75f bold",
    "plan.done": "#87d787",
    "plan.doing": "#ffd75f bold",
    "plan.todo": "#808080",
    "completion-menu.completion": "bg:#303030 #d0d0d0",
    "completion-menu.completion.current": "bg:#5f5fd7 #ffffff",
    "completion-menu.meta.completion": "bg:#262626 #8a8a8a",
    "completion-menu.meta.completion.current": "bg:#5f5fd7 #ffffff",
})
