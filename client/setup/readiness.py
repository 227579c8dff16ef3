"""Does this installation need the setup wizard? Judged from the configuration file alone.

There is no "wizard already shown" marker: a second source of truth would drift from the file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from yagent.ipc.config import ConfigError, read_config_table
from yagent.ipc.provider_config import ProviderConfigError, parse_llm_config, resolve_provider_name
from yagent.ipc.zero_config import offered_families

__all__ = ["SetupNeed", "needs_setup"]

_PLACEHOLDERS = ("your-key", "your_api_key", "your-api-key", "sk-xxx", "sk-...", "changeme", "<key>")


@dataclass(frozen=True, slots=True)
class SetupNeed:
    kind: str  # fresh | no_provider | placeholder_key
    reason: str


def needs_setup(path: Path, environ: Mapping[str, str]) -> SetupNeed | None:
    """Why the wizard should run before the first task, or None. A broken file is not judged here:
    the caller reports it (three lines, exit 2) because the wizard cannot guess what was meant."""
    try:
        raw = read_config_table(path)
    except ConfigError:
        return None
    if raw is None:
        return SetupNeed("fresh", f"there is no configuration file yet ({path})")
    try:
        config = parse_llm_config(raw, environ)
    except ProviderConfigError:
        return None
    if not config.providers:
        if offered_families(environ):  # zero-config: the shell's OPENAI_* / ANTHROPIC_* variables are enough
            return None
        return SetupNeed("no_provider", f"no LLM provider is configured in {path}")
    try:
        name = resolve_provider_name(config, agent="director")
    except ProviderConfigError as exc:
        return SetupNeed("no_provider", str(exc))
    provider = config.providers.get(name)
    if provider is None:
        return SetupNeed("no_provider", f"provider {name!r} is used but not defined in {path}")
    if provider.missing_key_env:
        # Judged where the key is used: the daemon may well have it even though this shell does not.
        return None
    if not provider.api_key_env and provider.api_key.strip().lower() in _PLACEHOLDERS:
        return SetupNeed("placeholder_key", f"provider {provider.name} still has the placeholder key "
                                            f"{provider.api_key!r}")
    return None
