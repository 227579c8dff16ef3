"""Which tables and keys `config.toml` may hold, and a warning for everything else in the file.

Every table module declares its keys (`RESUME_KEYS`, `SANDBOX_KEYS`, `BLACKBOARD_KEYS`, `PROVIDER_KEYS`, …); this
registry joins them into one tree (`SCHEMA`). `config_warnings(table)` walks a parsed file against it and says, a
line each, what nothing reads — so a typo, a key in the wrong table, a key yagent removed or a table whose feature
is not built yet is named instead of silently doing nothing (a value that loads but changes nothing is the failure
this exists for):

- a key that belongs to another table: where it belongs (`misplaced`);
- an unknown key or table: that it does nothing, and the nearest known name if one is close;
- a removed key or table: what replaced it (`REMOVED_*`);
- a table (or key) of a feature not built yet: that it is not supported yet (`NOT_YET`).

`config.py` parses the top level, `[agent]`, `[llm]` and `[daemon]` itself; their keys are declared here, because
`config.py` imports this module.

A table's module declares its keys (`RESUME_KEYS`, `COMPRESSION_KEYS`, …) and `SCHEMA` names them; a seed table
whose feature is not built is listed in `NOT_YET_TABLES`. `tests/ipc/test_every_key.py` asks for a test of each
key's effect: an entry in its `EFFECTS`.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .blueprint_settings import BLUEPRINT_KEYS
from .board_settings import BLACKBOARD_KEYS
from .browser_settings import BROWSER_KEYS
from .checkpoint_settings import GIT_CHECKPOINT_KEYS
from .codeintel_settings import CODESEEK_KEYS
from .compression_settings import COMPRESSION_KEYS
from .mcp_settings import MCP_KEYS
from .provider_config import LLM_REQUEST_KEYS, PROVIDER_KEYS, REMOVED_PROVIDER_KEYS, ROUTING_KEYS, shown_value
from .resume_settings import RESUME_KEYS
from .sandbox_settings import SANDBOX_KEYS
from .skills_settings import SKILLS_KEYS
from .tui_settings import TUI_KEYS

__all__ = [
    "AGENT_KEYS",
    "DAEMON_TABLE_KEYS",
    "LLM_LIMIT_KEYS",
    "MAX_STEPS_ROLES",
    "REMOVED_KEYS",
    "REMOVED_TABLES",
    "SCHEMA",
    "TOP_LEVEL_KEYS",
    "TableSpec",
    "config_warnings",
    "known_key_paths",
    "misplaced_keys",
]

TOP_LEVEL_KEYS = ("task_timeout",)
# `[agent]`, besides one `<role>_max_steps` per agent role.
AGENT_KEYS = ("delegate_idle_timeout", "delegate_total_timeout", "max_parallel_delegations",
              "max_parallel_readonly_tools", "lang")
# The roles a `<role>_max_steps` key is read for, built in; a third-party agent kind (`[daemon] agent_modules`)
# brings its own role names, which yagentd cannot list.
MAX_STEPS_ROLES = ("director", "coding", "repo", "chat", "devops", "browser", "meta", "custom")
# `[llm]` keys the daemon and the runs' loop read (`provider_config.LLM_REQUEST_KEYS` are the engines').
LLM_LIMIT_KEYS = ("max_in_flight_requests", "max_cost_per_task", "max_cost_per_day", "step_retries",
                  "circuit_breaker_threshold", "circuit_breaker_reset_timeout")
DAEMON_TABLE_KEYS = ("max_workers", "warm_workers", "event_ring", "event_ring_bytes", "event_ring_total_bytes",
                     "pub_hwm", "stop_grace", "heartbeat_interval", "daemon_loss_timeout", "event_log_max_bytes",
                     "event_log_retention", "agent_modules")

# Seed tables of features this system does not have yet: (what is missing). Reported once per table.
NOT_YET_TABLES: Mapping[str, str] = {
    "keywords": "keyword routing is not built yet",
    "tools.deferred": "deferred tool loading is not configurable yet",
    "tui.keybindings": "the full-screen client's keys cannot be rebound yet",
}
# Keys of supported tables that name a missing feature.
NOT_YET_KEYS: Mapping[tuple[str, str], str] = {
    ("blueprint", "export_path"): "the blueprint's export layer is not built (read it with `yagent blueprint`)",
}

# Tables yagent once read and dropped: what to do instead.
REMOVED_TABLES: Mapping[str, str] = {
    "app": "its one key was never acted on; delete the table",
    "context": "it was never read; compression settings live in [enhanced_commander]; delete the table",
    "codeseek.knowledge": "knowledge injection was removed with all five of its keys; delete the table",
}
# Keys yagent once read and dropped, by table ("*" = in any table): what replaced them.
REMOVED_KEYS: Mapping[tuple[str, str], str] = {
    ("enhanced_commander", "enable"): "enable_context_compression is the one switch; delete enable",
    ("browser", "headless"): 'write mode = "headless" (or "headful", "attach") instead',
    ("browser", "browser_path"): "write chrome_path instead",
    ("browser", "binary_path"): "yagent drives Chromium itself, with no browser-control program; delete it "
                                "(chrome_path names the browser)",
    ("browser", "cdp_port_base"): "yagent talks to its Chromium over a pipe, never a debugging port; delete it",
    ("browser", "cdp_timeout"): "command_timeout bounds each browser call; delete it",
    ("browser", "workspace_root"): "downloads go to the run's scratch directory and profiles under profile_dir; "
                                   "delete it",
    **{("global.llm.providers.*", key): hint for key, hint in REMOVED_PROVIDER_KEYS.items()},
    ("*", "enable_streaming"): "responses are always streamed; delete it",
    ("*", "auto_checkpoint"): "it only ever printed a warning; delete it",
}


@dataclass(frozen=True)
class TableSpec:
    """One table: its keys, its sub-tables by name, and `any_table` for tables under names the user picks
    (providers). `any_key`: every key is a name the table's own parser judges (`[routing.baselines]`)."""

    keys: tuple[str, ...] = ()
    tables: Mapping[str, TableSpec] = field(default_factory=dict)
    any_table: TableSpec | None = None
    any_key: bool = False
    key_suffix: str = ""  # `[agent]`: `<role>_max_steps`
    not_yet: str = ""  # set: the table's feature is not built; nothing in it is read


