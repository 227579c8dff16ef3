"""Config values and files that pass a naive check and break the daemon are refused by the one parser,
with the three-line configuration error: non-finite or endless durations, integers past what libzmq,
the codec or the engines take, tables nested past any setting, and files that are not files."""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from yagent.ipc.config import (
    MAX_CONFIG_BYTES,
    MAX_NESTING,
    ConfigError,
    load_settings,
    parse_duration,
    settings_from_table,
)
from yagent.ipc.messages import RunSpec, StartRun
from yagent.ipc.records import decode, encode

PROVIDER = {"api_base_url": "http://127.0.0.1:9/v1", "api_key": "k", "model": "m"}


def refused(table: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as caught:
        settings_from_table(table, Path("/cfg.toml"), {})
    lines = caught.value.lines()
    assert len(lines) == 3 and lines[1] == "file: /cfg.toml"
    return lines[0]


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan, "9" * 400 + "s", 10**400, 3651 * 86400])
def test_a_duration_is_finite_and_at_most_ten_years(value: Any) -> None:
    with pytest.raises(ValueError, match=r"\[daemon\] stop_grace"):
        parse_duration(value, "[daemon] stop_grace")
    assert parse_duration("3650d", "k") == 3650 * 86400


@pytest.mark.parametrize(("section", "key"), [
    ("agent", "delegate_idle_timeout"), ("agent", "delegate_total_timeout"), ("", "task_timeout"),
    ("daemon", "stop_grace"), ("daemon", "heartbeat_interval"), ("daemon", "daemon_loss_timeout"),
    ("daemon", "event_log_retention")])
@pytest.mark.parametrize("value", [math.nan, math.inf])
def test_nan_and_inf_durations_are_refused_naming_the_key(section: str, key: str, value: float) -> None:
    # `delegate_idle_timeout = nan` used to switch the idle watchdog off (nan > 0 is false), and
    # `heartbeat_interval = inf` to stop the pings, so every run was given up as "daemon lost".
    table: dict[str, Any] = {section: {key: value}} if section else {key: value}
    line = refused(table)
    assert key in line and ("nan" in line or "inf" in line), line


def test_pings_must_come_well_within_the_workers_loss_timeout() -> None:
    line = refused({"daemon": {"heartbeat_interval": "1d"}})
    assert "heartbeat_interval = 86400s must be at most a third of [daemon] daemon_loss_timeout (10s)" in line
    refused({"daemon": {"heartbeat_interval": "4s", "daemon_loss_timeout": "10s"}})
    ok = settings_from_table({"daemon": {"heartbeat_interval": "3s", "daemon_loss_timeout": "10s"}})
    assert ok.heartbeat_interval == 3.0


@pytest.mark.parametrize(("section", "key", "too_big", "largest"), [
    ("daemon", "pub_hwm", 99_999_999_999, 10_000_000),  # libzmq takes a C int: this crashed the bind
    ("daemon", "max_workers", 10**30, 10_000),
    ("daemon", "event_ring", 2**63, 1_000_000),
    ("daemon", "event_log_max_bytes", 2**64, 2**40),
    ("llm", "max_in_flight_requests", 10**12, 10_000),
])
def test_daemon_integers_have_upper_bounds(section: str, key: str, too_big: int, largest: int) -> None:
    line = refused({section: {key: too_big}})
    assert f"{key} must be at most {largest}" in line
    assert getattr(settings_from_table({section: {key: largest}}), key) == largest


@pytest.mark.parametrize(("change", "said"), [
    ({"temperature": math.nan}, "temperature must be a number between 0 and 2, found nan"),
    ({"temperature": math.inf}, "temperature must be a number between 0 and 2, found inf"),
    ({"max_tokens": 10**20}, "max_tokens must be at most 10,000,000"),
    ({"context_window": 2**64}, "context_window must be at most 100,000,000"),
    ({"fallback_providers": [{"provider": "q", "weight": 10**19}]}, "weight of 'q' must be at most 1000"),
])
def test_provider_numbers_have_bounds(change: dict[str, Any], said: str) -> None:
    table = {"global": {"llm": {"use_provider": "p", "providers": {"p": {**PROVIDER, **change}, "q": PROVIDER}}}}
    assert said in refused(table)


