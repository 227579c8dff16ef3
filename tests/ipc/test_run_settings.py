"""Run settings: built by the one config parser, carried by the codec, read by workers as they were set."""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.run_channel_double import RecordingChannel
from yagent.ipc.config import Settings, settings_from_table
from yagent.ipc.messages import RunSpec, StartRun
from yagent.ipc.provider_config import ProviderConfigError, parse_llm_config
from yagent.ipc.records import decode, encode
from yagent.ipc.run_settings import DEFAULT_MAX_STEPS, RunSettings
from yagent.workers.agents.runtime import AgentRun
from yagent.workers.kinds import RunContext
from yagent.workers.tools import ToolBatch, build_surface, normalize_max_parallel

PROVIDERS = """
[global.llm]
use_provider = "main"

[global.llm.providers.main]
api_base_url = "http://127.0.0.1:9/v1"
api_key_env = "MAIN_KEY"
model = "gpt-4o"
fallback_providers = ["spare", { provider = "third", weight = 3 }]

[global.llm.providers.spare]
api_base_url = "http://127.0.0.1:9/v1"
api_key = "sk-spare"
model = "gpt-4o-mini"

[global.llm.providers.third]
api_base_url = "http://127.0.0.1:9/anthropic"
api_key_env = "THIRD_KEY"
api_format = "anthropic"
model = "claude-sonnet-4-5"
reasoning_effort = "medium"
max_tokens = 900
temperature = 0.4
context_window = 200000

[agents.llm.coding]
use_provider = "spare"

[tools.llm.deepthinking]
use_provider = "third"

[llm]
timeout = "5m"
stall_timeout = "45s"
max_retries = 3
enable_fallback = false
fallback_max_retries = 1

[routing]
mode = "fixed"

[routing.baselines]
repo = "fast"
"""


def _as_the_worker_gets_it(settings: RunSettings, tmp_path: Path, agent: str) -> RunContext:
    """The run's context after the start message crossed the codec, as in a worker process."""
    spec = RunSpec(run="r", task="t", turn=1, project="p", project_root=str(tmp_path), agent=agent, input="x",
                   home=str(tmp_path), settings=settings)
    received = decode(encode(StartRun(spec=spec)))
    assert isinstance(received, StartRun)
    return RunContext(received.spec, RecordingChannel())  # type: ignore[arg-type]


def test_run_settings_round_trip_the_codec_and_give_back_what_the_parser_resolved() -> None:
    table = tomllib.loads(PROVIDERS + '[agent]\nlang = "German"\ncoding_max_steps = 7\n')
    environ = {"MAIN_KEY": "sk-main"}  # THIRD_KEY unset: kept, named, failing only when used
    settings = settings_from_table(table, environ=environ).run_settings
    spec = RunSpec(run="r", task="t", turn=1, project="p", project_root="/", agent="coding", input="i", home="/h",
                   settings=settings)
    back = decode(encode(StartRun(spec=spec)))
    assert isinstance(back, StartRun)
    assert back.spec.settings == settings
    assert back.spec.settings.llm == parse_llm_config(table, environ)
    main = back.spec.settings.llm.providers["main"]
    assert main.api_key == "sk-main" and "sk-main" not in repr(back.spec.settings)  # expanded, never shown
    assert decode(encode(StartRun(spec=RunSpec(run="r", task="t", turn=1, project="p", project_root="/", agent="a",
                                               input="i", home="/h")))).spec.settings == RunSettings()


def _engine_key(run: AgentRun) -> str:
    return run._llm_config.providers[run.engine.provider].api_key


# (what config.toml says, the role that runs, what the worker then uses, the value it must see)
REACHES_THE_WORKER: list[tuple[str, str, Callable[[AgentRun], Any], Any]] = [
    ("[agent]\ndirector_max_steps = 3\n", "director", lambda r: r.loop_config([], None).max_steps, 3),
    ("[agent]\ncoding_max_steps = 4\n", "coding", lambda r: r.loop_config([], None).max_steps, 4),
    ("[agent]\nrepo_max_steps = 5\n", "repo", lambda r: r.loop_config([], None).max_steps, 5),
    ("[agent]\nchat_max_steps = 6\n", "chat", lambda r: r.loop_config([], None).max_steps, 6),
    ("[agent]\ndevops_max_steps = 7\n", "devops", lambda r: r.loop_config([], None).max_steps, 7),
    ("[agent]\ncustom_max_steps = 8\n", "custom", lambda r: r.loop_config([], None).max_steps, 8),
    ("[agent]\ncoding_max_steps = 0\n", "coding", lambda r: r.loop_config([], None).max_steps,
     DEFAULT_MAX_STEPS["coding"]),
    ("[llm]\nstep_retries = 0\n", "chat", lambda r: r.loop_config([], None).step_retries, 0),
    ("[llm]\nstep_retries = 5\n", "chat", lambda r: r.loop_config([], None).step_retries, 5),
    ("[agent]\nmax_parallel_readonly_tools = 1\n", "repo",
     lambda r: r.loop_config([], None).max_parallel_readonly, 1),
    ("[agent]\nmax_parallel_readonly_tools = 30\n", "repo",
     lambda r: r.loop_config([], None).max_parallel_readonly, 8),
    ("[agent]\ndelegate_idle_timeout = \"2s\"\n", "coding", lambda r: r.tool_ctx.heartbeat_interval, 0.5),
    ("[agent]\ndelegate_idle_timeout = \"10m\"\n", "coding", lambda r: r.tool_ctx.heartbeat_interval, 5.0),
    ("[agent]\nlang = \"German\"\n", "repo", lambda r: r.lang, "German"),
    ("[llm]\ncircuit_breaker_threshold = 2\ncircuit_breaker_reset_timeout = \"90s\"\n", "director",
     lambda r: (r.breakers().threshold, r.breakers().reset_timeout), (2, 90.0)),
    ("[llm]\ncircuit_breaker_threshold = 0\n", "director", lambda r: r.breakers(), None),
    ("", "coding", lambda r: (r.engine.provider, _engine_key(r)), ("spare", "sk-spare")),
    ("", "director", lambda r: (r.engine.provider, _engine_key(r)), ("main", "sk-main")),
    ("", "chat", lambda r: r._llm_config.settings.stall_timeout, 45.0),
    ("", "chat", lambda r: r._engine_for_tool("deepthinking").provider, "third"),
]


