"""Keys from the caller: the `yagent` command that sends a turn sends the values of the variables the configuration
names, and that turn's runs use them.

The client sends, with each submit (and each `continue` that resumes a turn), the values of the variables
`api_key_env` names and of the zero-config ones (`zero_config.ZERO_CONFIG_VARIABLES`) that are set in its
environment — nothing else (`collect`). The daemon takes only those names (`accepted`): a submit naming any other
variable is refused, so it cannot be used to put arbitrary values into a run's environment or settings, and every
value is bounded and free of control characters. The values live in the daemon's memory for the turn and reach
the turn's runs inside their settings (`with_caller_keys`), over the worker socket; they are never written to
disk, logs, events or the registry. yagentd's own environment is the fallback (a daemon started by systemd with
`set-environment`), so a variable exported after yagentd started needs no restart.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import replace
from typing import Any

from .provider_config import LLMConfig, ProviderConfig
from .zero_config import ZERO_CONFIG_VARIABLES, ZeroConfig

__all__ = [
    "CALLER_AND_DAEMON",
    "MAX_VALUE_BYTES",
    "MAX_VARIABLES",
    "CallerKeysError",
    "accepted",
    "collect",
    "variables_to_send",
    "with_caller_keys",
]

MAX_VALUE_BYTES = 16 * 1024  # far above any API key or URL; a bigger value is a mistake or an attack
MAX_VARIABLES = 64
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# Where a key variable is looked for at a turn, in order (the missing-key error says it).
CALLER_AND_DAEMON = "the environment of the `yagent` command that sent this turn, then yagentd's own"


class CallerKeysError(ValueError):
    """What is wrong with the variables a submit carried; names them, never their values."""


def variables_to_send(table: Mapping[str, Any]) -> tuple[str, ...]:
    """The variables a client sends for a configuration (a parsed config.toml): every `api_key_env` of a provider
    table that names a variable, then the zero-config ones. Read leniently: the file is the daemon's to judge."""
    names: list[str] = []
    glob = table.get("global")
    llm = glob.get("llm") if isinstance(glob, Mapping) else None
    providers = llm.get("providers") if isinstance(llm, Mapping) else None
    for provider in providers.values() if isinstance(providers, Mapping) else ():
        name = provider.get("api_key_env") if isinstance(provider, Mapping) else None
        if isinstance(name, str) and _ENV_NAME.match(name) and name not in names:
            names.append(name)
    return (*names, *(n for n in ZERO_CONFIG_VARIABLES if n not in names))


def collect(names: Collection[str], environ: Mapping[str, str]) -> dict[str, str]:
    """The values to send: those of `names` set (non-empty) in `environ`."""
    return {name: environ[name] for name in names if environ.get(name)}


def accepted(sent: Any, allowed: Collection[str]) -> dict[str, str]:
    """The variables of a submit, checked: only `allowed` names, text values of bounded size without control
    characters. `CallerKeysError` otherwise, naming the variable but never quoting its value."""
    if not isinstance(sent, Mapping):
        raise CallerKeysError("env must be a map of variable names to values")
    if len(sent) > MAX_VARIABLES:
        raise CallerKeysError(f"env carries {len(sent)} variables; a turn takes at most {MAX_VARIABLES}")
    keys: dict[str, str] = {}
    for name, value in sent.items():
        shown = name if isinstance(name, str) and _ENV_NAME.match(name) else repr(name)[:60]
        if not isinstance(name, str) or name not in allowed:
            raise CallerKeysError(f"env names {shown}, which is neither an api_key_env of the configuration nor a "
                                  "zero-config variable; yagentd takes only those")
        if not isinstance(value, str):
            raise CallerKeysError(f"the value of {name} must be text")
        if len(value.encode("utf-8", "surrogatepass")) > MAX_VALUE_BYTES:
            raise CallerKeysError(f"the value of {name} is longer than {MAX_VALUE_BYTES // 1024} KiB; no key or URL is "
                                  "that long — check what the variable holds")
        if _CONTROL.search(value):
            raise CallerKeysError(f"the value of {name} holds a control character (a NUL, a newline, …); no key or "
                                  "URL does — check what the variable holds")
        if value:
            keys[name] = value
    return keys


def _expanded(provider: ProviderConfig, caller: Mapping[str, str], daemon_env: Mapping[str, str]) -> ProviderConfig:
    variable = provider.api_key_env
    if not variable:
        return provider
    key = caller.get(variable) or daemon_env.get(variable, "")
    return replace(provider, api_key=key, missing_key_env="" if key else variable,
                   missing_key_where="" if key else CALLER_AND_DAEMON)


def with_caller_keys(config: LLMConfig, caller: Mapping[str, str], daemon_env: Mapping[str, str],
                     zero: ZeroConfig | None = None) -> LLMConfig:
    """The LLM configuration one turn's runs get: every `api_key_env` looked up in the caller's variables, then in
    yagentd's environment; with no provider configured, the zero-config one (`zero`) as the only provider."""
    if zero is not None and not config.providers:
        config = replace(config, providers={zero.provider.name: zero.provider}, use_provider=zero.provider.name)
    providers = {name: _expanded(p, caller, daemon_env) for name, p in config.providers.items()}
    return replace(config, providers=providers)
