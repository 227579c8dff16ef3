"""`[codeseek]` as the config's one parser reads it, the built-in server the daemon makes of it, and how the MCP
manager treats that server: started whatever `[mcp]` says, its name reserved, its tools kept out of the listings runs
turn into `mcp__…` tools (they are static tools), its state shown like any server's."""

from __future__ import annotations

import asyncio
import json
import math
import sys
from pathlib import Path

import pytest

from tests.daemon_harness import arun
from tests.mcp.servers import TOOLBOX
from yagent.daemon.codeintel_server import code_server_config
from yagent.daemon.mcp_manager import McpManager
from yagent.daemon.registry import Registry
from yagent.daemon.schedule import Scheduler
from yagent.ipc.codeintel_settings import EMBEDDINGS_KEY_ENV, parse_codeintel
from yagent.ipc.config import ConfigError, settings_from_table
from yagent.ipc.mcp_settings import McpServerConfig, McpSettings, read_project_servers
from yagent.ipc.vocabulary import McpState


@pytest.mark.parametrize(("table", "says"), [
    ({"enabled": "yes"}, "enabled must be true or false"),
    ({"max_file_bytes": math.nan}, "max_file_bytes must be a whole number from 1024"),
    ({"max_file_bytes": 10**30}, "max_file_bytes must be a whole number"),
    ({"max_files": 0}, "max_files must be a whole number from 1"),
    ({"exclude": ["ok", "\x00"]}, "exclude"),
    ({"exclude": ["x"] * 300}, "at most 256"),
    ({"embeddings_url": "ftp://x"}, "must start with http"),
    ({"embeddings_url": "http://127.0.0.1:1/v1"}, "embeddings_model is not"),
    ({"embeddings_api_key_env": "NOT A NAME"}, "must name an environment variable"),
])
def test_every_codeseek_value_is_bounded_and_a_bad_one_says_what_to_write(table: dict, says: str) -> None:
    with pytest.raises(ValueError, match=None) as refused:
        parse_codeintel({"codeseek": table})
    assert says in str(refused.value)
    with pytest.raises(ConfigError):  # and through the one parser, as the three-line error
        settings_from_table({"codeseek": table})


def test_an_unknown_codeseek_key_is_warned_about_with_the_nearest_one_and_a_removed_table_with_its_hint() -> None:
    warnings = settings_from_table({"codeseek": {"embedding_url": "http://x", "knowledge": {"enabled": True}}}).warnings
    assert "[codeseek] embedding_url is not a setting yagent knows, so it does nothing; did you mean " \
           "embeddings_url?" in warnings
    assert any(w.startswith("[codeseek.knowledge] was removed") for w in warnings), warnings


def test_codeseek_reaches_runs_as_one_switch_and_the_daemon_as_the_whole_table() -> None:
    settings = settings_from_table({"codeseek": {"enabled": False, "exclude": ["vendor/"]}})
    assert settings.run_settings.codeintel is False and settings.codeintel.exclude == ["vendor/"]
    assert settings_from_table({}).run_settings.codeintel is True


def test_no_configured_server_may_take_the_code_servers_name(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="belongs to yagent's built-in code server"):
        settings_from_table({"mcp": {"servers": [{"name": "codeintel", "command": "x"}]}})
    (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": {"codeintel": {"command": "evil"}}}))
    servers, problems = read_project_servers(tmp_path, McpSettings())
    assert servers == [] and "belongs to yagent's built-in code server" in problems[0]


def test_the_built_in_server_is_this_python_confined_with_the_keys_in_its_environment_never_its_arguments(
        tmp_path: Path) -> None:
    settings = settings_from_table({"codeseek": {"embeddings_url": "http://127.0.0.1:9/v1", "embeddings_model": "m",
                                                 "embeddings_api_key_env": "EMBED_KEY", "exclude": ["-tricky"]},
                                    "sandbox": {"deny_read": ["~/secrets"]}})
    config = code_server_config(settings, project_id="p-1", root=tmp_path / "proj", home=tmp_path / "home",
                                runtime_dir=tmp_path / "run", abi=7, user_home="/home/u",
                                environ={"EMBED_KEY": "sk-embed", "OTHER_SECRET": "x", "PYTHONPATH": "/src"})
    assert config is not None and config.command == sys.executable and config.source == "built-in"
    args = list(config.args)
    assert args[:2] == ["-m", "yagent.workers.codeintel"] and "--landlock-abi=7" in args
    assert "--exclude=-tricky" in args and "--deny-read=/home/u/secrets" in args
    assert f"--index={tmp_path / 'home' / 'data' / 'codeintel' / 'p-1'}" in args
    assert (tmp_path / "home" / "data" / "codeintel" / "p-1").stat().st_mode & 0o777 == 0o700
    assert not any("sk-embed" in a for a in args)
    assert dict(config.env) == {"PYTHONPATH": "/src", EMBEDDINGS_KEY_ENV: "sk-embed"}
    assert "confined: reads the project, writes only its index" in config.target()
    off = settings_from_table({"sandbox": {"mode": "off"}})
    unconfined = code_server_config(off, project_id="p", root=tmp_path, home=tmp_path / "h", runtime_dir=tmp_path,
                                    abi=7, environ={})
    assert unconfined is not None and "--landlock-abi=0" in unconfined.args
    assert code_server_config(settings_from_table({"codeseek": {"enabled": False}}), project_id="p", root=tmp_path,
                              home=tmp_path / "h", runtime_dir=tmp_path, abi=7, environ={}) is None


def test_the_manager_starts_the_built_in_server_even_without_mcp_and_lists_none_of_its_tools(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    builtin = McpServerConfig(name="codeintel", command=sys.executable, source="built-in",
                              args=(str(TOOLBOX), "--state", str(tmp_path / "s")))

    async def go() -> None:
        registry = Registry(tmp_path / "state.db")
        manager = McpManager(registry, Scheduler(), lambda: McpSettings(enabled=False),
                             builtin=lambda project_id, root: [builtin])
        serving = asyncio.create_task(manager.serve())
        await asyncio.sleep(0)  # its task group exists from its first step
        try:
            manager.project_in_use("p1", str(project))
            server = manager.servers[("p1", "codeintel")]
            # A call made while the server still starts waits for it (a static tool can be called at once).
            assert await manager.call("p1", "codeintel", "echo", {"text": "early"}, timeout=30) == ("early", False)
            assert server.state is McpState.READY and server.tools
            listed = await manager.tools_for("p1", [])
            assert listed.tools == [] and listed.servers == []  # neither mcp__codeintel__… tools nor its status
            shown, _problems = manager.statuses("p1", str(project))
            assert [(s.server, s.source, s.state) for s in shown] == [("codeintel", "built-in", McpState.READY)]
        finally:
            await manager.close()
            serving.cancel()
            try:
                await serving
            except asyncio.CancelledError:
                pass
            registry.close()

    arun(go(), 60)
