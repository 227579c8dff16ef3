"""Declaration rules. `validate` reports every violation at once; each rule has a fixture that fires it
(tests/tools/test_validation.py), because a rule nothing can trigger protects nothing.
"""

from __future__ import annotations

import enum
import inspect
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from .errors import ToolDeclarationError
from .profiles import PROFILES, Profile
from .registry import Registry
from .spec import AuthPolicy, Effect, ToolSpec

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")  # what every provider accepts as a function name
_JSON_TYPES = frozenset({"string", "integer", "number", "boolean", "array", "object"})
CUSTOM_TARGET_PREFIX = "custom:"


class Rule(enum.Enum):
    NAME_INVALID = "name-invalid"
    DUPLICATE_NAME = "duplicate-name"
    DESCRIPTION_MISSING = "description-missing"
    SCHEMA_NOT_OBJECT = "schema-not-object"
    PROPERTY_INVALID = "property-invalid"
    REQUIRED_UNKNOWN = "required-unknown"
    PATH_PARAM_UNKNOWN = "path-param-unknown"
    COMMAND_PARAM_UNKNOWN = "command-param-unknown"
    DANGER_FLAG_INVALID = "danger-flag-invalid"
    EFFECTS_EMPTY = "effects-empty"
    WRITE_EFFECT_NOT_MUTATING = "write-effect-not-mutating"
    AUTH_UNDECIDED = "auth-undecided"
    READ_ONLY_NEEDS_AUTH = "read-only-needs-auth"
    AUTH_NOTHING_TO_CHECK = "auth-nothing-to-check"
    COLD_UNSKIPPABLE = "cold-unskippable"
    DELEGATION_INCOMPLETE = "delegation-incomplete"
    AUDIENCE_WITHOUT_DELEGATION = "audience-without-delegation"
    AUDIENCE_UNKNOWN_AGENT = "audience-unknown-agent"
    DELEGATE_TARGET_UNKNOWN = "delegate-target-unknown"
    READ_ONLY_DELEGATION_TO_WRITER = "read-only-delegation-to-writer"
    EXECUTOR_NOT_ASYNC = "executor-not-async"
    EXTERNAL_IN_STATIC = "external-in-static"
    PROFILE_GRANT_DENY_OVERLAP = "profile-grant-deny-overlap"


Report = Callable[["Rule", str], None]


@dataclass(frozen=True)
class Problem:
    rule: Rule
    subject: str  # tool name or `profile:<agent>`
    message: str

    def __str__(self) -> str:
        return f"[{self.rule.value}] {self.subject}: {self.message}"


def validate(registry: Registry, profiles: Mapping[str, Profile] = PROFILES) -> list[Problem]:
    """Every rule violation in a static registry and the profiles it is served through."""
    specs = registry.specs()
    problems = [p for spec in specs for p in check_spec(spec, profiles)]
    for spec in specs:
        if Effect.EXTERNAL in spec.effects:
            problems.append(Problem(Rule.EXTERNAL_IN_STATIC, spec.name,
                                    "third-party tools are dynamic: join them to a surface as extra specs"))
    for name, count in Counter(s.name for s in specs).items():
        if count > 1:
            problems.append(Problem(Rule.DUPLICATE_NAME, name, f"declared {count} times"))
    for profile in profiles.values():
        if profile.grant & profile.deny:
            problems.append(Problem(Rule.PROFILE_GRANT_DENY_OVERLAP, f"profile:{profile.agent}",
                                    f"both grants and denies {(profile.grant & profile.deny).names()}"))
    return problems


def seal(registry: Registry, profiles: Mapping[str, Profile] = PROFILES) -> None:
    """Validate and freeze; a broken declaration is a start-up error, not a runtime surprise."""
    problems = validate(registry, profiles)
    if problems:
        raise ToolDeclarationError("tool declarations are invalid:\n" + "\n".join(f"  {p}" for p in problems))
    registry.freeze()


def check_extra_specs(
    specs: Iterable[ToolSpec], static_names: Iterable[str], profiles: Mapping[str, Profile] = PROFILES
) -> list[Problem]:
    """Rules for dynamic specs: the per-spec rules plus no shadowing of a static tool."""
    taken = set(static_names)
    problems: list[Problem] = []
    for spec in specs:
        problems.extend(check_spec(spec, profiles))
        if spec.name in taken:
            problems.append(Problem(Rule.DUPLICATE_NAME, spec.name, "a dynamic tool may not shadow a static one"))
    return problems


