"""The tool definitions of a run's model calls (`workers/agents/call_tools.py`): made once per state of the
surface, made anew whenever the surface changes in any way that shows in them, and never the registry's own."""

from __future__ import annotations

import json

from yagent.workers.agents.call_tools import call_tools, call_tools_tokens
from yagent.workers.context.tokens import count_tokens
from yagent.workers.tools import build_surface
from yagent.workers.tools.registry import REGISTRY


def _expected_tokens(surface) -> int:
    return count_tokens(json.dumps(surface.tool_definitions(), separators=(",", ":")))


def test_the_definitions_are_made_once_while_the_surface_stays_as_it_is() -> None:
    surface = build_surface("coding")
    first = call_tools(surface)
    assert call_tools(surface) is first  # the same objects: nothing was copied or encoded again
    assert [d.name for d in first] == surface.loaded_names() == [d["name"] for d in surface.tool_definitions()]
    assert call_tools_tokens(surface) == _expected_tokens(surface)


def test_loading_a_cold_tool_and_annotating_one_show_in_the_next_calls_definitions_and_their_count() -> None:
    surface = build_surface("coding")
    before = call_tools(surface)
    tokens_before = call_tools_tokens(surface)
    cold = surface.deferred()[0].name
    assert cold not in [d.name for d in before]

    surface.materialize([cold])
    loaded = call_tools(surface)
    assert cold in [d.name for d in loaded] and loaded is not before
    assert call_tools_tokens(surface) == _expected_tokens(surface) > tokens_before

    # Same names, another description: a cache keyed by names alone would send the old text.
    surface.annotate(["read_file"], "no file access in this run")
    annotated = {d.name: d for d in call_tools(surface)}["read_file"]
    assert annotated.description.startswith("UNAVAILABLE: no file access in this run")
    assert call_tools_tokens(surface) == _expected_tokens(surface)

    surface.materialize([cold])  # already loaded: nothing changed, nothing is made again
    assert call_tools(surface) is call_tools(surface)


def test_a_request_that_edits_its_definitions_leaves_the_registered_schema_alone() -> None:
    surface = build_surface("coding")
    definition = {d.name: d for d in call_tools(surface)}["read_file"]
    registered = REGISTRY.get("read_file")
    assert registered is not None
    before = json.dumps(registered.parameters, sort_keys=True)
    definition.parameters["properties"]["injected"] = {"type": "string"}  # type: ignore[index]
    definition.parameters["required"].append("injected")  # type: ignore[index]
    definition.parameters["properties"]["path"]["type"] = "integer"  # type: ignore[index]
    assert json.dumps(registered.parameters, sort_keys=True) == before


def test_two_surfaces_keep_their_own_definitions() -> None:
    coding, chat = build_surface("coding"), build_surface("chat")
    assert [d.name for d in call_tools(chat)] == chat.loaded_names() != coding.loaded_names()
    assert [d.name for d in call_tools(coding)] == coding.loaded_names()
