"""`[mcp]` / `[[mcp.servers]]` through the config's one parser, a project's `.mcp.json`, and the schema shape."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from yagent.ipc.config import ConfigError, parse_config_text, settings_from_table
from yagent.ipc.mcp_schema import normalize_input_schema
from yagent.ipc.mcp_settings import (
    DEFAULT_STARTUP_TIMEOUT,
    MCP_KEYS,
    MCP_SERVER_KEYS,
    McpSettings,
    read_project_servers,
)


def _settings(text: str):
    return settings_from_table(parse_config_text(text, None), None, {})


def test_servers_are_read_with_their_defaults_and_bounds() -> None:
    s = _settings('''
[mcp]
idle_ttl = "2m"
call_timeout = 30

[[mcp.servers]]
name = "docs"
command = "uvx"
args = ["docs-mcp", "--fast"]
env = { DOCS_DIR = "docs" }
read_only = ["search"]
required = true

[[mcp.servers]]
name = "remote_api"
url = "https://example.invalid/mcp"
bearer_token_env = "API_TOKEN"
enabled = false
projects = ["/work/one"]
''').mcp
    assert s.idle_ttl == 120 and s.call_timeout == 30 and s.enabled and s.project_files
    docs, remote = s.servers
    assert docs.transport == "stdio" and docs.target() == "uvx docs-mcp --fast" and docs.env == {"DOCS_DIR": "docs"}
    assert docs.required and docs.read_only == ("search",) and docs.call_timeout == 30
    assert docs.startup_timeout == DEFAULT_STARTUP_TIMEOUT and not docs.allow_write
    assert remote.transport == "http" and not remote.enabled and remote.bearer_token_env == "API_TOKEN"
    assert [x.name for x in s.for_project("/work/one")] == ["docs", "remote_api"]
    assert [x.name for x in s.for_project("/work/two")] == ["docs"]
    assert _settings("").mcp == McpSettings()
    assert set(MCP_KEYS) >= {"servers"} and "allow_write" in MCP_SERVER_KEYS


@pytest.mark.parametrize(("text", "said"), [
    ('[mcp]\nidle_ttl = nan', "not a duration"),
    ('[mcp]\ncall_timeout = 0', "longer than 0"),
    ('[mcp]\nstartup_timeout = 1e308', "longer than"),
    ('[mcp]\nenabled = "yes"', "true or false"),
    ('[[mcp.servers]]\nname = "a__b"\ncommand = "x"', "single '_'"),
    ('[[mcp.servers]]\nname = "far-too-long-a-server-name-x"\ncommand = "x"', "at most 24"),
    ('[[mcp.servers]]\nname = "a"', "either command"),
    ('[[mcp.servers]]\nname = "a"\ncommand = "x"\nurl = "http://h"', "not both"),
    ('[[mcp.servers]]\nname = "a"\nurl = "ftp://h"', "http://"),
    ('[[mcp.servers]]\nname = "a"\ncommand = "x"\nnoise = 1', "unknown key(s) noise"),
    ('[[mcp.servers]]\nname = "a"\ncommand = "x"\nenv = { "BAD NAME" = "v" }', "not a valid name"),
    ('[[mcp.servers]]\nname = "a"\ncommand = "x"\nprojects = ["relative"]', "absolute"),
    ('[[mcp.servers]]\nname = "a"\ncommand = "x"\n[[mcp.servers]]\nname = "a"\ncommand = "y"', "used twice"),
    ('[[mcp.servers]]\nname = "a"\ncommand = "x"\nargs = ' + str(["v"] * 300), "at most 256"),
    ('[[mcp.servers]]\nname = "a"\ncommand = "x"\ncall_timeout = -1', "must not be negative"),
    ('[[mcp.servers]]\nname = "a"\nurl = "https://h"\nbearer_token_env = "$X"', "environment variable"),
])
def test_a_bad_value_is_a_three_line_config_error_naming_it(text: str, said: str) -> None:
    with pytest.raises(ConfigError) as err:
        _settings(text)
    assert said in err.value.lines()[0] and len(err.value.lines()) == 3


def _mcp_json(root: Path, text: str | bytes) -> Path:
    path = root / ".mcp.json"
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def test_a_projects_mcp_json_is_read_in_the_other_assistants_format(tmp_path: Path) -> None:
    _mcp_json(tmp_path, '''{"mcpServers": {
        "fs": {"command": "npx", "args": ["-y", "server-fs", "."], "env": {"A": "1"}},
        "web": {"type": "http", "url": "https://example.invalid/mcp", "headers": {"X-Key": "v"}},
        "old": {"type": "sse", "url": "https://example.invalid/sse"},
        "bad name!": {"command": "x"}}}''')
    servers, problems = read_project_servers(tmp_path, McpSettings())
    assert [s.name for s in servers] == ["fs", "web"]
    fs, web = servers
    assert fs.from_project_file and fs.projects == (str(tmp_path),) and web.headers == {"X-Key": "v"}
    assert any("SSE transport" in p for p in problems) and any("bad name!" in p for p in problems)
    before = fs.fingerprint()
    _mcp_json(tmp_path, '{"mcpServers": {"fs": {"command": "npx", "args": ["-y", "server-fs", "/"]}}}')
    (edited,), _ = read_project_servers(tmp_path, McpSettings())
    assert edited.fingerprint() != before  # an approval of the old entry does not cover the edited one


@pytest.mark.parametrize("damage", ["not json {", b"\xff\xfe\x00garbage", '{"mcpServers": []}', "[1, 2]"])
def test_a_damaged_mcp_json_is_a_problem_line_never_an_exception(tmp_path: Path, damage: str | bytes) -> None:
    path = _mcp_json(tmp_path, damage)
    servers, problems = read_project_servers(tmp_path, McpSettings())
    assert servers == [] and len(problems) == 1 and str(path) in problems[0]


def test_a_fifo_or_a_huge_mcp_json_is_refused_without_blocking_or_reading_it_all(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / ".mcp.json")  # opened without blocking: nobody writes to it
    servers, problems = read_project_servers(tmp_path, McpSettings())
    assert servers == [] and "not a regular file" in problems[0]
    (tmp_path / ".mcp.json").unlink()
    _mcp_json(tmp_path, '{"mcpServers": {}, "pad": "' + "x" * 300_000 + '"}')
    servers, problems = read_project_servers(tmp_path, McpSettings())
    assert servers == [] and "larger than" in problems[0]
    (tmp_path / ".mcp.json").unlink()
    assert read_project_servers(tmp_path, McpSettings()) == ([], [])


def test_input_schemas_take_the_shape_declarations_need_or_say_why_not() -> None:
    shaped, why = normalize_input_schema({"type": "object", "required": ["q", "ghost"], "properties": {
        "q": {"type": "string"},
        "limit": {"anyOf": [{"type": "integer", "minimum": 1}, {"type": "null"}], "title": "Limit"},
        "tags": {"type": ["array", "null"], "items": {"type": "string"}, "description": "tags"},
        "mode": {"enum": ["a", "b"]}}})
    assert why == "" and shaped is not None
    props = shaped["properties"]
    assert props["q"] == {"type": "string", "description": "q"}
    assert props["limit"] == {"type": "integer", "minimum": 1, "title": "Limit", "description": "Limit"}
    assert props["tags"]["type"] == "array" and props["mode"]["type"] == "string"
    assert shaped["required"] == ["q"]
    assert normalize_input_schema({"type": "object", "properties": {"x": {"anyOf": [{"type": "string"},
                                                                                  {"type": "integer"}]}}})[0] is None
    assert normalize_input_schema({"type": "array"})[1].startswith("its input schema is of type")
    assert normalize_input_schema("nonsense")[0] is None
