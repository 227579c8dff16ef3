"""The README stays true: its configuration examples load, and its test command is the one CI runs."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from yagent.ipc.config import settings_from_table
from yagent.ipc.provider_config import parse_llm_config
from yagent.ipc.run_settings import DEFAULT_MAX_STEPS

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text(encoding="utf-8")
TOML_BLOCKS = re.findall(r"```toml\n(.*?)```", README, re.S)


def test_every_toml_example_loads_without_warnings() -> None:
    assert len(TOML_BLOCKS) >= 2
    for block in TOML_BLOCKS:
        table = tomllib.loads(block)
        settings = settings_from_table(table, environ={"DEEPSEEK_API_KEY": "sk-test"})
        assert settings.warnings == ()
        assert parse_llm_config(table, {"DEEPSEEK_API_KEY": "sk-test"}).warnings == []


def test_the_settings_example_states_the_defaults() -> None:
    block = next(b for b in TOML_BLOCKS if "[agent]" in b)
    shown = settings_from_table(tomllib.loads(block), environ={})
    defaults = settings_from_table({}, environ={})
    for key in ("delegate_idle_timeout", "delegate_total_timeout", "max_parallel_delegations",
                "max_in_flight_requests", "max_cost_per_task", "max_cost_per_day"):
        assert getattr(shown, key) == getattr(defaults, key), key
    assert parse_llm_config(tomllib.loads(block), {}).settings == parse_llm_config({}, {}).settings
    assert tomllib.loads(block)["agent"]["coding_max_steps"] == DEFAULT_MAX_STEPS["coding"]


def test_ci_runs_the_readme_test_command() -> None:
    command = re.search(r"## Test\n\n```sh\n(.*?)\n```", README, re.S)
    assert command is not None
    assert command.group(1).strip() in (REPO / ".ci" / "run").read_text(encoding="utf-8")
