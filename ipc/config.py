"""The configuration file `$YAGENT_HOME/config/config.toml`: loading, defaults, validation.

The file is a contract between processes: the client's setup wizard writes it, the daemon reads it at
start and hands every worker what it needs of it, resolved (`RunSettings`, in its start message). So its
schema lives here, in the one package all three may import, and this is its one parser. Writes go through
comment-preserving edits (tomlkit) in the client; this module only reads (tomllib).

Key-existence matters where zero has a meaning: `[llm] max_in_flight_requests = 0` is "unlimited",
while a missing key is "8".

Every value is bounded before anything acts on it: a duration is finite and at most `MAX_DURATION`, an
integer fits what it is handed to (libzmq takes a C int, the codec 64 bits), and the file itself is read
only if it is a regular file of at most `MAX_CONFIG_BYTES` whose tables nest at most `MAX_NESTING` deep.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import stat
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .blueprint_settings import parse_blueprint
from .board_settings import parse_board
from .browser_settings import BROWSER_OFF, BrowserSettings, parse_browser
from .checkpoint_settings import CheckpointSettings, parse_checkpoints
from .codeintel_settings import CodeIntelSettings, parse_codeintel
from .compression_settings import parse_compression
from .config_keys import config_warnings, misplaced_keys
from .mcp_settings import McpSettings, parse_mcp
from .provider_config import LLMConfig, parse_llm_config, shown_value
from .resume_settings import parse_resume
from .run_settings import (
    DEFAULT_BREAKER_RESET,
    DEFAULT_LANG,
    DEFAULT_MAX_STEPS,
    DEFAULT_PARALLEL_READONLY_TOOLS,
    DEFAULT_STEP_RETRIES,
    DEFAULT_TOOL_HEARTBEAT_INTERVAL,
    OTHER_ROLE_MAX_STEPS,
    RunSettings,
)
from .sandbox_settings import SandboxSettings, parse_sandbox
from .skills_settings import parse_skills
from .vocabulary import YoloLevel

__all__ = [
    "DEFAULT_PARALLEL_READONLY_TOOLS",
    "DEFAULT_RING_BYTES",
    "DEFAULT_RING_TOTAL_BYTES",
    "DEFAULT_WARM_WORKERS",
    "MAX_CONFIG_BYTES",
    "MAX_DURATION",
    "MAX_NESTING",
    "MAX_WARM_WORKERS",
    "SETUP_FIXES_IT",
    "ConfigError",
    "Settings",
    "clamp_parallel",
    "load_settings",
    "misplaced_keys",
    "parse_config_text",
    "parse_duration",
    "read_config_bytes",
    "read_config_table",
    "settings_from_table",
]

DEFAULT_MAX_IN_FLIGHT = 8
DEFAULT_PARALLEL_DELEGATIONS = 2
DEFAULT_IDLE_TIMEOUT = 60.0
# [daemon] warm_workers: a Director's turn and one delegation start without a fork; the bound keeps idle processes few.
DEFAULT_WARM_WORKERS = 2
MAX_WARM_WORKERS = 16
DEFAULT_RING_BYTES = 4 * 1024 * 1024  # [daemon] event_ring_bytes: one task's ring of recent events
DEFAULT_RING_TOTAL_BYTES = 64 * 1024 * 1024  # [daemon] event_ring_total_bytes: every task's ring together
PARALLEL_CLAMP = 8
# Far above any real configuration (a few KiB): past it the "file" is a device or a mistake, not settings.
MAX_CONFIG_BYTES = 1024 * 1024
# Tables and arrays nested deeper than this are refused (the deepest setting is 7 levels down); Python's
# TOML reader recurses per level and would otherwise end in a RecursionError.
MAX_NESTING = 16
# Ten years: a longer timer means "never" (0 says that where it is allowed), and the OS's own timeouts
# overflow not far above it.
MAX_DURATION = 3650 * 86400.0
# What libzmq takes for an option (a C int); every integer setting fits it unless its key says less.
MAX_INT = 2**31 - 1

SETUP_FIXES_IT = "run `yagent setup` to fix it"


class ConfigError(Exception):
    """A broken configuration file; `lines()` is what the user sees on stderr: what is wrong, which file,
    and what to do (`fix`: the wizard, unless the file is one it cannot open either)."""

    def __init__(self, what: str, path: Path | None, fix: str = SETUP_FIXES_IT) -> None:
        super().__init__(what)
        self.what = what
        self.path = path
        self.fix = fix

    def lines(self) -> list[str]:
        where = str(self.path) if self.path else "(built-in defaults)"
        return [f"configuration error: {self.what}", f"file: {where}", self.fix]


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")


def _spelled(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"


def parse_duration(value: Any, key: str, maximum: float = MAX_DURATION) -> float:
    """Seconds from a number or a Go-style duration string ("90s", "20m", "1h30m", "500ms", "30d"):
    finite, not negative, at most `maximum`."""
    if isinstance(value, bool):
        raise ValueError(f"{key} must be a duration like \"60s\" or a number of seconds, not a boolean")
    if isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{key} = {value} is not a duration; write a number of seconds or e.g. \"60s\"")
        if value < 0:
            raise ValueError(f"{key} must not be negative")
        if value > maximum:
            raise ValueError(f"{key} = {shown_value(value)} is longer than {_spelled(maximum)}, the most it may be")
        return float(value)
    if not isinstance(value, str):
        raise ValueError(f"{key} must be a duration like \"60s\", got {type(value).__name__}")
    text = value.strip()
    if text in ("0", ""):
        return 0.0
    pos, total = 0, 0.0
    for m in _DURATION.finditer(text):
        if m.start() != pos:
            break
        number, unit = float(m.group(1)), m.group(2)
        total += number * {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}[unit]
        pos = m.end()
    if pos != len(text) or pos == 0:
        raise ValueError(f"{key} = {shown_value(value)} is not a duration; write e.g. \"60s\", \"20m\" or \"1h30m\"")
    if not total <= maximum:  # also a number of digits that made it infinite
        raise ValueError(f"{key} = {shown_value(value)} is longer than {_spelled(maximum)}, the most it may be")
    return total


def clamp_parallel(value: Any, default: int, environ: Mapping[str, str]) -> int:
    """1 = strictly serial, <=0 or missing = default, above the clamp = the clamp.

    `YAGENT_CONCURRENCY=0` (exactly "0") forces serial everywhere; it is checked here, inside the one
    normaliser, so no call site can forget it.
    """
    if environ.get("YAGENT_CONCURRENCY") == "0":
        return 1
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        return default
    return min(value, PARALLEL_CLAMP)


@dataclass(frozen=True, slots=True)
class Settings:
    """The values the daemon itself acts on, and `run_settings`, what it hands every run.

    `table` is the whole parsed file, kept for reference; it never goes to a worker.
    """

    table: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None
    delegate_idle_timeout: float = DEFAULT_IDLE_TIMEOUT
    delegate_total_timeout: float = 20 * 60.0
    task_timeout: float = 0.0  # 0 = no per-task limit
    max_parallel_delegations: int = DEFAULT_PARALLEL_DELEGATIONS
    max_parallel_readonly_tools: int = DEFAULT_PARALLEL_READONLY_TOOLS
    max_in_flight_requests: int = DEFAULT_MAX_IN_FLIGHT  # 0 = unlimited
    max_workers: int = 32
    warm_workers: int = DEFAULT_WARM_WORKERS  # workers forked ahead of demand, for every kind together; 0 = none
    stop_grace: float = 3.0
    event_ring: int = 20_000
    event_ring_bytes: int = DEFAULT_RING_BYTES  # per task; past it the ring's oldest events leave (replays read logs)
    event_ring_total_bytes: int = DEFAULT_RING_TOTAL_BYTES  # over every task's ring; idle tasks' events leave first
    event_log_max_bytes: int = 64 * 1024 * 1024  # per task; past it the log keeps its newest half
    event_log_retention: float = 30 * 86400.0  # a task's log unwritten this long is deleted; 0 = kept forever
    pub_hwm: int = 100_000  # frames queued per subscriber before PUB drops (clients refill gaps by replay)
    heartbeat_interval: float = 1.0
    daemon_loss_timeout: float = 10.0
    max_cost_per_task: float = 0.0  # US dollars one task may spend before it is paused to ask; 0 = no limit
    max_cost_per_day: float = 0.0  # the same over every task, per calendar day
    agent_modules: tuple[str, ...] = ()  # modules the forkserver imports so workers find their agent kinds
    warnings: tuple[str, ...] = ()  # problems that do not stop the daemon (misplaced keys, ignored values)
    run_settings: RunSettings = field(default_factory=RunSettings)
    sandbox: SandboxSettings = field(default_factory=SandboxSettings)  # [sandbox]: how runs are confined
    mcp: McpSettings = field(default_factory=McpSettings)  # [mcp]: the MCP servers the daemon starts
    codeintel: CodeIntelSettings = field(default_factory=CodeIntelSettings)  # [codeseek]: the built-in code server
    browser: BrowserSettings = field(default_factory=BrowserSettings)  # [browser]: the Browser agent's Chromium
    checkpoints: CheckpointSettings = field(default_factory=CheckpointSettings)  # [git_checkpoint]


def _section(table: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = table.get(name, {})
    if not isinstance(value, Mapping):
        raise ValueError(f"[{name}] must be a table")
    return value


def _int(section: Mapping[str, Any], key: str, where: str, default: int, minimum: int = 0,
         maximum: int = MAX_INT) -> int:
    value = section.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{where}.{key} must be an integer, got {shown_value(value)}")
    if value < minimum:
        raise ValueError(f"{where}.{key} must be at least {minimum}, got {shown_value(value)}")
    if value > maximum:
        raise ValueError(f"{where}.{key} must be at most {maximum}, got {shown_value(value)}")
    return value


def _dollars(value: Any, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{key} must be an amount of US dollars, 0 or more (0 = no limit), got {value!r}")
    return float(value)


def settings_from_table(table: dict[str, Any], path: Path | None = None,
                        environ: Mapping[str, str] | None = None) -> Settings:
    env = os.environ if environ is None else environ
    try:
        agent = _section(table, "agent")
        llm = _section(table, "llm")
        daemon = _section(table, "daemon")
        kwargs: dict[str, Any] = {}
        if "delegate_idle_timeout" in agent:
            kwargs["delegate_idle_timeout"] = parse_duration(agent["delegate_idle_timeout"],
                                                             "[agent] delegate_idle_timeout")
        if "delegate_total_timeout" in agent:
            kwargs["delegate_total_timeout"] = parse_duration(agent["delegate_total_timeout"],
                                                              "[agent] delegate_total_timeout")
        if "task_timeout" in table:
            kwargs["task_timeout"] = parse_duration(table["task_timeout"], "task_timeout")
        kwargs["max_parallel_delegations"] = clamp_parallel(
            agent.get("max_parallel_delegations"), DEFAULT_PARALLEL_DELEGATIONS, env)
        kwargs["max_parallel_readonly_tools"] = clamp_parallel(
            agent.get("max_parallel_readonly_tools"), DEFAULT_PARALLEL_READONLY_TOOLS, env)
        if "max_in_flight_requests" in llm:
            kwargs["max_in_flight_requests"] = _int(llm, "max_in_flight_requests", "[llm]", DEFAULT_MAX_IN_FLIGHT,
                                                    maximum=10_000)
        kwargs["max_workers"] = _int(daemon, "max_workers", "[daemon]", 32, minimum=1, maximum=10_000)
        kwargs["warm_workers"] = _int(daemon, "warm_workers", "[daemon]", DEFAULT_WARM_WORKERS,
                                      maximum=MAX_WARM_WORKERS)
        kwargs["event_ring"] = _int(daemon, "event_ring", "[daemon]", 20_000, minimum=100, maximum=1_000_000)
        kwargs["event_ring_bytes"] = _int(daemon, "event_ring_bytes", "[daemon]", DEFAULT_RING_BYTES,
                                          minimum=64 * 1024, maximum=1 << 34)
        kwargs["event_ring_total_bytes"] = _int(daemon, "event_ring_total_bytes", "[daemon]",
                                                DEFAULT_RING_TOTAL_BYTES, minimum=1024 * 1024, maximum=1 << 36)
        kwargs["pub_hwm"] = _int(daemon, "pub_hwm", "[daemon]", 100_000, minimum=1, maximum=10_000_000)
        kwargs["event_log_max_bytes"] = _int(daemon, "event_log_max_bytes", "[daemon]", 64 * 1024 * 1024,
                                             minimum=64 * 1024, maximum=2**40)
        if "event_log_retention" in daemon:
            kwargs["event_log_retention"] = parse_duration(daemon["event_log_retention"],
                                                           "[daemon] event_log_retention")
        if "stop_grace" in daemon:
            kwargs["stop_grace"] = parse_duration(daemon["stop_grace"], "[daemon] stop_grace", maximum=600.0)
        if "heartbeat_interval" in daemon:
            kwargs["heartbeat_interval"] = max(0.05, parse_duration(daemon["heartbeat_interval"],
                                                                    "[daemon] heartbeat_interval"))
        if "daemon_loss_timeout" in daemon:
            kwargs["daemon_loss_timeout"] = max(0.2, parse_duration(daemon["daemon_loss_timeout"],
                                                                    "[daemon] daemon_loss_timeout"))
        for key in ("max_cost_per_task", "max_cost_per_day"):
            if key in llm:
                kwargs[key] = _dollars(llm[key], f"[llm] {key}")
        _check_heartbeat(kwargs.get("heartbeat_interval", 1.0), kwargs.get("daemon_loss_timeout", 10.0))
        modules = daemon.get("agent_modules", [])
        if not isinstance(modules, list) or not all(isinstance(m, str) and m.strip() for m in modules):
            raise ValueError("[daemon] agent_modules must be a list of module names, "
                             'e.g. ["my_agents.reviewer"]')
        kwargs["agent_modules"] = tuple(modules)
        kwargs["sandbox"] = parse_sandbox(table)
        kwargs["mcp"] = parse_mcp(table, parse_duration)
        kwargs["codeintel"] = parse_codeintel(table)
        kwargs["browser"] = parse_browser(table, parse_duration)
        llm_config = parse_llm_config(table, env)  # validates the provider tables, expands api_key_env
        ignored: list[str] = []
        kwargs["checkpoints"] = parse_checkpoints(table, parse_duration, ignored)
        run = _run_settings(agent, llm, llm_config, ignored,
                            idle_timeout=kwargs.get("delegate_idle_timeout", DEFAULT_IDLE_TIMEOUT),
                            readonly_tools=kwargs["max_parallel_readonly_tools"])
        run = dataclasses.replace(run, **parse_resume(_section(table, "resume"), parse_duration))
        run = dataclasses.replace(run, blackboard=parse_board(table, parse_duration),
                                  compression=parse_compression(table, env, ignored))
        run = dataclasses.replace(run, skills=parse_skills(table, kwargs["sandbox"].deny_read),
                                  codeintel=kwargs["codeintel"].enabled, blueprint=parse_blueprint(table, env),
                                  browser="" if kwargs["browser"].enabled else BROWSER_OFF)
    except ValueError as exc:
        raise ConfigError(str(exc), path) from None
    _check_tui(table, ignored)
    return Settings(table=table, path=path, warnings=(*config_warnings(table), *ignored), run_settings=run, **kwargs)


def _check_tui(table: Mapping[str, Any], ignored: list[str]) -> None:
    """`[tui] yolo` is the client's; a value it would not take is said here, where every warning is."""
    section = table.get("tui", {})
    if isinstance(section, Mapping) and "yolo" in section and section["yolo"] not in tuple(YoloLevel):
        ignored.append(f"[tui] yolo = {shown_value(section['yolo'])} is not one of "
                       f"{', '.join(y.value for y in YoloLevel)}; the full-screen client asks as with none")


