"""`[blueprint]`: the repository blueprint, read by the config's one parser.

    [blueprint]
    enable = true                       # false (or YAGENT_BLUEPRINT=0 in yagentd's environment): no blueprint at all
    inject_into = ["director", "repo"]  # agents whose system prompt carries the modules-and-edges shape
    index_max_tokens = 1500             # the most that shape takes of a prompt (its header says what was cut)
    prose_budget_tokens = 2000          # what read_blueprint gives per page, and a delegation's module prose (>= 100)

The one predicate is `BlueprintSettings.enabled`, resolved here from the key and the switch together: the parser,
every reader and the one writer (the Repo agent's completion) ask it and nothing else. `export_path` (the seed's
export layer) is not built and is reported as not supported yet (`config_keys.NOT_YET_KEYS`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from typing import Any

from .provider_config import shown_value
from .records import Record, record

__all__ = ["BLUEPRINT_KEYS", "BLUEPRINT_SWITCH", "DEFAULT_INJECT_INTO", "INJECTABLE_AGENTS", "BlueprintSettings",
           "parse_blueprint"]

BLUEPRINT_KEYS = ("enable", "inject_into", "index_max_tokens", "prose_budget_tokens")
BLUEPRINT_SWITCH = "YAGENT_BLUEPRINT"  # "0": the blueprint is off whatever the file says
INJECTABLE_AGENTS = ("director", "coding", "repo", "chat", "devops", "custom")
DEFAULT_INJECT_INTO = ("director", "repo")
_MAX_TOKENS = 200_000


@record
class BlueprintSettings(Record):
    """The resolved `[blueprint]` table; `enabled` already holds the kill switch."""

    enabled: bool = True
    inject_into: list[str] = field(default_factory=lambda: list(DEFAULT_INJECT_INTO))
    index_max_tokens: int = 1500  # 0: the shape is injected nowhere
    prose_budget_tokens: int = 2000


def parse_blueprint(table: Mapping[str, Any], environ: Mapping[str, str]) -> BlueprintSettings:
    """The `[blueprint]` table; ValueError saying what is wrong and how to write it."""
    section = table.get("blueprint", {})
    if not isinstance(section, Mapping):
        raise ValueError("[blueprint] must be a table")
    enable = section.get("enable", True)
    if not isinstance(enable, bool):
        raise ValueError(f"[blueprint] enable must be true or false, got {shown_value(enable)}")
    inject = section.get("inject_into", list(DEFAULT_INJECT_INTO))
    if not isinstance(inject, list) or not all(isinstance(a, str) for a in inject):
        raise ValueError('[blueprint] inject_into must be a list of agent names, e.g. ["director", "repo"]')
    unknown = [a for a in inject if a not in INJECTABLE_AGENTS]
    if unknown:
        raise ValueError(f"[blueprint] inject_into names {', '.join(shown_value(a) for a in unknown[:3])}, which is "
                         f"not one of {', '.join(INJECTABLE_AGENTS)}")
    return BlueprintSettings(
        enabled=enable and environ.get(BLUEPRINT_SWITCH, "").strip() != "0",
        inject_into=list(dict.fromkeys(inject)),
        index_max_tokens=_tokens(section, "index_max_tokens", 1500, 0),
        prose_budget_tokens=_tokens(section, "prose_budget_tokens", 2000, 100))


def _tokens(section: Mapping[str, Any], key: str, default: int, low: int) -> int:
    value = section.get(key, default)
    high = _MAX_TOKENS
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"[blueprint] {key} must be a whole number of tokens from {low} to {high}, got "
                         f"{shown_value(value)}")
    return value