_USE_PROVIDER = TableSpec(keys=("use_provider",))

SCHEMA = TableSpec(keys=TOP_LEVEL_KEYS, tables={
    "global": TableSpec(tables={"llm": TableSpec(keys=("use_provider",), tables={
        "providers": TableSpec(any_table=TableSpec(keys=PROVIDER_KEYS))})}),
    # Any name: a third-party agent kind brings its own; provider_config warns about names it does not know.
    "agents": TableSpec(tables={"llm": TableSpec(keys=("use_provider",), any_table=_USE_PROVIDER)}),
    "tools": TableSpec(tables={"llm": TableSpec(keys=("use_provider",), any_table=_USE_PROVIDER),
                               "deferred": TableSpec(not_yet=NOT_YET_TABLES["tools.deferred"])}),
    "agent": TableSpec(keys=AGENT_KEYS, key_suffix="_max_steps"),
    "llm": TableSpec(keys=(*LLM_REQUEST_KEYS, *LLM_LIMIT_KEYS)),
    "routing": TableSpec(keys=ROUTING_KEYS, tables={"baselines": TableSpec(any_key=True)}),
    "daemon": TableSpec(keys=DAEMON_TABLE_KEYS),
    "sandbox": TableSpec(keys=SANDBOX_KEYS),
    "resume": TableSpec(keys=RESUME_KEYS),
    "blackboard": TableSpec(keys=BLACKBOARD_KEYS),
    "tui": TableSpec(keys=TUI_KEYS, tables={"keybindings": TableSpec(not_yet=NOT_YET_TABLES["tui.keybindings"])}),
    "enhanced_commander": TableSpec(keys=COMPRESSION_KEYS),
    "mcp": TableSpec(keys=MCP_KEYS),  # each [[mcp.servers]] entry's keys are judged by ipc/mcp_settings.py itself
    "skills": TableSpec(keys=SKILLS_KEYS),
    "codeseek": TableSpec(keys=CODESEEK_KEYS),  # the built-in code server
    "browser": TableSpec(keys=BROWSER_KEYS),  # the Browser agent's Chromium
    "git_checkpoint": TableSpec(keys=GIT_CHECKPOINT_KEYS),  # the seed's keys that would disturb git are warned
    "blueprint": TableSpec(keys=BLUEPRINT_KEYS),
    **{name: TableSpec(not_yet=what) for name, what in NOT_YET_TABLES.items() if "." not in name},
})


