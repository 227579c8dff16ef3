"""Each declaration rule has a fixture that fires it; a rule nothing can trigger protects nothing."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from yagent.workers.tools import (
    PROFILES,
    AuthPolicy,
    Effect,
    Frequency,
    Profile,
    Registry,
    Rule,
    ToolDeclarationError,
    ToolSpec,
    build_surface,
    check_extra_specs,
    seal,
    validate,
)
from yagent.workers.tools.cognitive import thinking


def _spec(**overrides: Any) -> ToolSpec:
    base: dict[str, Any] = dict(
        name="probe",
        description="A probe tool.",
        parameters={
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "A path."},
                "flag": {"type": "boolean", "description": "A flag."},
            },
            "required": ["path"],
        },
        effects=Effect.FS_READ,
        executor=thinking,
        auth=AuthPolicy.NEVER,
    )
    base.update(overrides)
    return ToolSpec(**base)


def _sync_executor(_inv: object) -> None:
    return None


def _registry(*specs: ToolSpec) -> Registry:
    return Registry(specs)


_WRITE = dict(effects=Effect.FS_WRITE, mutates=True, serial=True, path_params=("path",))

# Rule -> (registry to validate, profiles to validate with).
FIXTURES: Mapping[Rule, Callable[[], tuple[Registry, Mapping[str, Profile]]]] = {
    Rule.NAME_INVALID: lambda: (_registry(_spec(name="read file!")), PROFILES),
    Rule.DUPLICATE_NAME: lambda: (_registry(_spec(), _spec()), PROFILES),
    Rule.DESCRIPTION_MISSING: lambda: (_registry(_spec(description="  ")), PROFILES),
    Rule.SCHEMA_NOT_OBJECT: lambda: (_registry(_spec(parameters={"type": "string"})), PROFILES),
    Rule.PROPERTY_INVALID: lambda: (
        _registry(_spec(parameters={"type": "object", "properties": {"path": {"type": "string"}}})),
        PROFILES,
    ),
    Rule.REQUIRED_UNKNOWN: lambda: (
        _registry(_spec(parameters={"type": "object", "properties": {}, "required": ["ghost"]})),
        PROFILES,
    ),
    Rule.PATH_PARAM_UNKNOWN: lambda: (_registry(_spec(path_params=("target",))), PROFILES),
    Rule.COMMAND_PARAM_UNKNOWN: lambda: (
        _registry(_spec(**{**_WRITE, "effects": Effect.SHELL}, auth=AuthPolicy.DANGEROUS,
                        command_params=("flag",))),
        PROFILES,
    ),
    Rule.DANGER_FLAG_INVALID: lambda: (
        _registry(_spec(**_WRITE, auth=AuthPolicy.OUTSIDE, danger_flag="flag")),
        PROFILES,
    ),
    Rule.EFFECTS_EMPTY: lambda: (_registry(_spec(effects=Effect.NONE)), PROFILES),
    Rule.WRITE_EFFECT_NOT_MUTATING: lambda: (_registry(_spec(effects=Effect.FS_WRITE)), PROFILES),
    Rule.AUTH_UNDECIDED: lambda: (_registry(_spec(**_WRITE, auth=None)), PROFILES),
    Rule.READ_ONLY_NEEDS_AUTH: lambda: (_registry(_spec(auth=AuthPolicy.OUTSIDE, path_params=("path",))), PROFILES),
    Rule.AUTH_NOTHING_TO_CHECK: lambda: (
        _registry(_spec(**{**_WRITE, "path_params": ()}, auth=AuthPolicy.OUTSIDE)),
        PROFILES,
    ),
    Rule.COLD_UNSKIPPABLE: lambda: (
        _registry(_spec(effects=Effect.INTERACT, serial=True, frequency=Frequency.COLD)),
        PROFILES,
    ),
    Rule.DELEGATION_INCOMPLETE: lambda: (_registry(_spec(effects=Effect.DELEGATE)), PROFILES),
    Rule.AUDIENCE_WITHOUT_DELEGATION: lambda: (_registry(_spec(audience=frozenset({"director"}))), PROFILES),
    Rule.AUDIENCE_UNKNOWN_AGENT: lambda: (
        _registry(_spec(effects=Effect.DELEGATE, audience=frozenset({"nobody"}), delegate_target="chat")),
        PROFILES,
    ),
    Rule.DELEGATE_TARGET_UNKNOWN: lambda: (
        _registry(_spec(effects=Effect.DELEGATE, audience=frozenset({"director"}), delegate_target="ghost")),
        PROFILES,
    ),
    Rule.READ_ONLY_DELEGATION_TO_WRITER: lambda: (
        _registry(_spec(effects=Effect.DELEGATE, audience=frozenset({"director"}), delegate_target="coding")),
        PROFILES,
    ),
    Rule.EXECUTOR_NOT_ASYNC: lambda: (_registry(_spec(executor=_sync_executor)), PROFILES),
    Rule.EXTERNAL_IN_STATIC: lambda: (_registry(_spec(effects=Effect.EXTERNAL)), PROFILES),
    Rule.PROFILE_GRANT_DENY_OVERLAP: lambda: (
        _registry(_spec()),
        {**PROFILES, "odd": Profile("odd", grant=Effect.FS_READ, deny=Effect.FS_READ)},
    ),
}


def test_every_rule_has_a_fixture() -> None:
    assert set(FIXTURES) == set(Rule)


def test_the_base_fixture_spec_is_valid() -> None:
    # Otherwise every fixture below would "fire" for the wrong reason.
    assert validate(_registry(_spec())) == []


@pytest.mark.parametrize("rule", list(Rule), ids=lambda r: r.value)
def test_validate_reports_each_rule(rule: Rule) -> None:
    registry, profiles = FIXTURES[rule]()
    fired = {p.rule for p in validate(registry, profiles)}
    assert rule in fired, f"{rule.value} did not fire; got {sorted(r.value for r in fired)}"


def test_validate_reports_every_violation_at_once() -> None:
    bad = _spec(name="bad name", description="", effects=Effect.FS_WRITE)
    fired = {p.rule for p in validate(_registry(bad, bad))}
    assert {Rule.NAME_INVALID, Rule.DESCRIPTION_MISSING, Rule.WRITE_EFFECT_NOT_MUTATING,
            Rule.DUPLICATE_NAME} <= fired


def test_seal_refuses_an_invalid_registry_and_names_the_rule() -> None:
    registry = _registry(_spec(effects=Effect.NONE))
    with pytest.raises(ToolDeclarationError, match="effects-empty"):
        seal(registry)
    assert not registry.frozen


def test_extra_specs_may_not_shadow_static_tools() -> None:
    shadow = _spec(name="read_file")
    assert [p.rule for p in check_extra_specs([shadow], ["read_file"])] == [Rule.DUPLICATE_NAME]
    with pytest.raises(ToolDeclarationError, match="shadow"):
        build_surface("coding", extra_specs=[shadow])


def test_invalid_extra_spec_is_refused_by_the_surface() -> None:
    broken = dataclasses.replace(_spec(name="mcp__x__y"), parameters={"type": "array"})
    with pytest.raises(ToolDeclarationError, match="schema-not-object"):
        build_surface("coding").join([broken])
