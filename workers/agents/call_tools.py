"""The tool definitions that go with a run's model calls, made once per state of its surface.

Every step sends them, the context gauge counts their tokens and a compaction summary sends them too. Each of those
used to rebuild them from the tool specs (a deep copy of every schema) and the gauge re-encoded their JSON; they
change only when the surface does (a cold tool loaded, MCP tools re-listed), which `Surface.version` tells.
"""

from __future__ import annotations

import json
import weakref
from dataclasses import dataclass

from yagent.workers.context.tokens import count_tokens
from yagent.workers.llm import ToolDefinition
from yagent.workers.tools import Surface

__all__ = ["call_tools", "call_tools_tokens"]


@dataclass(slots=True)
class _Made:
    version: int
    definitions: tuple[ToolDefinition, ...]
    tokens: int = -1  # counted when first asked (the gauge asks once the request is out: off a call's way)


_made: weakref.WeakKeyDictionary[Surface, _Made] = weakref.WeakKeyDictionary()


def _current(surface: Surface) -> _Made:
    made = _made.get(surface)
    if made is None or made.version != surface.version:
        dicts = surface.tool_definitions()  # copies: what a provider request holds never aliases the registry
        made = _Made(surface.version, tuple(ToolDefinition(d["name"], d["description"], d["parameters"])
                                            for d in dicts))
        _made[surface] = made
    return made


def call_tools(surface: Surface) -> tuple[ToolDefinition, ...]:
    """The definitions a model call made now sends (the loaded tools, sorted by name)."""
    return _current(surface).definitions


def call_tools_tokens(surface: Surface) -> int:
    """Tokens the definitions take in a request, by the estimator the context gauge uses."""
    made = _current(surface)
    if made.tokens < 0:  # their JSON as a request holds it
        made.tokens = count_tokens(json.dumps([{"name": d.name, "description": d.description,
                                                "parameters": d.parameters} for d in made.definitions],
                                              separators=(",", ":")))
    return made.tokens