def _check_heartbeat(interval: float, loss_timeout: float) -> None:
    """A worker gives yagentd up after `daemon_loss_timeout` without a ping: pings must come well within it."""
    if interval * 3 > loss_timeout:
        raise ValueError(f"[daemon] heartbeat_interval = {interval:g}s must be at most a third of "
                         f"[daemon] daemon_loss_timeout ({loss_timeout:g}s): a worker that hears nothing from "
                         "yagentd for that long stops its run")


def _whole(section: Mapping[str, Any], key: str, where: str, minimum: int, ignored: list[str],
           maximum: int = 100_000) -> int | None:
    """An integer setting read leniently: a value that is not a whole number between `minimum` and `maximum`
    is reported and left out (the caller's default applies), as workers always did — it never stops the daemon."""
    if key not in section:
        return None
    value = section[key]
    whole = isinstance(value, int) and not isinstance(value, bool) and value >= minimum
    if whole and value <= maximum:
        return value
    problem = f"is more than {maximum}" if whole else f"is not a whole number >= {minimum}"
    ignored.append(f"{where} {key} = {shown_value(value)} {problem}; the default is used")
    return None


def _run_settings(agent: Mapping[str, Any], llm: Mapping[str, Any], resolved: LLMConfig, ignored: list[str], *,
                  idle_timeout: float, readonly_tools: int) -> RunSettings:
    """The settings every worker gets: what `[agent]` and `[llm]` say about running an agent."""
    max_steps = dict(DEFAULT_MAX_STEPS)
    for key in agent:
        if key.endswith("_max_steps") and key != "_max_steps":
            steps = _whole(agent, key, "[agent]", 1, ignored)
            role = key.removesuffix("_max_steps")
            max_steps[role] = steps if steps is not None else DEFAULT_MAX_STEPS.get(role, OTHER_ROLE_MAX_STEPS)
    retries = _whole(llm, "step_retries", "[llm]", 0, ignored, maximum=100)
    threshold = _whole(llm, "circuit_breaker_threshold", "[llm]", 0, ignored, maximum=1000) or 0
    reset = DEFAULT_BREAKER_RESET
    if threshold > 0 and "circuit_breaker_reset_timeout" in llm:  # unread without a breaker, as before
        reset = parse_duration(llm["circuit_breaker_reset_timeout"],
                               "[llm] circuit_breaker_reset_timeout") or DEFAULT_BREAKER_RESET
    # A tool that prints nothing must still beat well within the idle timeout, or its run is stopped as idle.
    beat = DEFAULT_TOOL_HEARTBEAT_INTERVAL
    if idle_timeout > 0:
        beat = min(DEFAULT_TOOL_HEARTBEAT_INTERVAL, max(0.25, idle_timeout / 4))
    return RunSettings(
        max_steps=max_steps,
        step_retries=DEFAULT_STEP_RETRIES if retries is None else retries,
        max_parallel_readonly_tools=readonly_tools,
        tool_heartbeat_interval=beat,
        lang=str(agent.get("lang") or DEFAULT_LANG),
        circuit_breaker_threshold=threshold,
        circuit_breaker_reset=reset,
        llm=resolved,
    )


