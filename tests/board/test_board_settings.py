"""`[blackboard]`: key existence decides where zero means off; bad values are refused saying what to write."""

from __future__ import annotations

import pytest

from yagent.ipc.board_settings import BoardSettings
from yagent.ipc.config import ConfigError, settings_from_table
from yagent.ipc.messages import RunSpec, StartRun
from yagent.ipc.records import decode, encode


def _board(section: dict) -> BoardSettings:
    return settings_from_table({"blackboard": section}, environ={}).run_settings.blackboard


def test_absent_keys_are_defaults_and_zeros_mean_off_where_they_can() -> None:
    assert _board({}) == BoardSettings() == settings_from_table({}, environ={}).run_settings.blackboard
    off = _board({"index_max_notes": 0, "index_line_chars": 0, "ttl": "0", "artifact_budget_tokens": 0,
                  "artifact_retention": 0})
    assert (off.index_max_notes, off.index_line_chars, off.ttl, off.artifact_budget_tokens,
            off.artifact_retention) == (0, 0, 0.0, 0, 0.0)
    assert BoardSettings().index_max_notes > 0 and BoardSettings().ttl > 0


def test_caps_without_an_off_take_zero_or_less_as_the_default() -> None:
    lenient = _board({"summary_max_runes": 0, "max_notes_per_board": -5})
    assert (lenient.summary_max_runes, lenient.max_notes_per_board) == (BoardSettings().summary_max_runes,
                                                                       BoardSettings().max_notes_per_board)
    assert _board({"max_notes_per_board": 7, "ttl": "2h", "index_line_chars": 50}) == BoardSettings(
        max_notes_per_board=7, ttl=7200.0, index_line_chars=50)


@pytest.mark.parametrize(("section", "named"), [
    ({"index_max_notes": -1}, "index_max_notes"),
    ({"index_line_chars": "wide"}, "index_line_chars"),
    ({"index_max_notes": True}, "index_max_notes"),
    ({"max_notes_per_board": 10**12}, "max_notes_per_board"),
    ({"ttl": "forever"}, "ttl"),
    ({"ttl": float("nan")}, "ttl"),
    ({"artifact_retention": -1}, "artifact_retention"),
])
def test_bad_values_are_refused_naming_the_key(section: dict, named: str) -> None:
    with pytest.raises(ConfigError) as caught:
        _board(section)
    assert named in caught.value.what and "[blackboard]" in caught.value.what


def test_an_unknown_key_is_a_warning_naming_the_nearest_one_not_a_refusal() -> None:
    settings = settings_from_table({"blackboard": {"index_max_note": 3}}, environ={})
    assert settings.run_settings.blackboard == BoardSettings()
    assert settings.warnings == ("[blackboard] index_max_note is not a setting yagent knows, so it does nothing; "
                                 "did you mean index_max_notes?",)


def test_a_blackboard_that_is_not_a_table_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"\[blackboard\] must be a table"):
        settings_from_table({"blackboard": 3}, environ={})


def test_the_resolved_values_reach_the_worker_through_the_codec() -> None:
    settings = settings_from_table({"blackboard": {"index_max_notes": 0, "ttl": "1d"}}, environ={}).run_settings
    spec = RunSpec(run="r", task="t", turn=1, project="p", project_root="/", agent="director", input="",
                   home="/", settings=settings)
    assert decode(encode(StartRun(spec=spec))).spec.settings.blackboard == settings.blackboard