def check_spec(spec: ToolSpec, profiles: Mapping[str, Profile] = PROFILES) -> list[Problem]:
    """The rules one spec must satisfy on its own."""
    out: list[Problem] = []

    def report(rule: Rule, message: str) -> None:
        out.append(Problem(rule, spec.name or "<unnamed>", message))

    if not _NAME.match(spec.name or ""):
        report(Rule.NAME_INVALID, "names must match ^[A-Za-z][A-Za-z0-9_-]{0,63}$")
    if not (spec.description or "").strip():
        report(Rule.DESCRIPTION_MISSING, "the model reads the description; write one")
    if not inspect.iscoroutinefunction(spec.executor):
        report(Rule.EXECUTOR_NOT_ASYNC, "the executor must be an async function taking an Invocation")
    props = _check_schema(spec, report)
    for param in spec.path_params:
        if _prop_type(props, param) != "string":
            report(Rule.PATH_PARAM_UNKNOWN, f"path parameter {param!r} is not a string property of the schema")
    for param in spec.command_params:
        if _prop_type(props, param) != "string":
            report(Rule.COMMAND_PARAM_UNKNOWN, f"command parameter {param!r} is not a string property")
    if spec.danger_flag is not None and (
        _prop_type(props, spec.danger_flag) != "boolean" or spec.auth is not AuthPolicy.DANGEROUS
    ):
        report(Rule.DANGER_FLAG_INVALID, "danger_flag must name a boolean property of a DANGEROUS-policy tool")
    _check_effects(spec, report)
    _check_delegation(spec, profiles, report)
    return out


def _check_schema(spec: ToolSpec, report: Report) -> Mapping[str, object]:
    schema = spec.parameters
    if not isinstance(schema, Mapping) or schema.get("type") != "object":
        report(Rule.SCHEMA_NOT_OBJECT, "parameters must be a JSON schema with type 'object'")
        return {}
    props = schema.get("properties", {})
    if not isinstance(props, Mapping):
        report(Rule.SCHEMA_NOT_OBJECT, "'properties' must be an object")
        return {}
    for name, prop in props.items():
        if not isinstance(prop, Mapping) or prop.get("type") not in _JSON_TYPES:
            report(Rule.PROPERTY_INVALID, f"property {name!r} needs a JSON type")
        elif not str(prop.get("description", "")).strip():
            report(Rule.PROPERTY_INVALID, f"property {name!r} needs a description the model can read")
    required = schema.get("required", [])
    unknown = [r for r in required if r not in props] if isinstance(required, list) else ["<not a list>"]
    if unknown:
        report(Rule.REQUIRED_UNKNOWN, f"required names {unknown} are not properties")
    return props


def _check_effects(spec: ToolSpec, report: Report) -> None:
    if spec.effects == Effect.NONE:
        report(Rule.EFFECTS_EMPTY, "declare at least one effect; profiles select tools by effect")
    if spec.effects & (Effect.FS_WRITE | Effect.SHELL) and not spec.mutates:
        report(Rule.WRITE_EFFECT_NOT_MUTATING, "a tool that writes files or runs commands must set mutates=True")
    if spec.mutates and spec.auth is None:
        report(Rule.AUTH_UNDECIDED, "a mutating tool must state its AuthPolicy (NEVER is a decision too)")
    if spec.is_read_only and spec.needs_auth:
        report(Rule.READ_ONLY_NEEDS_AUTH, "parallel tools must never prompt the user")
    if spec.auth is AuthPolicy.OUTSIDE and not (spec.path_params or spec.command_params):
        report(Rule.AUTH_NOTHING_TO_CHECK, "an OUTSIDE policy needs path or command parameters to check")
    if spec.is_cold and spec.effects & (Effect.INTERACT | Effect.CONTROL):
        report(Rule.COLD_UNSKIPPABLE, "interactive and control tools must be hot: a run cannot wait to load them")


def _check_delegation(spec: ToolSpec, profiles: Mapping[str, Profile], report: Report) -> None:
    if not spec.is_delegation:
        if spec.audience or spec.delegate_target:
            report(Rule.AUDIENCE_WITHOUT_DELEGATION, "audience and delegate_target belong to delegation tools")
        return
    if not spec.audience or not spec.delegate_target:
        report(Rule.DELEGATION_INCOMPLETE, "a delegation tool declares its audience and its delegate_target")
        return
    unknown = sorted(a for a in spec.audience if a not in profiles)
    if unknown:
        report(Rule.AUDIENCE_UNKNOWN_AGENT, f"audience names agents without a profile: {unknown}")
    target = spec.delegate_target
    if target.startswith(CUSTOM_TARGET_PREFIX):
        target_profile = profiles.get("custom")
    else:
        target_profile = profiles.get(target)
        if target_profile is None:
            report(Rule.DELEGATE_TARGET_UNKNOWN, f"no profile for delegate_target {target!r}")
    if target_profile and spec.is_read_only and target_profile.grant & (Effect.FS_WRITE | Effect.SHELL):
        report(Rule.READ_ONLY_DELEGATION_TO_WRITER,
               f"{target!r} may write or run commands, so delegating to it cannot be read-only")


def _prop_type(props: Mapping[str, object], name: str) -> object:
    prop = props.get(name)
    return prop.get("type") if isinstance(prop, Mapping) else None
