"""The key registry: whatever in config.toml nothing reads is named, never silently ignored — an unknown key
with the nearest known one, a misplaced key with where it belongs, a removed key with its replacement, a
table of a feature not built yet as not supported yet."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from yagent.ipc.config import load_settings, settings_from_table
from yagent.ipc.config_keys import (
    NOT_YET_KEYS,
    NOT_YET_TABLES,
    REMOVED_KEYS,
    REMOVED_TABLES,
    config_warnings,
)


def warnings_of(toml: str) -> list[str]:
    return config_warnings(tomllib.loads(toml))


@pytest.mark.parametrize(("toml", "line"), [
    ('task_timout = "5m"', "task_timout (at the top level) is not a setting yagent knows, so it does nothing; did you "
                           "mean task_timeout?"),
    ("[agent]\ncoding_max_step = 3", "[agent] coding_max_step is not a setting yagent knows, so it does nothing; did "
                                     "you mean coding_max_steps?"),
    ("[agent]\ncodng_max_steps = 3", "[agent] codng_max_steps names no agent yagent has (director, coding, repo, chat, "
                                     "devops, browser, meta, custom; [daemon] agent_modules adds others), so it does "
                                     "nothing; did you mean coding_max_steps?"),
    ("[blackbord]\nttl = '1d'", "[blackbord] is not a table yagent knows, so nothing in it is read; did you mean "
                                "blackboard?"),
    ("[llm]\nmodel = 'x'", "[llm] model has no effect there: it belongs in [global.llm.providers.NAME]"),
    ("[llm]\nrequired = true", "[llm] required has no effect there: it belongs in [sandbox]"),
    ("[resume]\nttl = '1d'", "[resume] ttl has no effect there: it belongs in [blackboard]"),
    ("[llm]\nfrobnicate = 1", "[llm] frobnicate is not a setting yagent knows, so it does nothing"),
    ("[global.llm.providers.a]\napi_base_url = 'http://x'\napi_key = 'k'\nmodel = 'm'\naws_region = 'eu'",
     "[global.llm.providers.a] aws_region was removed: Bedrock is no longer special: every provider needs "
     "api_base_url and a key (use an OpenAI-compatible gateway); delete aws_region"),
])
def test_what_nothing_reads_is_named(toml: str, line: str) -> None:
    assert warnings_of(toml) == [line]


def test_a_file_of_known_keys_gets_no_warning_and_third_party_roles_pass_with_agent_modules() -> None:
    assert warnings_of('[agent]\nreviewer_max_steps = 9\n[daemon]\nagent_modules = ["my.agents"]\n'
                       '[agents.llm.reviewer]\nuse_provider = "x"\n[routing.baselines]\nrepo = "fast"\n'
                       '[sandbox]\nmode = "off"\n[routing]\nmode = "fixed"\n[tui]\nyolo = "yolo"') == []


# One fixture per removed key and table: the registry and its fixtures mirror each other, so the promise that a
# removed key is named with its replacement is itself tested (a new entry without a fixture fails).
REMOVED_FIXTURES = {
    ("enhanced_commander", "enable"): "[enhanced_commander]\nenable = true",
    ("browser", "headless"): "[browser]\nheadless = true",
    ("browser", "browser_path"): "[browser]\nbrowser_path = '/usr/bin/chromium'",
    ("browser", "binary_path"): "[browser]\nbinary_path = '/usr/bin/browser-control'",
    ("browser", "cdp_port_base"): "[browser]\ncdp_port_base = 9333",
    ("browser", "cdp_timeout"): "[browser]\ncdp_timeout = '65s'",
    ("browser", "workspace_root"): "[browser]\nworkspace_root = '~/.yagent/data/browser'",
    ("global.llm.providers.*", "aws_region"): "[global.llm.providers.b]\naws_region = 'us-east-1'",
    ("global.llm.providers.*", "aws_profile"): "[global.llm.providers.b]\naws_profile = 'dev'",
    ("global.llm.providers.*", "model_provider"): "[global.llm.providers.b]\nmodel_provider = 'bedrock'",
    ("*", "enable_streaming"): "[llm]\nenable_streaming = true",
    ("*", "auto_checkpoint"): "[agent]\nauto_checkpoint = true",
    "app": "[app]\nlog_level = 'debug'",
    "context": "[context]\nmax_tokens = 1000",
    "codeseek.knowledge": "[codeseek.knowledge]\nenabled = true",
}


def test_every_removed_key_and_table_has_a_fixture() -> None:
    assert set(REMOVED_FIXTURES) == set(REMOVED_KEYS) | set(REMOVED_TABLES)


@pytest.mark.parametrize("entry", sorted(REMOVED_FIXTURES, key=str), ids=str)
def test_a_removed_key_or_table_is_named_with_its_replacement(entry: tuple[str, str] | str) -> None:
    hint = REMOVED_TABLES[entry] if isinstance(entry, str) else REMOVED_KEYS[entry]
    lines = warnings_of(REMOVED_FIXTURES[entry])
    assert any(line.endswith(f"was removed: {hint}") for line in lines), lines
    if entry in ("codeseek.knowledge", ("enhanced_commander", "enable")) or entry[0] == "browser":
        assert len(lines) == 1, lines  # the removal is said, and nothing else of the table


@pytest.mark.parametrize("name", sorted(NOT_YET_TABLES))
def test_a_table_of_a_feature_not_built_yet_is_said_to_be_not_supported(name: str) -> None:
    lines = warnings_of(f"[{name}]\nenabled = true\n")
    assert lines == [f"[{name}] is not supported yet: {NOT_YET_TABLES[name]}, so nothing in it has an effect; "
                     "remove it, or keep it for when it is"]


def test_the_compression_mcp_and_skills_tables_are_walked_like_any_other() -> None:
    from yagent.ipc.compression_settings import COMPRESSION_KEYS
    from yagent.ipc.mcp_settings import MCP_KEYS
    from yagent.ipc.skills_settings import SKILLS_KEYS

    for name, keys in (("enhanced_commander", COMPRESSION_KEYS), ("mcp", MCP_KEYS), ("skills", SKILLS_KEYS)):
        assert config_warnings({name: dict.fromkeys(keys, 1)}) == [], name  # its keys pass
    assert config_warnings({"skills": {"dirs": [], "dir": "x"}}) == [
        "[skills] dir is not a setting yagent knows, so it does nothing; did you mean dirs?"]
    assert config_warnings({"enhanced_commander": {"enable": True}}) == [  # a removed key keeps its hint
        "[enhanced_commander] enable was removed: enable_context_compression is the one switch; delete enable"]


def test_the_warnings_reach_the_settings_after_the_misplaced_and_ignored_ones_keep_their_order(tmp_path: Path) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text("[blackboard]\nindex_max_notse = 3\n[tui]\nyolo = 'always'\n[keywords]\nenabled = true\n")
    assert load_settings(cfg, {}).warnings == (
        "[blackboard] index_max_notse is not a setting yagent knows, so it does nothing; did you mean index_max_notes?",
        "[keywords] is not supported yet: keyword routing is not built yet, so nothing in it has an effect; "
        "remove it, or keep it for when it is",
        "[tui] yolo = 'always' is not one of none, yolo, full; the full-screen client asks as with none",
    )


def test_warnings_never_stop_loading_and_huge_names_are_cut_short() -> None:
    name = "k" * 10_000
    settings = settings_from_table({"llm": {name: 1}, name: {"x": 1}}, environ={})
    assert len(settings.warnings) == 2 and all(len(w) < 300 for w in settings.warnings), settings.warnings


@pytest.mark.parametrize(("table", "key"), sorted(NOT_YET_KEYS))
def test_a_key_of_a_feature_not_built_yet_is_said_to_be_not_supported(table: str, key: str) -> None:
    assert warnings_of(f"[{table}]\n{key} = 'x'") == [
        f"[{table}] {key} is not supported yet: {NOT_YET_KEYS[(table, key)]}, so it has no effect"]
