"""`[mcp]` and `[[mcp.servers]]`: the MCP servers the daemon starts, read by the config's one parser; and a
project's `.mcp.json`, the file other assistants read, in the same shape.

    [mcp]
    enabled = true              # false: no MCP server starts anywhere
    idle_ttl = "10m"            # a project's servers stop this long after its last session went idle
    startup_timeout = "15m"     # budget for initialize + the whole tool list (a cold package runner is slow)
    call_timeout = "5m"         # a call with no reply and no progress notice for this long is given up
    project_files = true        # read projects' .mcp.json (its servers start only once approved)

    [[mcp.servers]]
    name = "docs"               # tools reach agents as mcp__docs__<tool>
    command = "uvx"             # stdio: the program, its args, env (added to PATH, HOME, locale) and cwd
    args = ["docs-mcp"]
    env = { DOCS_DIR = "docs" }
    cwd = ""                    # relative to the project root ("" = the root)
    # url = "https://…/mcp"     # or streamable HTTP, with headers and a bearer token
    # bearer_token_env = "DOCS_TOKEN"   # read from yagentd's environment, never logged
    enabled = true
    read_only = ["search"]      # tools to treat as read-only although not annotated readOnlyHint
    allow_write = false         # tools that may write (not read-only) are offered only with true
    required = false            # true: a turn waits for this server and fails if it does not come up
    projects = []               # project roots this server is for ([] = every project)

Every value is bounded like every setting (durations finite, lists capped, names the tool-name rules take).
A server is the user's own program and runs with the user's rights (no sandbox).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .codeintel_settings import CODE_SERVER_NAME, CODE_SERVER_SOURCE
from .provider_config import shown_value

__all__ = [
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_IDLE_TTL",
    "DEFAULT_STARTUP_TIMEOUT",
    "MCP_JSON",
    "MCP_JSON_MAX_BYTES",
    "MCP_KEYS",
    "MCP_SERVER_KEYS",
    "McpServerConfig",
    "McpSettings",
    "parse_mcp",
    "read_project_servers",
]

MCP_KEYS = ("enabled", "idle_ttl", "startup_timeout", "call_timeout", "project_files", "servers")
MCP_SERVER_KEYS = ("name", "command", "args", "env", "cwd", "url", "headers", "bearer_token_env", "bearer_token",
                   "enabled", "read_only", "allow_write", "startup_timeout", "call_timeout", "required", "projects")
DEFAULT_STARTUP_TIMEOUT = 15 * 60.0  # a package runner's cold start, or a server indexing the project first
DEFAULT_CALL_TIMEOUT = 5 * 60.0  # silence (no reply, no progress) a call may last; progress restarts it
DEFAULT_IDLE_TTL = 10 * 60.0
MCP_JSON = ".mcp.json"
MCP_JSON_MAX_BYTES = 256 * 1024
_MAX_SERVERS = 64
_MAX_LIST = 256  # args, read_only names, env entries, headers, projects
_MAX_TEXT = 4096  # one string value
# A server name is part of every tool name (`mcp__<name>__<tool>`, at most 64 characters), so it is short and
# has no double underscore, which separates the parts.
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9-]*(_[A-Za-z0-9-]+)*$")
_MAX_NAME = 24
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

Duration = Callable[[Any, str], float]


@dataclass(frozen=True, slots=True)
class McpServerConfig:
    """One server as configured; `source` says where (config.toml, or a project's .mcp.json)."""

    name: str
    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str = ""
    url: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    bearer_token_env: str = ""
    bearer_token: str = ""
    enabled: bool = True
    read_only: tuple[str, ...] = ()
    allow_write: bool = False
    startup_timeout: float = DEFAULT_STARTUP_TIMEOUT
    call_timeout: float = DEFAULT_CALL_TIMEOUT
    required: bool = False
    projects: tuple[str, ...] = ()
    source: str = "config.toml"

    @property
    def transport(self) -> str:
        return "http" if self.url else "stdio"

    @property
    def from_project_file(self) -> bool:
        return self.source == MCP_JSON

    def target(self) -> str:
        """What it runs or reaches, for people: the command line or the URL (never a header or token)."""
        if self.url:
            return self.url
        if self.source == CODE_SERVER_SOURCE:
            return (f"yagent's code server ({' '.join(self.args[:2])}), confined: reads the project, writes only its "
                    "index")
        return " ".join([self.command, *self.args])

    def applies_to(self, project_root: str) -> bool:
        return not self.projects or project_root in self.projects

    def fingerprint(self) -> str:
        """A digest of what the server would run: an approval of a .mcp.json server holds for exactly this."""
        launch = {"command": self.command, "args": list(self.args), "env": dict(sorted(self.env.items())),
                  "cwd": self.cwd, "url": self.url, "headers": dict(sorted(self.headers.items()))}
        return hashlib.sha256(json.dumps(launch, sort_keys=True).encode()).hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class McpSettings:
    enabled: bool = True
    idle_ttl: float = DEFAULT_IDLE_TTL
    startup_timeout: float = DEFAULT_STARTUP_TIMEOUT
    call_timeout: float = DEFAULT_CALL_TIMEOUT
    project_files: bool = True
    servers: tuple[McpServerConfig, ...] = ()

    def for_project(self, project_root: str) -> list[McpServerConfig]:
        """The config.toml servers that apply to this project."""
        return [s for s in self.servers if s.applies_to(project_root)]


def parse_mcp(table: Mapping[str, Any], parse_duration: Duration) -> McpSettings:
    """`[mcp]` and its `[[mcp.servers]]`; ValueError saying what is wrong and where."""
    section = table.get("mcp", {})
    if not isinstance(section, Mapping):
        raise ValueError("[mcp] must be a table")
    settings = McpSettings(
        enabled=_bool(section, "enabled", "[mcp]", True),
        idle_ttl=_duration(section, "idle_ttl", "[mcp]", DEFAULT_IDLE_TTL, parse_duration),
        startup_timeout=_duration(section, "startup_timeout", "[mcp]", DEFAULT_STARTUP_TIMEOUT, parse_duration,
                                  positive=True),
        call_timeout=_duration(section, "call_timeout", "[mcp]", DEFAULT_CALL_TIMEOUT, parse_duration, positive=True),
        project_files=_bool(section, "project_files", "[mcp]", True))
    servers = section.get("servers", [])
    if not isinstance(servers, list) or not all(isinstance(s, Mapping) for s in servers):
        raise ValueError("[[mcp.servers]] must be tables: write each server as its own [[mcp.servers]] block")
    if len(servers) > _MAX_SERVERS:
        raise ValueError(f"[mcp] lists {len(servers)} servers; at most {_MAX_SERVERS} are taken")
    parsed = [_server(s, i, settings, parse_duration) for i, s in enumerate(servers)]
    seen: set[str] = set()
    for server in parsed:
        if server.name in seen:
            raise ValueError(f"[[mcp.servers]] name {server.name!r} is used twice; every server needs its own name")
        seen.add(server.name)
    return replace(settings, servers=tuple(parsed))


def _server(raw: Mapping[str, Any], index: int, defaults: McpSettings, parse_duration: Duration) -> McpServerConfig:
    name = raw.get("name")
    where = f"[[mcp.servers]] #{index + 1}"
    if not isinstance(name, str) or not _NAME.match(name) or len(name) > _MAX_NAME:
        raise ValueError(f"{where} needs a name of letters, digits, '-' and single '_' (at most {_MAX_NAME}, "
                         f"starting with a letter), got {shown_value(name)}")
    where = f"[[mcp.servers]] {name!r}"
    if name == CODE_SERVER_NAME:
        raise ValueError(f"{where}: the name {CODE_SERVER_NAME!r} belongs to yagent's built-in code server ([codeseek] "
                         "configures it); give this server another name")
    unknown = sorted(set(raw) - set(MCP_SERVER_KEYS))
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {', '.join(unknown)}; a server takes {', '.join(MCP_SERVER_KEYS)}")
    command = _text(raw, "command", where)
    url = _text(raw, "url", where)
    if bool(command) == bool(url):
        raise ValueError(f"{where} needs either command (a program started over stdio) or url (streamable HTTP), "
                         "not both and not neither")
    if url and not url.startswith(("http://", "https://")):
        raise ValueError(f"{where}: url must start with http:// or https://, got {shown_value(url)}")
    token_env = _text(raw, "bearer_token_env", where)
    if token_env and not _ENV_NAME.match(token_env):
        raise ValueError(f"{where}: bearer_token_env must name an environment variable, got {shown_value(token_env)}")
    projects = _strings(raw, "projects", where)
    for project in projects:
        if not os.path.isabs(project):
            raise ValueError(f"{where}: projects must be absolute paths of project roots, got {shown_value(project)}")
    return McpServerConfig(
        name=name, command=command, args=_strings(raw, "args", where), env=_mapping(raw, "env", where, _ENV_NAME),
        cwd=_text(raw, "cwd", where), url=url, headers=_mapping(raw, "headers", where, _HEADER_NAME),
        bearer_token_env=token_env, bearer_token=_text(raw, "bearer_token", where),
        enabled=_bool(raw, "enabled", where, True), read_only=_strings(raw, "read_only", where),
        allow_write=_bool(raw, "allow_write", where, False),
        startup_timeout=_duration(raw, "startup_timeout", where, defaults.startup_timeout, parse_duration,
                                  positive=True),
        call_timeout=_duration(raw, "call_timeout", where, defaults.call_timeout, parse_duration, positive=True),
        required=_bool(raw, "required", where, False),
        projects=tuple(os.path.normpath(p) for p in projects))


def _bool(section: Mapping[str, Any], key: str, where: str, default: bool) -> bool:
    value = section.get(key, default)
    if not isinstance(value, bool):
        raise ValueError(f"{where} {key} must be true or false, got {shown_value(value)}")
    return value


def _duration(section: Mapping[str, Any], key: str, where: str, default: float, parse_duration: Duration, *,
              positive: bool = False) -> float:
    if key not in section:
        return default
    seconds = parse_duration(section[key], f"{where} {key}")
    if positive and seconds <= 0:
        raise ValueError(f"{where} {key} must be longer than 0, got {shown_value(section[key])}")
    return float(seconds)


def _text(section: Mapping[str, Any], key: str, where: str) -> str:
    value = section.get(key, "")
    if not isinstance(value, str):
        raise ValueError(f"{where} {key} must be a string, got {shown_value(value)}")
    if len(value) > _MAX_TEXT or "\x00" in value:
        raise ValueError(f"{where} {key} must be text of at most {_MAX_TEXT} characters without NUL")
    return value


def _strings(section: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = section.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{where} {key} must be a list of strings, got {shown_value(value)}")
    if len(value) > _MAX_LIST:
        raise ValueError(f"{where} {key} lists {len(value)} entries; at most {_MAX_LIST} are taken")
    if any(len(v) > _MAX_TEXT or "\x00" in v for v in value):
        raise ValueError(f"{where} {key}: every entry must be text of at most {_MAX_TEXT} characters without NUL")
    return tuple(value)


def _mapping(section: Mapping[str, Any], key: str, where: str, names: re.Pattern[str]) -> dict[str, str]:
    value = section.get(key, {})
    if not isinstance(value, Mapping) or not all(isinstance(v, str) for v in value.values()):
        raise ValueError(f"{where} {key} must be a table of strings, e.g. {key} = {{ NAME = \"value\" }}")
    if len(value) > _MAX_LIST:
        raise ValueError(f"{where} {key} has {len(value)} entries; at most {_MAX_LIST} are taken")
    for name, text in value.items():
        if not names.match(name):
            raise ValueError(f"{where} {key}: {shown_value(name)} is not a valid name")
        if len(text) > _MAX_TEXT or "\x00" in text or "\n" in text:
            raise ValueError(f"{where} {key} {name}: the value must be one line of at most {_MAX_TEXT} characters")
    return dict(value)


# -- a project's .mcp.json ------------------------------------------------------------------------------


def read_project_servers(project_root: Path, defaults: McpSettings) -> tuple[list[McpServerConfig], list[str]]:
    """The servers a project's `.mcp.json` declares, and a line for each problem (a damaged file, an entry
    yagent cannot start). The file belongs to the project — anyone who wrote the repository wrote it — so a
    server from it starts only after the user approved it (`McpServerConfig.fingerprint`)."""
    path = project_root / MCP_JSON
    try:
        raw = _read_small_file(path)
    except OSError as exc:
        return [], [f"{path}: cannot be read ({exc.strerror or exc}); fix or remove it"]
    if raw is None:
        return [], []
    try:
        data = json.loads(raw.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError) as exc:
        return [], [f"{path}: not valid JSON ({exc}); fix it or remove it"]
    entries = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(entries, dict):
        return [], [f'{path}: expected {{"mcpServers": {{"name": {{"command": …}}}}}}; no server is read from it']
    servers: list[McpServerConfig] = []
    problems: list[str] = []
    for name, entry in list(entries.items())[:_MAX_SERVERS]:
        try:
            servers.append(_project_server(name, entry, project_root, defaults))
        except ValueError as exc:
            problems.append(f"{path}: {exc}")
    return servers, problems


def _project_server(name: Any, entry: Any, project_root: Path, defaults: McpSettings) -> McpServerConfig:
    if not isinstance(entry, dict):
        raise ValueError(f"server {shown_value(name)} must be an object")
    kind = entry.get("type", "http" if "url" in entry else "stdio")
    if kind == "sse":
        raise ValueError(f"server {shown_value(name)} uses the SSE transport, which yagent does not speak; use a "
                         "streamable HTTP url or a command")
    if kind not in ("stdio", "http", "streamable-http"):
        raise ValueError(f"server {shown_value(name)} has type {shown_value(kind)}; yagent takes stdio or http")
    table = {"name": name, **{k: v for k, v in entry.items() if k in ("command", "args", "env", "cwd", "url",
                                                                      "headers")}}
    server = _server(table, 0, defaults, lambda value, key: 0.0)
    return replace(server, source=MCP_JSON, projects=(str(project_root),))


def _read_small_file(path: Path) -> bytes | None:
    """The file's bytes, None when there is none; a FIFO, a device or a huge file is an OSError, never a hang."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(f"{path.name} is not a regular file")
        if info.st_size > MCP_JSON_MAX_BYTES:
            raise OSError(f"{path.name} is larger than {MCP_JSON_MAX_BYTES // 1024} KiB")
        data = os.read(fd, MCP_JSON_MAX_BYTES + 1)
        if len(data) > MCP_JSON_MAX_BYTES:
            raise OSError(f"{path.name} is larger than {MCP_JSON_MAX_BYTES // 1024} KiB")
        return data
    finally:
        os.close(fd)
