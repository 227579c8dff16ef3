"""yagent.ipc.provider_config: validation (every rule has a fixture that trips it), env expansion, resolution."""

from __future__ import annotations

from typing import Any

import pytest

from yagent.ipc.caller_keys import with_caller_keys
from yagent.ipc.provider_config import (
    AGENT_NAMES,
    FallbackRef,
    LLMSettings,
    ProviderConfigError,
    parse_llm_config,
    resolve_provider,
    resolve_provider_name,
    validate_provider_table,
    validate_table,
)
from yagent.workers.llm import build_engine


def provider(**extra: Any) -> dict[str, Any]:
    return {"api_base_url": "https://api.example.com/v1", "api_key": "sk-1", "model": "deepseek-chat", **extra}


def config(providers: dict[str, dict[str, Any]], **tables: Any) -> dict[str, Any]:
    use = tables.pop("use", next(iter(providers)) if providers else "")
    return {"global": {"llm": {"use_provider": use, "providers": providers}}, **tables}


def problems_of(raw: dict[str, Any], environ: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(ProviderConfigError) as info:
        parse_llm_config(raw, environ or {})
    return info.value.problems


def test_a_complete_provider_parses_with_every_field() -> None:
    raw = config({"main": provider(api_format="anthropic", context_window=200000, temperature=0.3, max_tokens=28000,
                                   reasoning_effort="high", api_base_url="https://api.anthropic.com/",
                                   fallback_providers=["backup", {"provider": "spare", "weight": 2}]),
                  "backup": provider(), "spare": provider()},
                 llm={"timeout": "2m30s", "max_retries": 2, "enable_fallback": False, "fallback_max_retries": 1},
                 routing={"mode": "fixed", "baselines": {"coding": "high"}})
    parsed = parse_llm_config(raw, {})
    main = parsed.providers["main"]
    assert main.api_base_url == "https://api.anthropic.com"  # trailing slash removed
    assert (main.api_format, main.context_window, main.temperature, main.max_tokens, main.reasoning_effort) == (
        "anthropic", 200000, 0.3, 28000, "high")
    assert main.fallback_providers == [FallbackRef(provider="backup", weight=1),
                                       FallbackRef(provider="spare", weight=2)]
    assert parsed.settings == LLMSettings(timeout=150.0, max_retries=2, enable_fallback=False, fallback_max_retries=1)
    assert parsed.routing.mode == "fixed" and parsed.routing.baselines == {"coding": "high"}


def test_defaults() -> None:
    parsed = parse_llm_config(config({"p": provider()}), {})
    assert parsed.settings == LLMSettings(timeout=600.0, max_retries=5, enable_fallback=True, fallback_max_retries=2)
    assert parsed.routing.mode == "auto"
    assert parsed.providers["p"].api_format == "openai"
    assert parse_llm_config({}, {}).providers == {}  # an empty file is valid: setup has not run yet


def test_the_api_key_never_appears_in_repr() -> None:
    parsed = parse_llm_config(config({"p": provider(api_key="sk-secret-123")}), {})
    assert "sk-secret-123" not in repr(parsed) and parsed.providers["p"].api_key == "sk-secret-123"


def test_api_key_env_is_expanded_once_from_the_given_environment() -> None:
    raw = config({"p": provider(api_key=None, api_key_env="DEEPSEEK_KEY")})
    del raw["global"]["llm"]["providers"]["p"]["api_key"]
    environ = {"DEEPSEEK_KEY": "sk-from-env"}
    parsed = parse_llm_config(raw, environ)
    environ["DEEPSEEK_KEY"] = "changed later"
    assert parsed.providers["p"].api_key == "sk-from-env"


def test_missing_env_variable_of_a_used_provider_is_a_warning_at_load_and_fails_at_use_naming_it() -> None:
    # A client started from another shell, or a daemon whose service lacks the variable, must still load
    # the file: only the request that needs the key fails, and says what to do.
    raw = config({"p": {**provider(), "api_key_env": "BAILIAN_KEY"}})
    del raw["global"]["llm"]["providers"]["p"]["api_key"]
    parsed = parse_llm_config(raw, {})
    (warning,) = parsed.warnings
    assert "BAILIAN_KEY" in warning and "is not set" in warning and "[global.llm.providers.p]" in warning
    with pytest.raises(ProviderConfigError, match=r"BAILIAN_KEY.*is not set.*export it in the shell you run yagent"):
        build_engine(parsed, "coding")
    # At a turn, the caller's variables are looked at first, then yagentd's: the error says both.
    turn = with_caller_keys(parsed, {}, {})
    with pytest.raises(ProviderConfigError, match=r"BAILIAN_KEY is set neither in the environment of the `yagent` "
                                                  r"command that sent this turn nor in yagentd's own"):
        build_engine(turn, "coding")
    assert with_caller_keys(parsed, {}, {"BAILIAN_KEY": "sk-d"}).providers["p"].api_key == "sk-d"
    assert with_caller_keys(parsed, {"BAILIAN_KEY": "sk-c"}, {"BAILIAN_KEY": "sk-d"}).providers["p"].api_key == "sk-c"


def test_missing_env_variable_of_an_unused_provider_fails_only_when_resolved() -> None:
    spare = {k: v for k, v in provider().items() if k != "api_key"} | {"api_key_env": "SPARE_KEY"}
    parsed = parse_llm_config(config({"main": provider(), "spare": spare}), {})
    assert parsed.providers["spare"].missing_key_env == "SPARE_KEY"
    with pytest.raises(ProviderConfigError, match="SPARE_KEY"):
        parsed.providers["spare"].require_key()
    with pytest.raises(ProviderConfigError, match="SPARE_KEY"):  # e.g. the user switches to it at runtime
        build_engine(parsed, "coding", override="spare")
    raw = config({"main": provider(), "spare": spare}, agents={"llm": {"coding": {"use_provider": "spare"}}})
    assert any("SPARE_KEY" in w for w in parse_llm_config(raw, {}).warnings)


@pytest.mark.parametrize(("table", "fragment"), [
    ({"model": "m", "api_key": "k"}, "api_base_url is missing"),
    (provider(api_base_url="api.example.com"), "must start with http"),
    ({"api_base_url": "https://x", "api_key": "k"}, "model is missing"),
    ({"api_base_url": "https://x", "model": "m"}, "has no credentials"),
    (provider(api_key_env="K"), "keep only one of them"),
    ({**{k: v for k, v in provider().items() if k != "api_key"}, "api_key_env": "sk-abc-123"},
     "write the variable's name"),
    (provider(api_format="gemini"), "api_format = 'gemini' is not supported"),
    (provider(max_tokens=-1), "max_tokens must be a whole number"),
    (provider(context_window=True), "context_window must be a whole number"),
    (provider(temperature=3), "temperature must be a number between 0 and 2"),
    (provider(temperature="hot"), "temperature must be a number"),
    (provider(fallback_providers="other"), "fallback_providers must be a list"),
    (provider(fallback_providers=[{"provider": "o", "weight": 0}]), "weight of 'o' must be a whole number >= 1"),
    (provider(fallback_providers=[{"provider": "o", "wieght": 2}]), "unknown key(s) ['wieght']"),
    (provider(fallback_providers=[3]), "must be a provider name"),
    (provider(fallback_providers=["self"]), "lists the provider itself"),
    (provider(modle="gpt-4o"), "unknown key 'modle'; did you mean model?"),
    (provider(model=5), "model must be a string"),
])
def test_each_provider_rule_reports(table: dict[str, Any], fragment: str) -> None:
    problems = validate_provider_table("self", table)
    assert any(fragment in p for p in problems), problems
    assert all(p.startswith("[global.llm.providers.self]") for p in problems)


def test_provider_names_are_restricted() -> None:
    assert any("provider names may use" in p for p in validate_provider_table("my provider", provider()))


def test_a_valid_table_has_no_problems() -> None:
    assert validate_provider_table("ok", provider()) == []


@pytest.mark.parametrize(("raw", "fragment"), [
    (config({"p": provider()}, use="nope"), "provider 'nope' is used but not defined"),
    (config({"p": provider(fallback_providers=["ghost"])}), "provider 'ghost' is used but not defined"),
    (config({"p": provider()}, agents={"llm": {"coding": {"use_provider": "ghost"}}}), "'ghost' is used"),
    (config({"p": provider()}, tools={"llm": {"use_provider": "ghost"}}), "'ghost' is used"),
    (config({"a": provider(), "b": provider()}, use=""), "use_provider is missing and 2 providers"),
    (config({"p": provider()}, llm={"timeout": "soon"}), "[llm] timeout = 'soon' is not a duration"),
    (config({"p": provider()}, llm={"timeout": 0}), "[llm] timeout must be a positive duration"),
    (config({"p": provider()}, llm={"max_retries": -1}), "[llm] max_retries must be a whole number"),
    (config({"p": provider()}, llm={"enable_fallback": "yes"}), "enable_fallback must be true or false"),
    (config({"p": provider()}, routing={"mode": "smart"}), "[routing] mode = 'smart' is not supported"),
    (config({"p": provider()}, routing={"baselines": {"coding": "turbo"}}), "coding = 'turbo' is not a tier"),
    (config({"p": provider()}, agents={"llm": {"coding": "p"}}), "coding must be a table"),
    (config({"p": provider()}, agents={"llm": {"coding": {"use_provider": 3}}}), "use_provider must be"),
    ({"global": {"llm": {"providers": {"p": "x"}}}}, "must be a table [global.llm.providers.p]"),
    ({"global": {"llm": []}}, "[global.llm] must be a table"),
])
def test_each_config_rule_reports(raw: dict[str, Any], fragment: str) -> None:
    problems = problems_of(raw)
    assert any(fragment in p for p in problems), problems


def test_all_problems_are_reported_together_and_it_is_a_value_error() -> None:
    raw = config({"a": {"model": "m"}, "b": provider(temperature=9)}, routing={"mode": "x"})
    with pytest.raises(ValueError) as info:
        validate_table(raw, {})
    assert isinstance(info.value, ProviderConfigError)
    assert len(info.value.problems) >= 4
    assert str(info.value).startswith(f"{len(info.value.problems)} problems")


def test_warnings_for_unknown_names_and_unmappable_effort() -> None:
    raw = config({"p": provider(api_format="anthropic", reasoning_effort="extreme")},
                 agents={"llm": {"codeing": {"use_provider": "p"}}}, routing={"baselines": {"planner": "high"}})
    warnings = parse_llm_config(raw, {}).warnings
    assert any("thinking stays off" in w for w in warnings)
    assert any("[agents.llm.codeing] is not a known name" in w for w in warnings)
    assert any("'planner' is not a known agent" in w for w in warnings)


def test_resolution_order_tool_then_tools_then_agent_then_agents_then_global() -> None:
    names = ["g", "ag", "a", "ts", "t"]
    raw = config({n: provider() for n in names}, use="g",
                 agents={"llm": {"use_provider": "ag", "coding": {"use_provider": "a"}}},
                 tools={"llm": {"use_provider": "ts", "design": {"use_provider": "t"}}})
    parsed = parse_llm_config(raw, {})
    assert resolve_provider_name(parsed, "coding", "design") == "t"
    assert resolve_provider_name(parsed, "coding", "thinking") == "ts"
    assert resolve_provider_name(parsed, "coding") == "a"
    assert resolve_provider_name(parsed, "repo") == "ag"
    assert resolve_provider_name(parsed) == "g"
    assert resolve_provider(parsed, "coding").name == "a"


@pytest.mark.parametrize("agent", AGENT_NAMES)
def test_each_of_the_seven_agents_resolves_its_own_provider_before_the_shared_ones(agent: str) -> None:
    assert len(AGENT_NAMES) == 7
    raw = config({"g": provider(), "ag": provider(), "own": provider()}, use="g",
                 agents={"llm": {"use_provider": "ag", agent: {"use_provider": "own"}}})
    parsed = parse_llm_config(raw, {})
    assert resolve_provider_name(parsed, agent) == "own"
    others = [a for a in AGENT_NAMES if a != agent]
    assert {resolve_provider_name(parsed, a) for a in others} == {"ag"}


def test_resolution_without_use_provider() -> None:
    single = parse_llm_config({"global": {"llm": {"providers": {"only": provider()}}}}, {})
    assert resolve_provider_name(single, "coding") == "only"
    with pytest.raises(ProviderConfigError, match="run `yagent setup`"):
        resolve_provider_name(parse_llm_config({}, {}), "coding")
