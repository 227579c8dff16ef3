"""`[resume]` is parsed by the daemon's one config parser and reaches workers resolved in RunSettings."""

from __future__ import annotations

import math
from typing import Any

import pytest

from yagent.ipc.config import ConfigError, settings_from_table
from yagent.ipc.resume_settings import DEFAULT_REPLAY_MAX_MESSAGES, DEFAULT_REPLAY_MAX_STEPS


def test_defaults_and_set_values_reach_the_run_settings() -> None:
    run = settings_from_table({}).run_settings
    assert run.rollout_retention == 30 * 86400
    assert (run.replay_max_steps, run.replay_max_messages) == (DEFAULT_REPLAY_MAX_STEPS, DEFAULT_REPLAY_MAX_MESSAGES)
    run = settings_from_table({"resume": {"rollout_retention": "2d", "replay_max_steps": 0,
                                          "replay_max_messages": 10}}).run_settings
    assert (run.rollout_retention, run.replay_max_steps, run.replay_max_messages) == (2 * 86400, 0, 10)


@pytest.mark.parametrize(("key", "value"), [("rollout_retention", math.nan), ("rollout_retention", "forever"),
                                            ("replay_max_steps", -1), ("replay_max_steps", True),
                                            ("replay_max_messages", 10**12), ("replay_max_messages", 1.5)])
def test_a_bad_value_is_refused_naming_the_key(key: str, value: Any) -> None:
    with pytest.raises(ConfigError) as err:
        settings_from_table({"resume": {key: value}})
    assert f"[resume] {key}" in err.value.what


def test_a_resume_key_in_another_section_is_reported() -> None:
    settings = settings_from_table({"daemon": {"replay_max_steps": 5}})
    assert any("replay_max_steps" in w and "[resume]" in w for w in settings.warnings), settings.warnings