@pytest.mark.parametrize(("toml", "role", "seen", "expected"), REACHES_THE_WORKER)
def test_a_value_set_in_the_file_reaches_the_worker(tmp_path: Path, toml: str, role: str,
                                                     seen: Callable[[AgentRun], Any], expected: Any) -> None:
    table = tomllib.loads(PROVIDERS)
    for section, values in tomllib.loads(toml).items():
        table.setdefault(section, {}).update(values)
    settings = settings_from_table(table, environ={"MAIN_KEY": "sk-main", "THIRD_KEY": "sk-third"})
    run = AgentRun(_as_the_worker_gets_it(settings.run_settings, tmp_path, role), role)
    assert seen(run) == expected


def test_a_provider_whose_key_variable_is_unset_fails_only_the_run_that_uses_it(tmp_path: Path) -> None:
    settings = settings_from_table(tomllib.loads(PROVIDERS), environ={"MAIN_KEY": "sk-main"})  # no THIRD_KEY
    coding = AgentRun(_as_the_worker_gets_it(settings.run_settings, tmp_path, "coding"), "coding")
    assert coding.engine.provider == "spare"  # this run never needs THIRD_KEY
    with pytest.raises(ProviderConfigError, match="\"THIRD_KEY\", which is not set in this environment"):
        coding._engine_for_tool("deepthinking")


@pytest.mark.parametrize("environ", [{}, {"YAGENT_CONCURRENCY": "0"}, {"YAGENT_CONCURRENCY": "00"}])
@pytest.mark.parametrize("raw", [None, 0, -2, 1, 3, 4, 8, 9, 50, True, 2.5, "3"])
def test_max_parallel_readonly_tools_has_one_normaliser(raw: Any, environ: dict[str, str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    table = {} if raw is None else {"agent": {"max_parallel_readonly_tools": raw}}
    settings: Settings = settings_from_table(table, environ=environ)
    monkeypatch.delenv("YAGENT_CONCURRENCY", raising=False)
    for key, value in environ.items():
        monkeypatch.setenv(key, value)
    batch = ToolBatch(build_surface("repo"), [], None, max_parallel=raw)  # type: ignore[arg-type]
    assert settings.run_settings.max_parallel_readonly_tools == settings.max_parallel_readonly_tools
    assert settings.max_parallel_readonly_tools == normalize_max_parallel(raw) == batch.limit


def test_a_run_setting_the_workers_would_ignore_is_reported_and_never_stops_the_daemon() -> None:
    settings = settings_from_table({"agent": {"coding_max_steps": "many", "step_retries": 1},
                                    "llm": {"step_retries": -1, "circuit_breaker_threshold": True}}, environ={})
    assert settings.run_settings.max_steps_for("coding") == DEFAULT_MAX_STEPS["coding"]
    assert (settings.run_settings.step_retries, settings.run_settings.circuit_breaker_threshold) == (2, 0)
    assert list(settings.warnings) == [
        "[agent] step_retries has no effect there: it belongs in [llm]",
        "[agent] coding_max_steps = 'many' is not a whole number >= 1; the default is used",
        "[llm] step_retries = -1 is not a whole number >= 0; the default is used",
        "[llm] circuit_breaker_threshold = True is not a whole number >= 0; the default is used",
    ]
    assert settings_from_table({"agent": {"reviewer_max_steps": 12}}, environ={}).run_settings.max_steps_for(
        "reviewer") == 12  # a third-party agent's own limit travels too


def test_the_language_reaches_a_custom_agent_designed_by_meta(tmp_path: Path) -> None:
    import asyncio
    import json

    from tests.agent_harness import MARKERS
    from tests.fake_provider import FakeProvider, Step, ToolCallSpec
    from yagent.workers.agents.custom_agents import CustomAgentRegistry, parse_design
    from yagent.workers.agents.subagents import custom

    CustomAgentRegistry(tmp_path, "t").add(parse_design(json.dumps({
        "name": "reader", "description": "Reads.", "system_prompt": "Read files.", "tools": ["read_file"]}), "read"))
    with FakeProvider() as fake:
        fake.script("custom", MARKERS["custom"], [Step(text="Gelesen.", tool_calls=[
            ToolCallSpec("agent_exit", {"summary": "done"})])])
        table = {"global": {"llm": {"use_provider": "fake", "providers": {"fake": fake.provider_table()}}},
                 "agent": {"lang": "German"}}
        settings = settings_from_table(table, environ={}).run_settings
        outcome = asyncio.run(custom(_as_the_worker_gets_it(settings, tmp_path, "custom:reader")))
        fake.assert_no_problems()
        system = fake.requests_for("custom")[0].body["messages"][0]["content"]
    assert outcome.output == "Gelesen." and "Write in German." in system
