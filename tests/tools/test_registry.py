"""The static registry: filled at import, sealed, valid, and free of dynamic tools."""

from __future__ import annotations

import pytest

from yagent.workers.tools import (
    REGISTRY,
    AuthPolicy,
    Effect,
    Registry,
    ToolDeclarationError,
    ToolSpec,
    build_surface,
    custom_delegate_spec,
    validate,
)
from yagent.workers.tools.search import search_by_regex

EXPECTED_STATIC_TOOLS = {
    "read_file", "list_dir", "print_dir_tree", "search_by_regex", "create_file", "search_replace_in_file",
    "delete_file", "rename_file", "run_bash", "agent_exit", "ask_user_for_help", "thinking", "deepthinking",
    "design", "micro_agent", "load_tool", "delegate_repo", "delegate_coding", "delegate_chat",
    "delegate_devops", "delegate_meta", "read_note", "list_notes", "read_artifact", "use_skill",
    # answered by the built-in code server (workers/tools/code_intel.py)
    "semantic_search", "query_code_skeleton", "query_code_snippet", "find_function_caller", "find_function_callee",
    "query_call_graph",
    "spawn_agent", "send_followup", "wait_agents", "agent_status", "cancel_agents",
    # carried out by the project's browser (workers/tools/browser_tools.py), and the delegation to its agent
    "delegate_browser", "browser_status", "browser_open", "browser_inspect", "browser_snapshot", "browser_click",
    "browser_fill", "browser_type", "browser_press", "browser_scroll", "browser_select", "browser_tabs", "browser_wait",
    "browser_screenshot", "browser_eval",
    # answered by the daemon's checkpoint process (workers/tools/git_checkpoint.py)
    "git_checkpoint_create", "git_checkpoint_list", "git_checkpoint_rollback",
    # the repository blueprint, for every agent (workers/tools/blueprint_read.py)
    "read_blueprint",
}


def test_production_registry_has_no_problems() -> None:
    assert validate(REGISTRY) == []


def test_registry_holds_exactly_the_declared_tools() -> None:
    # Changing this set is deliberate: a new tool also needs its surface golden updated.
    assert set(REGISTRY.names()) == EXPECTED_STATIC_TOOLS


def test_registry_is_sealed_after_import() -> None:
    spec = REGISTRY.get("read_file")
    assert spec is not None
    with pytest.raises(ToolDeclarationError, match="sealed"):
        REGISTRY.register(spec)


def test_derived_queries_come_from_the_declaration() -> None:
    def spec(**kw: object) -> ToolSpec:
        base = dict(name="t", description="d", parameters={"type": "object", "properties": {}},
                    effects=Effect.FS_READ, executor=search_by_regex)
        return ToolSpec(**{**base, **kw})  # type: ignore[arg-type]

    assert spec().is_read_only and not spec().is_serial and not spec().needs_auth
    assert not spec(serial=True).is_read_only and spec(serial=True).is_serial
    assert not spec(mutates=True).is_read_only
    assert spec(auth=AuthPolicy.OUTSIDE).needs_auth and not spec(auth=AuthPolicy.NEVER).needs_auth


@pytest.mark.parametrize(
    ("name", "read_only", "needs_auth"),
    [
        ("read_file", True, False),
        ("search_by_regex", True, False),
        ("deepthinking", True, False),
        ("create_file", False, True),
        ("run_bash", False, True),
        ("agent_exit", False, False),
        ("load_tool", False, False),
        ("ask_user_for_help", False, False),
        ("delegate_repo", True, False),
        ("delegate_coding", False, False),
    ],
)
def test_production_flags(name: str, read_only: bool, needs_auth: bool) -> None:
    spec = REGISTRY.get(name)
    assert spec is not None
    assert (spec.is_read_only, spec.needs_auth) == (read_only, needs_auth)


def test_static_registry_never_carries_dynamic_tools() -> None:
    before = REGISTRY.names()
    custom = custom_delegate_spec("Release Notes Writer", "Writes release notes from the git log.")
    mcp = ToolSpec(
        name="mcp__docs__lookup", description="Look up docs.", parameters={"type": "object", "properties": {}},
        effects=Effect.EXTERNAL, executor=search_by_regex,
    )
    surface = build_surface("director", extra_specs=[custom, mcp])
    assert {"delegate_release_notes_writer", "mcp__docs__lookup"} <= set(surface.names())
    assert REGISTRY.names() == before
    assert "delegate_release_notes_writer" not in REGISTRY


def test_a_fresh_registry_is_open_until_frozen() -> None:
    reg = Registry()
    spec = REGISTRY.get("thinking")
    assert spec is not None
    reg.register(spec)
    reg.freeze()
    assert reg.frozen and len(reg) == 1
    with pytest.raises(ToolDeclarationError):
        reg.register(spec)
