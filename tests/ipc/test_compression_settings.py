"""`[enhanced_commander]` is parsed by the daemon's one config parser (key existence for the switches that default
on), `YAGENT_COMPRESS_THRESHOLD` is read there once, and the values reach workers resolved in RunSettings."""

from __future__ import annotations

import math
import tomllib
from typing import Any

import pytest

from yagent.ipc.compression_settings import COMPRESSION_KEYS, CompressionSettings
from yagent.ipc.config import ConfigError, settings_from_table
from yagent.ipc.messages import RunSpec, StartRun
from yagent.ipc.records import decode, encode


def _compression(text: str, environ: dict[str, str] | None = None) -> CompressionSettings:
    return settings_from_table(tomllib.loads(text), environ=environ or {}).run_settings.compression


def test_defaults_every_key_and_the_trip_through_the_codec() -> None:
    assert _compression("") == CompressionSettings(enabled=True, threshold=0, threshold_override=0,
                                                   tool_result_keep_tokens=200, ultimate_enabled=True,
                                                   ultimate_keep_plans=0)
    set_all = _compression("[enhanced_commander]\nenable_context_compression = false\n"
                           "context_compression_threshold = 50000\ntool_result_keep_tokens = 80\n"
                           "enable_ultimate_compression = true\nultimate_compression_keep_plans = 3\n")
    assert set_all == CompressionSettings(enabled=False, threshold=50_000, tool_result_keep_tokens=80,
                                          ultimate_enabled=True, ultimate_keep_plans=3)
    spec = RunSpec(run="r", task="t", turn=1, project="p", project_root="/", agent="director", input="",
                   home="/", settings=settings_from_table({"enhanced_commander": {"tool_result_keep_tokens": 80}},
                                                          environ={}).run_settings)
    received = decode(encode(StartRun(spec=spec)))
    assert isinstance(received, StartRun) and received.spec.settings.compression.tool_result_keep_tokens == 80


def test_the_third_tier_is_on_unless_written_false() -> None:
    assert _compression("[enhanced_commander]\ncontext_compression_threshold = 9\n").ultimate_enabled is True
    assert _compression("[enhanced_commander]\nenable_ultimate_compression = false\n").ultimate_enabled is False


def test_a_zero_or_negative_threshold_means_no_configured_cap() -> None:
    assert _compression("[enhanced_commander]\ncontext_compression_threshold = 0\n").threshold == 0
    assert _compression("[enhanced_commander]\ncontext_compression_threshold = -5\n").threshold == 0


@pytest.mark.parametrize(("key", "value"), [
    ("enable_context_compression", "yes"), ("enable_ultimate_compression", 0),
    ("context_compression_threshold", math.nan), ("context_compression_threshold", math.inf),
    ("context_compression_threshold", 10**12), ("context_compression_threshold", 1.5),
    ("tool_result_keep_tokens", -1), ("tool_result_keep_tokens", True),
    ("ultimate_compression_keep_plans", -1), ("ultimate_compression_keep_plans", 10**9),
])
def test_a_bad_value_is_refused_naming_the_key(key: str, value: Any) -> None:
    with pytest.raises(ConfigError) as err:
        settings_from_table({"enhanced_commander": {key: value}}, environ={})
    assert f"[enhanced_commander] {key}" in err.value.what and len(err.value.lines()) == 3


def test_the_environment_override_is_read_once_and_a_bad_one_is_ignored_with_a_warning() -> None:
    assert _compression("", {"YAGENT_COMPRESS_THRESHOLD": "4096"}).threshold_override == 4096
    for bad in ("nan", "-3", "0", "1e9", "99999999999", "12k"):
        settings = settings_from_table({}, environ={"YAGENT_COMPRESS_THRESHOLD": bad})
        assert settings.run_settings.compression.threshold_override == 0
        assert any("YAGENT_COMPRESS_THRESHOLD" in w and "ignored" in w for w in settings.warnings), bad


def test_a_compression_key_in_another_section_is_reported() -> None:
    settings = settings_from_table({"agent": {"context_compression_threshold": 5}}, environ={})
    assert any("context_compression_threshold" in w and "[enhanced_commander]" in w for w in settings.warnings)
    assert set(COMPRESSION_KEYS) == {"enable_context_compression", "context_compression_threshold",
                                     "tool_result_keep_tokens", "enable_ultimate_compression",
                                     "ultimate_compression_keep_plans"}
