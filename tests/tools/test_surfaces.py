"""Surface behaviour on the real profiles: capability rules, yolo, cold tools, extras, parallel admission."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from yagent.workers.tools import (
    PROFILES,
    REGISTRY,
    AuthPolicy,
    Effect,
    Frequency,
    SurfaceError,
    ToolCall,
    ToolResult,
    ToolSpec,
    YoloLevel,
    build_surface,
    custom_delegate_spec,
    invoke_tool,
    palette,
)
from yagent.workers.tools.browser_tools import BROWSER_TOOL_NAMES

from .doubles import ScriptedLLM, make_ctx

DIRECTOR_SURFACE = {
    "delegate_repo", "delegate_coding", "delegate_chat", "delegate_devops", "delegate_meta", "delegate_browser",
    "agent_exit",
    "deepthinking", "ask_user_for_help", "read_file", "list_dir", "print_dir_tree", "search_by_regex",
    "load_tool", "read_note", "list_notes", "read_artifact", "use_skill", "read_blueprint",
    "spawn_agent", "send_followup", "wait_agents", "agent_status", "cancel_agents",
}


async def _noop(_inv: object) -> ToolResult:
    return ToolResult.ok("ok")


def _dynamic(name: str, effects: Effect, **kw: object) -> ToolSpec:
    params = {"type": "object", "properties": {"path": {"type": "string", "description": "p"}}}
    base = dict(name=name, description="dynamic tool", parameters=params, effects=effects, executor=_noop,
                frequency=Frequency.COLD)
    return ToolSpec(**{**base, **kw})  # type: ignore[arg-type]


def test_director_surface_is_derived_from_its_profile() -> None:
    assert set(build_surface("director").names()) == DIRECTOR_SURFACE


def test_director_never_gets_write_or_shell_even_from_dynamic_tools() -> None:
    for spec in build_surface("director").specs():
        assert not spec.effects & (Effect.FS_WRITE | Effect.SHELL), spec.name
    writer = _dynamic("mcp__fs__write", Effect.EXTERNAL | Effect.FS_WRITE, mutates=True, serial=True,
                      auth=AuthPolicy.OUTSIDE, path_params=("path",))
    reader = _dynamic("mcp__fs__read", Effect.EXTERNAL)
    surface = build_surface("director")
    assert surface.join([writer, reader]) == ["mcp__fs__read"]
    assert "mcp__fs__write" not in surface.names()


def test_delegate_browser_is_on_the_directors_and_codings_surfaces_only_and_browser_tools_on_browsers() -> None:
    holders = {agent for agent in PROFILES if "delegate_browser" in build_surface(agent).names()}
    assert holders == {"director", "coding"}
    browser = build_surface("browser")
    assert {n for n in browser.names() if n.startswith("browser_")} == set(BROWSER_TOOL_NAMES)
    assert not any(s.effects & (Effect.FS_READ | Effect.FS_WRITE | Effect.SHELL | Effect.DELEGATE)
                   for s in browser.specs())  # it reads no project file itself: only the blueprint, as every run
    for agent in PROFILES:
        if agent != "browser":
            assert not set(build_surface(agent).names()) & set(BROWSER_TOOL_NAMES), agent


def test_an_unavailable_browser_is_said_in_the_descriptions_the_tools_stay() -> None:
    surface = build_surface("coding")
    surface.annotate(["delegate_browser", "browser_open"], "install chromium")
    (described,) = [d for d in surface.tool_definitions() if d["name"] == "delegate_browser"]
    assert described["description"].startswith("UNAVAILABLE: install chromium. Ask the Browser agent")
    assert "browser_open" not in surface.names()  # annotate never adds a tool


def test_every_agent_kind_but_meta_holds_read_blueprint_and_none_when_the_blueprint_is_off() -> None:
    """Issue 18: `read_blueprint` for every agent — the workflow's engine and role nodes and the Browser included;
    Meta holds no tool at all. Built without BLUEPRINT (`[blueprint] enable = false`) it leaves every surface."""
    holders = {agent for agent in PROFILES if "read_blueprint" in build_surface(agent).names()}
    assert holders == set(PROFILES) - {"meta"}
    for agent in PROFILES:
        assert "read_blueprint" not in build_surface(agent, without=Effect.BLUEPRINT).names(), agent


def test_meta_has_no_tools_and_chat_no_filesystem() -> None:
    assert build_surface("meta").names() == []
    chat = build_surface("chat")
    assert not any(s.effects & (Effect.FS_READ | Effect.FS_WRITE | Effect.SHELL) for s in chat.specs())


def test_full_yolo_removes_ask_user_for_help_everywhere() -> None:
    for agent in PROFILES:
        names = build_surface(agent, yolo=YoloLevel.FULL).names()
        assert "ask_user_for_help" not in names
    assert "ask_user_for_help" in build_surface("coding", yolo=YoloLevel.YOLO).names()


def test_unknown_agent_is_refused() -> None:
    with pytest.raises(SurfaceError, match="known agents"):
        build_surface("browsr")


def test_tool_definitions_are_sorted_and_stable() -> None:
    defs = build_surface("coding").tool_definitions()
    names = [d["name"] for d in defs]
    assert names == sorted(names)
    assert set(defs[0]) == {"name", "description", "parameters"}
    defs[0]["parameters"]["properties"].clear()  # a consumer editing its copy must not edit the registry
    assert build_surface("coding").tool_definitions()[0]["parameters"]["properties"]
    assert build_surface("coding").definitions_digest() == build_surface("coding").definitions_digest()


def test_cold_tools_are_deferred_until_load_tool(project: Path, tmp_path: Path) -> None:
    surface = build_surface("coding")
    names = [d["name"] for d in surface.tool_definitions()]
    assert "design" not in names and "micro_agent" not in names and "load_tool" in names
    catalogue = surface.deferred_catalogue()
    assert "design:" in catalogue and "micro_agent:" in catalogue and "load_tool" in catalogue
    digest = surface.definitions_digest()

    ctx = make_ctx(project, tmp_path)
    loaded = asyncio.run(invoke_tool(surface, ToolCall("c1", "load_tool", {"names": ["design"]}), ctx))
    assert not loaded.is_error and loaded.data == {"loaded": ["design"], "already": [], "unknown": []}
    assert "design" in [d["name"] for d in surface.tool_definitions()]
    assert surface.definitions_digest() != digest
    assert "design:" not in surface.deferred_catalogue() and "micro_agent:" in surface.deferred_catalogue()


def test_calling_an_unloaded_cold_tool_teaches_without_side_effects(project: Path, tmp_path: Path) -> None:
    llm = ScriptedLLM(replies=["a design"])
    ctx = make_ctx(project, tmp_path, llm=llm)
    surface = build_surface("coding")
    result = asyncio.run(invoke_tool(surface, ToolCall("c1", "design", {"goal": "x"}), ctx))
    assert result.is_error and "load_tool" in result.content and "Nothing was executed" in result.content
    assert llm.prompts == []  # the side model was never called
    assert surface.is_parallelizable("design")  # a teaching result has no side effect


def test_load_tool_reports_unknown_names(project: Path, tmp_path: Path) -> None:
    surface = build_surface("coding")
    result = asyncio.run(invoke_tool(surface, ToolCall("c1", "load_tool", {"names": ["nope"]}),
                                     make_ctx(project, tmp_path)))
    assert result.is_error and "nope" in result.content and "design" in result.content


def test_load_tool_with_no_names_says_what_can_be_loaded(project: Path, tmp_path: Path) -> None:
    """An empty list used to come back as an empty, successful result: nothing for the model to act on."""
    surface = build_surface("coding")
    result = asyncio.run(invoke_tool(surface, ToolCall("c1", "load_tool", {"names": []}),
                                     make_ctx(project, tmp_path)))
    assert result.is_error and "design" in result.content and "micro_agent" in result.content
    assert surface.materialized() == frozenset()


def test_load_tool_reports_hot_and_already_loaded_names_as_available(project: Path, tmp_path: Path) -> None:
    surface = build_surface("coding")
    ctx = make_ctx(project, tmp_path)
    asyncio.run(invoke_tool(surface, ToolCall("c1", "load_tool", {"names": ["design"]}), ctx))
    again = asyncio.run(invoke_tool(surface, ToolCall("c2", "load_tool", {"names": ["design", "read_file"]}), ctx))
    assert not again.is_error and again.data == {"loaded": [], "already": ["design", "read_file"], "unknown": []}
    assert "Already available: design, read_file" in again.content


def test_load_tool_only_appears_when_something_is_deferred() -> None:
    # Repo without the code tools (`[codeseek] enabled = false`) has nothing deferred of its own.
    repo = build_surface("repo", without=Effect.CODE_INDEX)
    assert "load_tool" not in repo.names() and repo.deferred_catalogue() == ""
    repo.join([_dynamic("mcp__idx__lookup", Effect.EXTERNAL)])
    assert "load_tool" in repo.names() and "mcp__idx__lookup" in repo.deferred_catalogue()


def test_the_code_tools_leave_a_surface_that_is_built_without_code_index() -> None:
    code_tools = {"semantic_search", "query_code_skeleton", "query_code_snippet", "find_function_caller",
                  "find_function_callee", "query_call_graph"}
    for agent in ("repo", "coding"):
        assert code_tools <= set(build_surface(agent).names())
        assert not code_tools & set(build_surface(agent, without=Effect.CODE_INDEX).names())
    for agent in ("director", "devops", "chat", "custom"):  # the seed gives them to the explorers only
        assert not code_tools & set(build_surface(agent).names())


def test_restore_materialized_brings_back_loaded_tools() -> None:
    first = build_surface("coding")
    first.materialize(["micro_agent"])
    second = build_surface("coding")
    second.restore_materialized(first.materialized())
    assert second.is_loaded("micro_agent") and not second.is_loaded("design")


@pytest.mark.parametrize(
    ("agent", "tool", "parallel"),
    [
        ("repo", "read_file", True),
        ("repo", "search_by_regex", True),
        ("repo", "delegate_devops", False),  # sub-agents run delegations one at a time
        ("coding", "read_file", True),
        ("coding", "create_file", False),
        ("coding", "run_bash", False),
        ("chat", "thinking", True),
        ("director", "delegate_repo", True),  # read-only delegations fan out on the Director
        ("director", "delegate_chat", True),
        ("director", "delegate_coding", False),
        ("director", "ask_user_for_help", False),
        ("director", "agent_exit", False),
        ("director", "no_such_tool", False),
    ],
)
def test_parallel_admission_on_real_profiles(agent: str, tool: str, parallel: bool) -> None:
    assert build_surface(agent).is_parallelizable(tool) is parallel


def test_custom_palette_never_exceeds_the_director() -> None:
    director = build_surface("director")
    offered = palette()
    assert offered and all(s.name in director.names() for s in offered)
    assert not any(s.effects & (Effect.FS_WRITE | Effect.SHELL | Effect.DELEGATE | Effect.EXTERNAL)
                   for s in offered)


def test_the_palette_offered_under_full_yolo_holds_no_interactive_tool() -> None:
    names = {s.name for s in palette()}
    assert "ask_user_for_help" in names
    full = {s.name for s in palette(yolo=YoloLevel.FULL)}
    assert full == names - {"ask_user_for_help"}
    assert {s.name for s in palette(yolo=YoloLevel.YOLO)} == names
    # What the Meta agent is offered can always be built at that level.
    build_surface("custom", yolo=YoloLevel.FULL, pick=sorted(full))


def test_custom_surface_is_the_pick_plus_control_tools() -> None:
    surface = build_surface("custom", pick=["read_file", "search_by_regex"])
    assert surface.names() == ["agent_exit", "read_file", "search_by_regex"]
    with pytest.raises(SurfaceError, match="not in the custom palette"):
        build_surface("custom", pick=["run_bash"])
    with pytest.raises(SurfaceError, match="fixed surface"):
        build_surface("coding", pick=["read_file"])


def test_custom_delegate_joins_the_director_only() -> None:
    spec = custom_delegate_spec("Release Notes Writer", "Writes release notes.")
    assert spec.name == "delegate_release_notes_writer"
    assert spec.delegate_target == "custom:release_notes_writer"
    director = build_surface("director", extra_specs=[spec])
    assert director.is_parallelizable(spec.name)  # custom agents are read-only
    assert build_surface("repo").join([spec]) == []


def test_extra_specs_replace_earlier_versions_of_themselves() -> None:
    surface = build_surface("coding")
    surface.join([_dynamic("mcp__a__b", Effect.EXTERNAL, description="first")])
    surface.join([_dynamic("mcp__a__b", Effect.EXTERNAL, description="second")])
    spec = surface.resolve("mcp__a__b")
    assert spec is not None and spec.description == "second"
    assert "mcp__a__b" not in REGISTRY


def test_a_registry_still_being_filled_shows_each_surface_what_it_holds_now_and_a_sealed_one_is_worked_out_once(
        ) -> None:
    from yagent.workers.tools.cognitive import thinking
    from yagent.workers.tools.registry import Registry
    from yagent.workers.tools.surface import _ADMITTED, warm_surfaces

    def probe(name: str) -> ToolSpec:
        return ToolSpec(name=name, description="A probe.", parameters={"type": "object", "properties": {}},
                        effects=Effect.FS_READ, executor=thinking, auth=AuthPolicy.NEVER)

    registry = Registry([probe("first")])
    assert build_surface("repo", registry=registry).names() == ["first"]
    registry.register(probe("second"))  # not sealed yet: nothing was kept from the first surface
    assert build_surface("repo", registry=registry).names() == ["first", "second"]
    assert registry not in _ADMITTED
    registry.freeze()
    warm_surfaces([Effect.CODE_INDEX], registry=registry)
    kept = _ADMITTED[registry]
    assert len(kept) == len(PROFILES) * 2 * 2  # every profile, root and delegated, with each set left out
    surface = build_surface("repo", registry=registry, without=Effect.CODE_INDEX)
    assert surface.names() == ["first", "second"] and len(_ADMITTED[registry]) == len(kept)
    assert build_surface("repo", registry=registry, without=Effect.FS_READ).names() == []  # a new key, worked out