_PLAIN_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def _name(part: str) -> str:
    """A name as a warning quotes it: plain names as they are, others quoted and cut short, so that a key of
    control characters or megabytes cannot garble or flood the log and the terminal."""
    return part if _PLAIN_NAME.match(part) else shown_value(part, 48)


def _shown(path: tuple[str, ...]) -> str:
    return ".".join(_name(part) for part in path)


def _pattern(path: tuple[str, ...], schema: TableSpec = SCHEMA) -> str:
    """The table's registry name: `global.llm.providers.*` for any provider table."""
    out: list[str] = []
    node: TableSpec | None = schema
    for part in path:
        if node is not None and part in node.tables:
            node, name = node.tables[part], part
        elif node is not None and node.any_table is not None:
            node, name = node.any_table, "*"
        else:
            node, name = None, part
        out.append(name)
    return ".".join(out)


def known_key_paths(schema: TableSpec = SCHEMA) -> list[tuple[str, str]]:
    """(table, key) for every key the registry knows, tables by registry name ("" = the top level)."""
    found: list[tuple[str, str]] = []
    stack: list[tuple[str, TableSpec]] = [("", schema)]
    while stack:  # depth first, in the order the tables are declared
        name, spec = stack.pop()
        if spec.not_yet:
            continue
        found += [(name, key) for key in spec.keys]
        children = list(spec.tables.items()) + ([("*", spec.any_table)] if spec.any_table else [])
        stack += reversed([(f"{name}.{child}" if name else child, sub) for child, sub in children])
    return found


def _homes(schema: TableSpec) -> dict[str, list[str]]:
    """Key → the tables it is read in, for telling a misplaced key from an unknown one."""
    homes: dict[str, list[str]] = {}
    for table, key in known_key_paths(schema):
        homes.setdefault(key, []).append(table)
    return homes


_HOMES = _homes(SCHEMA)


def _where(table: str) -> str:
    return "at the top level, before any [section]" if table == "" else f"in [{table.replace('*', 'NAME')}]"


def _label(path: tuple[str, ...], key: str) -> str:
    return f"[{_shown(path)}] {_name(key)}" if path else f"{_name(key)} (at the top level)"


def _nearest(name: str, candidates: list[str]) -> str:
    if len(name) > 64:  # no setting is named anything like it
        return ""
    close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.75)
    return f"; did you mean {close[0]}?" if close else ""


def _removed_hint(pattern: str, key: str) -> str | None:
    return REMOVED_KEYS.get((pattern, key)) or REMOVED_KEYS.get(("*", key))


