"""What `/model`, `/mcp`, `/skills` and the status line read from the configuration file.

Read-only and tolerant: a broken file yields an explanation, never an exception, because these
commands run inside a live session (the wizard is where the file gets fixed).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from yagent.ipc.config import SETUP_FIXES_IT, ConfigError, read_config_table, settings_from_table
from yagent.ipc.provider_config import ProviderConfigError, parse_llm_config
from yagent.ipc.sandbox_settings import parse_sandbox
from yagent.ipc.skills_settings import SkillsSettings, parse_skills
from yagent.ipc.tui_settings import tui_yolo

__all__ = ["ConfigFacts", "read_config_facts"]


@dataclass(slots=True)
class ConfigFacts:
    providers: list[str] = field(default_factory=list)
    default_provider: str = ""
    mcp_servers: list[str] = field(default_factory=list)  # one human-readable line each
    skills: SkillsSettings = field(default_factory=SkillsSettings)  # [skills], with [sandbox] deny_read
    yolo: str = ""  # [tui] yolo: the default for turns sent from the TUI
    problem: str = ""  # why part of this could not be read
    warnings: list[str] = field(default_factory=list)  # what in the file nothing reads, as yagentd logs it


def _table(raw: Mapping[str, Any], *path: str) -> Mapping[str, Any]:
    node: Any = raw
    for part in path:
        node = node.get(part, {}) if isinstance(node, Mapping) else {}
    return node if isinstance(node, Mapping) else {}


def read_config_facts(path: Path, environ: Mapping[str, str], home: Path, project: Path | None) -> ConfigFacts:
    facts = ConfigFacts()
    try:
        raw = read_config_table(path) or {}
    except ConfigError as exc:
        fix = "`/setup` or `yagent setup` repairs it" if exc.fix == SETUP_FIXES_IT else exc.fix
        facts.problem = f"{path} cannot be read ({exc.what}); {fix}"
        raw = {}
    try:
        llm = parse_llm_config(raw, environ)
        facts.providers = sorted(llm.providers)
        facts.default_provider = llm.use_provider or (facts.providers[0] if len(facts.providers) == 1 else "")
    except ProviderConfigError as exc:
        # Still list what is declared, so /model can name the broken provider.
        facts.providers = sorted(_table(raw, "global", "llm", "providers"))
        facts.default_provider = str(_table(raw, "global", "llm").get("use_provider", ""))
        facts.problem = facts.problem or f"the provider configuration has problems: {exc.problems[0]}"
    servers = _table(raw, "mcp").get("servers", [])
    if isinstance(servers, list):
        for s in servers:
            if isinstance(s, Mapping):
                target = s.get("command") or s.get("url") or "?"
                if isinstance(target, list):
                    target = " ".join(str(t) for t in target)
                facts.mcp_servers.append(f"{s.get('name', '?')}: {target}")
    try:
        facts.skills = parse_skills(raw, parse_sandbox(raw).deny_read)
    except ValueError as exc:  # the built-in places are still read
        facts.problem = facts.problem or f"{exc}; {SETUP_FIXES_IT}"
    facts.yolo = tui_yolo(raw)
    try:
        settings = settings_from_table(dict(raw), path, environ)
        facts.warnings = [*settings.warnings, *settings.run_settings.llm.warnings]
    except ConfigError as exc:
        facts.problem = facts.problem or f"{path}: {exc.what}"
    return facts