@pytest.mark.parametrize(("key", "value", "said"), [
    ("timeout", 10**400, "is longer than a day"),  # float() of this overflows: not a traceback either
    ("stall_timeout", math.inf, "must be a positive duration, found inf"),
    ("timeout", math.nan, "must be a positive duration, found nan"),
    ("max_retries", 10**19, "max_retries must be at most 100"),
    ("fallback_max_retries", 2**70, "fallback_max_retries must be at most 100"),
])
def test_llm_settings_have_bounds(key: str, value: Any, said: str) -> None:
    assert said in refused({"llm": {key: value}})


def test_a_huge_value_is_quoted_short_in_the_message() -> None:
    line = refused({"llm": {"timeout": 10**400}})
    assert len(line) < 200 and "(401 characters)" in line


def test_lenient_worker_integers_past_their_bound_fall_back_to_the_default() -> None:
    loaded = settings_from_table({"agent": {"coding_max_steps": 10**30}, "llm": {"step_retries": 2**64}})
    assert loaded.run_settings.max_steps["coding"] == 150 and loaded.run_settings.step_retries == 2
    assert any("coding_max_steps" in w and "is more than" in w for w in loaded.warnings)
    decode(encode(StartRun(spec=RunSpec(run="r", task="t", turn=1, project="p", project_root="/", agent="a",
                                        input="", home="/", settings=loaded.run_settings))))


# Values an attacker (or a slip of the keyboard) puts at every key the parser reads.
HOSTILE = st.one_of(
    st.sampled_from([math.nan, math.inf, -math.inf, 0, -1, 2**31, 2**63, 2**64, 10**400, True, "", "9" * 400 + "d",
                     "1e400s", [], {}, [[[]]], {"a": {"b": {}}}, "nan", "inf"]),
    st.integers(), st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=20))
KEYS = [("agent", k) for k in ("delegate_idle_timeout", "delegate_total_timeout", "max_parallel_delegations",
                               "max_parallel_readonly_tools", "coding_max_steps", "lang")]
KEYS += [("daemon", k) for k in ("max_workers", "event_ring", "pub_hwm", "stop_grace", "heartbeat_interval",
                                 "daemon_loss_timeout", "event_log_max_bytes", "event_log_retention")]
KEYS += [("llm", k) for k in ("max_in_flight_requests", "step_retries", "circuit_breaker_threshold",
                              "circuit_breaker_reset_timeout", "timeout", "stall_timeout", "max_retries",
                              "fallback_max_retries", "enable_fallback")]
KEYS += [("provider", k) for k in ("temperature", "max_tokens", "context_window", "fallback_providers")]
KEYS += [("", "task_timeout")]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(KEYS), HOSTILE), min_size=1, max_size=6))
def test_hostile_values_give_a_config_error_or_settings_every_part_can_carry(
        assignments: list[tuple[tuple[str, str], Any]]) -> None:
    table: dict[str, Any] = {"global": {"llm": {"use_provider": "p", "providers": {"p": dict(PROVIDER)}}},
                             "llm": {"circuit_breaker_threshold": 2}}
    for (section, key), value in assignments:
        if section == "provider":
            table["global"]["llm"]["providers"]["p"][key] = value
        elif section:
            table.setdefault(section, {})[key] = value
        else:
            table[key] = value
    try:
        loaded = settings_from_table(table, None, {})
    except ConfigError as exc:
        assert len(exc.lines()) == 3 and len(exc.lines()[0]) < 1000
        return
    for name in ("delegate_idle_timeout", "delegate_total_timeout", "task_timeout", "stop_grace",
                 "heartbeat_interval", "daemon_loss_timeout", "event_log_retention"):
        value = getattr(loaded, name)
        assert math.isfinite(value) and 0 <= value <= 3650 * 86400, (name, value)
    for name in ("max_workers", "event_ring", "pub_hwm", "max_in_flight_requests"):
        assert 0 <= getattr(loaded, name) < 2**31, name
    assert loaded.heartbeat_interval * 3 <= loaded.daemon_loss_timeout
    llm = loaded.run_settings.llm.settings
    assert math.isfinite(llm.timeout) and math.isfinite(llm.stall_timeout)
    # What a worker gets passes the codec (64-bit integers only) and arrives as it was resolved.
    spec = RunSpec(run="r", task="t", turn=1, project="p", project_root="/", agent="a", input="", home="/",
                   settings=loaded.run_settings, heartbeat_interval=loaded.heartbeat_interval,
                   daemon_loss_timeout=loaded.daemon_loss_timeout)
    assert decode(encode(StartRun(spec=spec))).spec.settings == loaded.run_settings