class _Walk:
    def __init__(self, schema: TableSpec, agent_modules: bool) -> None:
        self.schema = schema
        self.agent_modules = agent_modules  # third-party roles exist: a `<role>_max_steps` cannot be judged
        self.found: list[str] = []

    def table(self, path: tuple[str, ...], spec: TableSpec, values: Mapping[str, Any]) -> None:
        pattern = _pattern(path, self.schema)
        if spec.not_yet:
            removed: list[str] = []
            for key, value in values.items():  # a removed key or table there is still worth its replacement
                inner = f"{pattern}.{key}"
                if isinstance(value, Mapping) and inner in REMOVED_TABLES:
                    removed.append(f"[{_shown((*path, key))}] was removed: {REMOVED_TABLES[inner]}")
                elif (hint := _removed_hint(pattern, key)) is not None:
                    removed.append(f"{_label(path, key)} was removed: {hint}")
            if len(removed) < len(values):  # something there is not merely removed
                self.found.append(f"[{_shown(path)}] is not supported yet: {spec.not_yet}, so nothing in it has "
                                  "an effect; remove it, or keep it for when it is")
            self.found += removed
            return
        for key, value in values.items():
            sub_path = (*path, key)
            if isinstance(value, Mapping) and key not in spec.keys:
                self._sub_table(sub_path, spec, value)
            else:
                self._key(path, pattern, spec, key)

    def _sub_table(self, path: tuple[str, ...], parent: TableSpec, value: Mapping[str, Any]) -> None:
        name = path[-1]
        pattern = _pattern(path, self.schema)
        if pattern in REMOVED_TABLES:
            self.found.append(f"[{_shown(path)}] was removed: {REMOVED_TABLES[pattern]}")
            return
        sub = parent.tables.get(name) or parent.any_table
        if sub is not None:
            self.table(path, sub, value)
        elif parent.any_key:
            return  # the table's own parser judges its names (and says what it does not know)
        else:
            near = _nearest(name, [*parent.tables, *parent.keys])
            self.found.append(f"[{_shown(path)}] is not a table yagent knows, so nothing in it is read{near}")

    def _key(self, path: tuple[str, ...], pattern: str, spec: TableSpec, key: str) -> None:
        if key in spec.keys or (spec.any_key and (pattern, key) not in NOT_YET_KEYS):
            return
        not_yet = NOT_YET_KEYS.get((pattern, key))
        if not_yet is not None:
            self.found.append(f"{_label(path, key)} is not supported yet: {not_yet}, so it has no effect")
            return
        hint = _removed_hint(pattern, key)
        if hint is not None:
            self.found.append(f"{_label(path, key)} was removed: {hint}")
            return
        if spec.key_suffix and key.endswith(spec.key_suffix) and key != spec.key_suffix:
            role = key.removesuffix(spec.key_suffix)
            if role in MAX_STEPS_ROLES or self.agent_modules:
                return
            roles = [f"{r}{spec.key_suffix}" for r in MAX_STEPS_ROLES]
            self.found.append(f"{_label(path, key)} names no agent yagent has ({', '.join(MAX_STEPS_ROLES)}; "
                              f"[daemon] agent_modules adds others), so it does nothing{_nearest(key, roles)}")
            return
        homes = [t for t in _HOMES.get(key, []) if t != pattern]
        if homes:
            belongs = " or ".join(_where(t) for t in homes[:3]) + (", …" if len(homes) > 3 else "")
            self.found.append(f"{_label(path, key)} has no effect there: it belongs {belongs}")
            return
        if spec.key_suffix and key == spec.key_suffix.lstrip("_"):
            self.found.append(f"{_label(path, key)} is not a setting yagent knows, so it does nothing; the limit is "
                              f"per agent: {', '.join(f'{r}{spec.key_suffix}' for r in MAX_STEPS_ROLES)}")
            return
        candidates = [*spec.keys, *spec.tables]
        if spec.key_suffix:
            candidates += [f"{r}{spec.key_suffix}" for r in MAX_STEPS_ROLES]
        self.found.append(f"{_label(path, key)} is not a setting yagent knows, so it does nothing"
                          f"{_nearest(key, candidates)}")


def config_warnings(table: Mapping[str, Any], schema: TableSpec = SCHEMA) -> list[str]:
    """A line for everything in the parsed file that nothing reads, in the file's order."""
    daemon = table.get("daemon")
    modules = isinstance(daemon, Mapping) and bool(daemon.get("agent_modules"))
    walk = _Walk(schema, agent_modules=modules)
    walk.table((), schema, table)
    return walk.found


def misplaced_keys(table: Mapping[str, Any]) -> list[str]:
    """The lines of `config_warnings` about keys that belong in another table."""
    return [line for line in config_warnings(table) if ": it belongs " in line]