_NOT_A_FILE_FIX = "replace it with a regular file (or remove it to run on the built-in defaults), then `yagent setup`"


def _file_kind(mode: int) -> str:
    for test, kind in ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory")):
        if test(mode):
            return kind
    return "not a regular file"


def _dangling_link(path: Path) -> Path | None:
    """The symbolic link on the way to `path` that points nowhere, if that is why it is missing."""
    for candidate in (path, *path.parents):
        if candidate.is_symlink() and not candidate.exists():
            return candidate
    return None


def read_config_bytes(path: Path) -> bytes | None:
    """The file's bytes; None when there is no file (built-in defaults apply).

    Only a regular file is read, and at most `MAX_CONFIG_BYTES` of it: opened without blocking, because a
    named pipe would hold the reader until someone writes to it, and a device such as /dev/zero never ends.
    A symbolic link that points nowhere is an error, not a missing file: the settings it was meant to give
    would be silently replaced by the defaults.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        link = _dangling_link(path)
        if link is None:
            return None
        raise ConfigError(f"{link} is a symbolic link to {os.readlink(link)}, which does not exist", path,
                          "point the link at your configuration file, or remove it to run on the built-in "
                          "defaults") from None
    except OSError as exc:
        try:
            mode = os.stat(path).st_mode
        except OSError:
            mode = stat.S_IFREG
        if not stat.S_ISREG(mode):  # a socket cannot even be opened
            raise ConfigError(f"the file is {_file_kind(mode)}, not a regular file", path, _NOT_A_FILE_FIX) from None
        raise ConfigError(f"cannot read the file: {exc.strerror}", path) from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise ConfigError(f"the file is {_file_kind(mode)}, not a regular file", path, _NOT_A_FILE_FIX)
        chunks: list[bytes] = []
        size = 0
        while size <= MAX_CONFIG_BYTES and (chunk := os.read(fd, MAX_CONFIG_BYTES + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise ConfigError(f"cannot read the file: {exc.strerror}", path) from None
    finally:
        os.close(fd)
    if size > MAX_CONFIG_BYTES:
        raise ConfigError(f"the file is larger than {MAX_CONFIG_BYTES // 1024} KiB; a configuration takes a "
                          "few KiB", path, "move the file aside and run `yagent setup` to write a new one")
    return b"".join(chunks)


def _nested_too_deep(table: dict[str, Any]) -> list[str] | None:
    """The key path of a value nested past `MAX_NESTING`, if any (walked without recursion)."""
    stack: list[tuple[Any, list[str]]] = [(table, [])]
    while stack:
        node, where = stack.pop()
        if len(where) > MAX_NESTING:
            return where
        if isinstance(node, dict):
            stack.extend((value, [*where, str(key)]) for key, value in node.items())
        elif isinstance(node, list):
            stack.extend((value, [*where, f"[{i}]"]) for i, value in enumerate(node))
    return None


def parse_config_text(text: str, path: Path | None) -> dict[str, Any]:
    """The TOML table of the file's text; `ConfigError` for a syntax error or nesting past `MAX_NESTING`."""
    deep = f"tables and arrays nest more than {MAX_NESTING} levels deep"
    try:
        table = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"TOML syntax error: {exc}", path) from None
    except RecursionError:
        raise ConfigError(f"{deep}; no setting is more than a few levels down", path) from None
    where = _nested_too_deep(table)
    if where is not None:
        shown = ".".join(where[:4]) + ("…" if len(where) > 4 else "")
        raise ConfigError(f"{deep} (under {shown}); no setting is more than a few levels down", path)
    return table


def read_config_table(path: Path) -> dict[str, Any] | None:
    """The parsed file, None when there is none; `ConfigError` when it cannot be read or parsed."""
    raw = read_config_bytes(path)
    if raw is None:
        return None
    try:
        text = raw.decode("utf-8-sig")  # an editor may have put a byte-order mark first
    except UnicodeDecodeError:
        raise ConfigError("the file is not UTF-8 text", path) from None
    return parse_config_text(text, path)


def load_settings(path: Path, environ: Mapping[str, str] | None = None) -> Settings:
    """Read and validate the file; a missing file means built-in defaults."""
    table = read_config_table(path)
    if table is None:
        return settings_from_table({}, None, environ)
    return settings_from_table(table, path, environ)