# -- the file itself -------------------------------------------------------------------------------------

def load_within(path: Path, seconds: float = 10.0) -> Callable[[], ConfigError]:
    """Load `path` on a thread; the error it raised, failing the test if the load blocks."""
    box: dict[str, BaseException | None] = {}

    def load() -> None:
        try:
            load_settings(path, {})
            box["error"] = None
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=load, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise AssertionError(f"loading {path} blocked for {seconds}s")
    error = box["error"]
    assert isinstance(error, ConfigError), error
    return lambda: error


@pytest.mark.parametrize("depth", [MAX_NESTING + 1, 3000])
@pytest.mark.parametrize("shape", ["array", "inline table", "dotted key", "table header"])
def test_tables_nested_too_deep_are_a_config_error_not_a_recursion_error(tmp_path: Path, shape: str,
                                                                         depth: int) -> None:
    text = {"array": "a = " + "[" * depth + "]" * depth,
            "inline table": "a = " + "{ b = " * depth + "1" + " }" * depth,
            "dotted key": ".".join(["k"] * depth) + " = 1",
            "table header": "[" + ".".join(["k"] * depth) + "]\nx = 1"}[shape]
    path = tmp_path / "config.toml"
    path.write_text(text)
    error = load_within(path)()
    assert f"nest more than {MAX_NESTING} levels deep" in error.what
    assert error.fix == "run `yagent setup` to fix it"  # the wizard keeps it aside and starts a fresh one


def test_nesting_up_to_the_limit_loads(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("[" + ".".join(["k"] * (MAX_NESTING - 2)) + "]\nx = [1]\n")  # k…k.x.[0]: 16 keys
    assert load_settings(path, {}).table


def test_a_named_pipe_is_refused_at_once_not_waited_on(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    os.mkfifo(path)
    try:
        error = load_within(path)()
    finally:  # a reader still blocked on the pipe (the bug) is let go by a writer that opens and closes it
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass
    assert error.lines() == [
        "configuration error: the file is a named pipe (FIFO), not a regular file",
        f"file: {path}",
        "replace it with a regular file (or remove it to run on the built-in defaults), then `yagent setup`"]


def test_a_link_to_an_endless_device_is_refused_without_reading_it(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.symlink_to("/dev/zero")
    assert load_within(path)().what == "the file is a character device, not a regular file"


def test_a_file_past_the_size_cap_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_bytes(b"# padding\n" * (MAX_CONFIG_BYTES // 10 + 1))
    error = load_within(path)()
    assert "larger than 1024 KiB" in error.what and "move the file aside" in error.fix
    path.write_bytes(b"# padding\n" * (MAX_CONFIG_BYTES // 10 - 1))
    assert load_settings(path, {}).path == path


@pytest.mark.parametrize("where", ["file", "directory"])
def test_a_dangling_symlink_is_an_error_not_the_defaults(tmp_path: Path, where: str) -> None:
    home = tmp_path / "home"
    home.mkdir()
    if where == "file":
        (home / "config").mkdir()
        link = home / "config" / "config.toml"
        link.symlink_to(tmp_path / "dotfiles" / "yagent.toml")
    else:
        link = home / "config"
        link.symlink_to(tmp_path / "dotfiles")
    path = home / "config" / "config.toml"
    error = load_within(path)()
    assert error.what == f"{link} is a symbolic link to {os.readlink(link)}, which does not exist"
    assert "point the link at your configuration file" in error.fix
    assert load_settings(tmp_path / "nothing" / "config.toml", {}).path is None  # really absent: defaults


def test_a_directory_where_the_file_should_be_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.mkdir()
    assert load_within(path)().what == "the file is a directory, not a regular file"
