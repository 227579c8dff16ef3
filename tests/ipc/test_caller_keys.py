"""Keys from the caller and the zero-config provider, as pure rules: what a client sends, what the daemon takes
(and refuses — a forged submit cannot inject arbitrary variables), which key a run gets, which provider and model
an environment picks."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from yagent.ipc.caller_keys import (
    MAX_VALUE_BYTES,
    MAX_VARIABLES,
    CallerKeysError,
    accepted,
    collect,
    variables_to_send,
    with_caller_keys,
)
from yagent.ipc.provider_config import parse_llm_config
from yagent.ipc.zero_config import (
    DEFAULT_MODELS,
    LOCAL_KEY_PLACEHOLDER,
    ZERO_CONFIG_VARIABLES,
    ZeroConfigError,
    offered_families,
    zero_config,
)

REPO = Path(__file__).resolve().parents[2]
TABLE = {"global": {"llm": {"use_provider": "a", "providers": {
    "a": {"api_base_url": "http://x/v1", "api_key_env": "A_KEY", "model": "m"},
    "b": {"api_base_url": "http://x/v1", "api_key_env": "B_KEY", "model": "m"},
    "c": {"api_base_url": "http://x/v1", "api_key": "literal", "model": "m"},
    "odd": {"api_key_env": "not a name"},
}}}}


def test_a_client_sends_the_named_variables_and_the_zero_config_ones_set_in_its_shell() -> None:
    names = variables_to_send(TABLE)
    assert names == ("A_KEY", "B_KEY", *ZERO_CONFIG_VARIABLES)
    assert collect(names, {"A_KEY": "sk-a", "B_KEY": "", "HOME": "/root", "OPENAI_BASE_URL": "http://l/v1"}) == {
        "A_KEY": "sk-a", "OPENAI_BASE_URL": "http://l/v1"}
    assert variables_to_send({"global": {"llm": {"providers": "broken"}}}) == ZERO_CONFIG_VARIABLES


@pytest.mark.parametrize(("sent", "said"), [
    ({"LD_PRELOAD": "/tmp/evil.so"}, "env names LD_PRELOAD, which is neither an api_key_env of the configuration"),
    ({"PATH": "/tmp"}, "env names PATH, which is neither"),
    ({"A_KEY\x00": "x"}, "env names 'A_KEY\\x00', which is neither"),
    ({7: "x"}, "env names 7, which is neither"),
    ({"A_KEY": 5}, "the value of A_KEY must be text"),
    ({"A_KEY": "k" * (MAX_VALUE_BYTES + 1)}, "the value of A_KEY is longer than 16 KiB"),
    ({"A_KEY": "sk-\x00secret"}, "the value of A_KEY holds a control character"),
    ({"A_KEY": "sk-secret\r\nX-Evil: 1"}, "the value of A_KEY holds a control character"),
    ({f"V{i}": "x" for i in range(MAX_VARIABLES + 1)}, f"at most {MAX_VARIABLES}"),
    (["A_KEY"], "env must be a map"),
])
def test_the_daemon_takes_only_named_variables_with_sane_values_and_never_echoes_a_value(sent, said: str) -> None:
    with pytest.raises(CallerKeysError) as caught:
        accepted(sent, variables_to_send(TABLE))
    assert said in str(caught.value)
    assert "secret" not in str(caught.value) and "evil" not in str(caught.value)


def test_what_is_accepted_is_kept_as_sent_and_empty_values_are_dropped() -> None:
    assert accepted({"A_KEY": "sk-a", "OPENAI_API_KEY": "", "YAGENT_MODEL": "m"}, variables_to_send(TABLE)) == {
        "A_KEY": "sk-a", "YAGENT_MODEL": "m"}


def test_a_run_takes_the_callers_key_first_then_the_daemons_and_names_both_places_when_neither_has_it() -> None:
    usable = {k: v for k, v in TABLE["global"]["llm"]["providers"].items() if k != "odd"}
    config = parse_llm_config({"global": {"llm": {"use_provider": "a", "providers": usable}}}, {"A_KEY": "daemon-a"})
    turn = with_caller_keys(config, {"A_KEY": "caller-a"}, {"A_KEY": "daemon-a", "B_KEY": "daemon-b"})
    assert (turn.providers["a"].api_key, turn.providers["b"].api_key, turn.providers["c"].api_key) == (
        "caller-a", "daemon-b", "literal")
    nowhere = with_caller_keys(config, {}, {}).providers["b"]
    assert nowhere.missing_key_env == "B_KEY" and "caller-a" not in repr(turn)
    with pytest.raises(ValueError, match="B_KEY is set neither in the environment of the `yagent` command that sent "
                                         "this turn nor in yagentd's own"):
        nowhere.require_key()
    assert config.providers["a"].api_key == "daemon-a"  # the shared settings are never changed by a turn


@pytest.mark.parametrize(("env", "family", "url", "model", "key"), [
    ({"OPENAI_API_KEY": "sk-o"}, "openai", "https://api.openai.com/v1", DEFAULT_MODELS["openai"], "OPENAI_API_KEY"),
    ({"OPENAI_BASE_URL": "http://127.0.0.1:8080/v1/"}, "openai", "http://127.0.0.1:8080/v1", "", ""),
    ({"OPENAI_BASE_URL": "http://l/v1", "YAGENT_MODEL": "qwen3"}, "openai", "http://l/v1", "qwen3", ""),
    ({"ANTHROPIC_API_KEY": "sk-a"}, "anthropic", "https://api.anthropic.com", DEFAULT_MODELS["anthropic"],
     "ANTHROPIC_API_KEY"),
    ({"ANTHROPIC_API_KEY": "sk-a", "ANTHROPIC_BASE_URL": "https://proxy/x"}, "anthropic", "https://proxy/x", "",
     "ANTHROPIC_API_KEY"),
    ({"OPENAI_API_KEY": "sk-o", "ANTHROPIC_API_KEY": "sk-a"}, "openai", "https://api.openai.com/v1",
     DEFAULT_MODELS["openai"], "OPENAI_API_KEY"),
    ({"OPENAI_API_KEY": "sk-o", "ANTHROPIC_API_KEY": "sk-a", "YAGENT_PROVIDER": "Anthropic"}, "anthropic",
     "https://api.anthropic.com", DEFAULT_MODELS["anthropic"], "ANTHROPIC_API_KEY"),
])
def test_the_environment_picks_a_provider_and_its_model(env, family: str, url: str, model: str, key: str) -> None:
    picked = zero_config(env)
    assert picked is not None
    p = picked.provider
    assert (picked.family, p.api_base_url, p.model, p.api_key_env, p.api_format) == (family, url, model, key, family)
    assert p.api_key == ("" if key else LOCAL_KEY_PLACEHOLDER)  # a key-less local server gets the placeholder


@pytest.mark.parametrize(("env", "said"), [
    ({"OPENAI_API_KEY": "k", "YAGENT_PROVIDER": "gemini"}, "YAGENT_PROVIDER = 'gemini' is not a provider"),
    ({"OPENAI_API_KEY": "k", "YAGENT_PROVIDER": "anthropic"}, "YAGENT_PROVIDER = anthropic but ANTHROPIC_API_KEY is "
                                                              "not set"),
    ({"OPENAI_BASE_URL": "localhost:11434"}, "OPENAI_BASE_URL = 'localhost:11434' is not an http(s) URL"),
])
def test_a_zero_config_variable_that_cannot_be_used_says_which(env, said: str) -> None:
    with pytest.raises(ZeroConfigError, match=re.escape(said)):
        zero_config(env)


def test_nothing_offered_is_none_and_an_anthropic_url_alone_offers_nothing() -> None:
    assert zero_config({}) is None and zero_config({"ANTHROPIC_BASE_URL": "http://x"}) is None
    assert offered_families({"OPENAI_API_KEY": " ", "ANTHROPIC_BASE_URL": "http://x"}) == []


def test_what_was_picked_is_said_in_one_line_naming_whose_environment() -> None:
    caller = zero_config({"OPENAI_BASE_URL": "http://l/v1"}, frozenset({"OPENAI_BASE_URL"}))
    assert caller is not None
    line = caller.with_model("llama3").describe()
    assert line == ("no provider is configured, so yagent uses the OpenAI-compatible endpoint http://l/v1 "
                    "(OPENAI_BASE_URL, no key; from your environment) with model llama3 (the first chat model the "
                    "server lists; YAGENT_MODEL picks another); `yagent setup` makes a provider permanent")
    daemon = zero_config({"ANTHROPIC_API_KEY": "sk-secret"})
    assert daemon is not None and "yagentd's environment" in daemon.describe() and "sk-secret" not in daemon.describe()


def test_the_default_models_are_in_the_model_catalog() -> None:
    catalog = json.loads((REPO / "workers" / "llm" / "model_catalog.json").read_text())
    for family, model in DEFAULT_MODELS.items():
        assert catalog["models"][model]["family"] == family


def test_a_turn_with_no_provider_configured_runs_on_the_zero_config_one_with_the_callers_key() -> None:
    picked = zero_config({"OPENAI_API_KEY": "sk-caller"})
    turn = with_caller_keys(parse_llm_config({}, {}), {"OPENAI_API_KEY": "sk-caller"}, {}, picked)
    assert turn.use_provider == "openai" and turn.providers["openai"].api_key == "sk-caller"
    only_c = {"c": TABLE["global"]["llm"]["providers"]["c"]}
    configured = parse_llm_config({"global": {"llm": {"providers": only_c}}}, {})
    assert list(with_caller_keys(configured, {}, {}, picked).providers) == ["c"]  # a configured provider wins
