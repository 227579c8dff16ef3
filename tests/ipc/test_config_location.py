"""Which file is read: --config, then $YAGENT_CONFIG (used as given, never created), then the default, written from
a commented template on first use — a template that loads as the built-in defaults and documents them truly."""

from __future__ import annotations

import os
import re
import stat
import threading
import tomllib
from pathlib import Path

import pytest

from yagent.ipc.config import ConfigError, load_settings, settings_from_table
from yagent.ipc.config_location import ConfigLocation, config_location, ensure_config_file, same_file
from yagent.ipc.config_template import CONFIG_TEMPLATE
from yagent.ipc.provider_config import parse_llm_config


def test_the_order_is_the_flag_then_the_variable_then_the_default(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    home = tmp_path / "home"
    assert config_location("a.toml", {"YAGENT_CONFIG": "/b.toml"}, home) == ConfigLocation(tmp_path / "a.toml",
                                                                                           "--config")
    assert config_location(None, {"YAGENT_CONFIG": "b.toml"}, home) == ConfigLocation(tmp_path / "b.toml",
                                                                                      "YAGENT_CONFIG")
    assert config_location(None, {"YAGENT_CONFIG": ""}, home) == ConfigLocation(home / "config" / "config.toml")


def test_a_named_file_is_never_created_and_its_absence_is_an_error_saying_what_to_do(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "mine.toml"
    with pytest.raises(ConfigError) as caught:
        ConfigLocation(missing, "YAGENT_CONFIG").prepare()
    lines = caught.value.lines()
    assert lines[0] == "configuration error: the file does not exist" and lines[1] == f"file: {missing}"
    assert "YAGENT_CONFIG names a file that yagent uses as given and never creates" in lines[2]
    assert not missing.parent.exists()


@pytest.mark.parametrize("kind", ["fifo", "dangling link", "directory"])
def test_a_named_path_that_is_not_a_regular_file_is_refused_not_read_or_replaced(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "named.toml"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dangling link":
        path.symlink_to(tmp_path / "gone.toml")
    else:
        path.mkdir()
    location = ConfigLocation(path, "--config")
    assert location.prepare() is False  # something is there: the reader judges it (a pipe would block it)
    with pytest.raises(ConfigError) as caught:
        load_settings(path)
    assert {"fifo": "named pipe", "dangling link": "does not exist", "directory": "a directory"}[kind] in \
        caught.value.what
    assert os.path.lexists(path) and not path.is_file()  # left as it was


def test_the_default_file_is_written_once_from_the_template_private_to_its_owner(tmp_path: Path) -> None:
    path = tmp_path / "home" / "config" / "config.toml"
    assert ConfigLocation(path).prepare() is True
    assert path.read_text() == CONFIG_TEMPLATE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    path.write_text("[agent]\nlang = 'German'\n")
    assert ConfigLocation(path).prepare() is False and "German" in path.read_text()  # never overwritten
    assert [p.name for p in path.parent.iterdir()] == ["config.toml"]  # no temp file left


def test_writers_racing_for_the_first_file_leave_one_whole_template(tmp_path: Path) -> None:
    path = tmp_path / "config" / "config.toml"
    barrier = threading.Barrier(8)
    created: list[bool] = []

    def race() -> None:
        barrier.wait()
        created.append(ensure_config_file(path))

    threads = [threading.Thread(target=race) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert created.count(True) == 1 and path.read_text() == CONFIG_TEMPLATE
    assert sorted(p.name for p in path.parent.iterdir()) == ["config.toml"]


def test_a_broken_link_at_the_default_path_is_left_for_the_reader_to_refuse(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.symlink_to(tmp_path / "elsewhere.toml")
    assert ensure_config_file(path) is False and path.is_symlink() and not (tmp_path / "elsewhere.toml").exists()


def test_the_template_means_the_built_in_defaults() -> None:
    assert tomllib.loads(CONFIG_TEMPLATE) == {}
    assert settings_from_table(tomllib.loads(CONFIG_TEMPLATE), environ={}) == settings_from_table({}, environ={})


def _uncommented(text: str) -> str:
    """Every `# [table]` and `# key = value` line of the template, as TOML."""
    lines = [line[2:] for line in text.splitlines() if re.match(r"^# (\[[\w.]+\]$|\w+ = )", line)]
    return "\n".join(lines) + "\n"


def test_every_value_the_template_shows_is_the_default_and_every_key_it_shows_is_read() -> None:
    shown = tomllib.loads(_uncommented(CONFIG_TEMPLATE))
    assert {"agent", "llm", "resume", "blackboard", "sandbox", "daemon", "tui", "routing", "task_timeout"} <= set(shown)
    settings = settings_from_table(shown, environ={"DEEPSEEK_API_KEY": "sk-x"})
    assert settings.warnings == ()
    defaults = settings_from_table({}, environ={})
    example = {"providers", "use_provider", "agent_providers"}  # the provider lines are an example
    shown_llm = settings.run_settings.llm
    assert {f for f in shown_llm.__dataclass_fields__ if getattr(shown_llm, f) != getattr(
        defaults.run_settings.llm, f)} <= example | {"warnings"}
    for name in settings.__dataclass_fields__:
        if name not in ("table", "run_settings", "path"):
            assert getattr(settings, name) == getattr(defaults, name), name
    run_fields = set(settings.run_settings.__dataclass_fields__) - {"llm"}
    assert {f: getattr(settings.run_settings, f) for f in run_fields} == {
        f: getattr(defaults.run_settings, f) for f in run_fields}
    assert parse_llm_config(shown, {"DEEPSEEK_API_KEY": "sk-x"}).providers["deepseek"].model == "deepseek-chat"


def test_same_file_sees_through_links(tmp_path: Path) -> None:
    real = tmp_path / "real.toml"
    real.write_text("")
    (tmp_path / "link.toml").symlink_to(real)
    assert same_file(tmp_path / "link.toml", real) and same_file(str(real), tmp_path / "." / "real.toml")
    assert not same_file(real, tmp_path / "other.toml")
