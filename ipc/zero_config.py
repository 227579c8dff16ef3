"""Zero-config start: with no provider in config.toml, the usual variables of the caller's environment are enough.

    OPENAI_API_KEY and/or OPENAI_BASE_URL    an OpenAI-compatible endpoint (a local server — Ollama, llama.cpp,
                                             vLLM — needs only the URL; its key is a placeholder)
    ANTHROPIC_API_KEY (+ ANTHROPIC_BASE_URL) Anthropic's Messages API
    YAGENT_PROVIDER = openai | anthropic     which one, when both are set (otherwise OpenAI first)
    YAGENT_MODEL                             the model; else the default below for the provider's own endpoint,
                                             else the first chat model the server's /models lists

The variables come from the `yagent` command that sends the turn, then from yagentd's own environment
(`caller_keys`). The daemon and the client both decide with this module (the client, before starting anything,
whether any provider is usable at all); the model listing is the daemon's (`daemon/model_listing.py`), because
it may need a key only the daemon's environment holds. What was picked is said once, in `describe`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from .provider_config import NO_PROVIDER_ADVICE, ProviderConfig
from .shown_url import shown_url

__all__ = [
    "DEFAULT_BASE_URLS",
    "DEFAULT_MODELS",
    "FAMILY_VARIABLES",
    "LOCAL_KEY_PLACEHOLDER",
    "NO_PROVIDER_ADVICE",
    "PROVIDER_ORDER",
    "ZERO_CONFIG_VARIABLES",
    "ZeroConfig",
    "ZeroConfigError",
    "offered_families",
    "zero_config",
]

PROVIDER_ORDER = ("openai", "anthropic")  # the fixed order when both are offered and YAGENT_PROVIDER says nothing
FAMILY_VARIABLES = {"openai": ("OPENAI_API_KEY", "OPENAI_BASE_URL"),
                    "anthropic": ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")}
ZERO_CONFIG_VARIABLES = (*FAMILY_VARIABLES["openai"], *FAMILY_VARIABLES["anthropic"], "YAGENT_PROVIDER",
                         "YAGENT_MODEL")
DEFAULT_BASE_URLS = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com"}
# The model for each provider's own endpoint when YAGENT_MODEL is not set. Both are in the workers' model catalog
# (`workers/llm/model_catalog.json`, so their context window and price are known; a test keeps them there); they
# live here because the daemon, which may not import the workers, picks them.
DEFAULT_MODELS = {"openai": "gpt-4o-mini", "anthropic": "claude-sonnet-4-5"}
# The key of an endpoint that wants none (a local server): every provider has one, so nothing special-cases it.
# `yagent setup`'s local presets write the same word.
LOCAL_KEY_PLACEHOLDER = "none"



class ZeroConfigError(ValueError):
    """A zero-config variable that cannot be used as it is; the message says which and what to write."""


@dataclass(frozen=True, slots=True)
class ZeroConfig:
    """The provider the environment offers. `model` is "" when the server's /models must be asked."""

    family: str
    provider: ProviderConfig
    base_from: str  # the variable the URL came from, or "" for the provider's own endpoint
    model_from: str  # "YAGENT_MODEL", "default" (DEFAULT_MODELS) or "" (still to be listed)
    from_caller: bool  # the deciding variables came from the caller's environment (else yagentd's)

    def with_model(self, model: str) -> ZeroConfig:
        return replace(self, provider=replace(self.provider, model=model), model_from="listed")

    def describe(self) -> str:
        """The one line that says what was picked and from where."""
        p = self.provider
        kind = "Anthropic" if self.family == "anthropic" else "OpenAI-compatible"
        where = f"{self.base_from}" if self.base_from else "its default address"
        whose = "your environment" if self.from_caller else "yagentd's environment"
        model_why = {"YAGENT_MODEL": "YAGENT_MODEL",
                     "default": "the default for this provider; YAGENT_MODEL picks another",
                     "listed": "the first chat model the server lists; YAGENT_MODEL picks another",
                     }.get(self.model_from, "")
        key = "no key" if p.api_key == LOCAL_KEY_PLACEHOLDER and not p.api_key_env else p.api_key_env
        return (f"no provider is configured, so yagent uses the {kind} endpoint {shown_url(p.api_base_url)} ({where}, "
                f"{key}; from {whose}) with model {p.model} ({model_why}); `yagent setup` makes a provider permanent")


def _set(env: Mapping[str, str], name: str) -> str:
    return env.get(name, "").strip()


def offered_families(env: Mapping[str, str]) -> list[str]:
    """The providers the environment's variables offer, in the fixed order (Anthropic needs its key)."""
    found = []
    if _set(env, "OPENAI_API_KEY") or _set(env, "OPENAI_BASE_URL"):
        found.append("openai")
    if _set(env, "ANTHROPIC_API_KEY"):
        found.append("anthropic")
    return found


def _url(value: str, variable: str) -> str:
    if not value.startswith(("http://", "https://")) or len(value) > 2048 or any(c.isspace() for c in value):
        raise ZeroConfigError(f"{variable} = {value[:60]!r} is not an http(s) URL; write e.g. "
                              f"\"http://localhost:11434/v1\", or unset it")
    return value.rstrip("/")


def zero_config(env: Mapping[str, str], caller_names: frozenset[str] = frozenset()) -> ZeroConfig | None:
    """The provider `env` offers (the caller's variables merged over yagentd's), None when it offers none.
    `caller_names`: the variables that came from the caller, to say whose environment was used."""
    families = offered_families(env)
    if not families:
        return None
    wanted = _set(env, "YAGENT_PROVIDER").lower()
    if wanted and wanted not in PROVIDER_ORDER:
        raise ZeroConfigError(f"YAGENT_PROVIDER = {wanted[:40]!r} is not a provider yagent starts without a "
                              f"configuration; write openai or anthropic")
    if wanted and wanted not in families:
        needs = " or ".join(FAMILY_VARIABLES[wanted][:1 if wanted == "anthropic" else 2])
        raise ZeroConfigError(f"YAGENT_PROVIDER = {wanted} but {needs} is not set; export it, or unset "
                              "YAGENT_PROVIDER")
    family = wanted or families[0]
    key_var, base_var = FAMILY_VARIABLES[family]
    base = _set(env, base_var)
    url = _url(base, base_var) if base else DEFAULT_BASE_URLS[family]
    own_endpoint = url == DEFAULT_BASE_URLS[family]
    model, model_from = _set(env, "YAGENT_MODEL"), "YAGENT_MODEL"
    if not model:
        model, model_from = (DEFAULT_MODELS[family], "default") if own_endpoint else ("", "")
    has_key = bool(_set(env, key_var))
    provider = ProviderConfig(
        name=family, model=model, api_base_url=url, api_format=family,
        api_key="" if has_key else LOCAL_KEY_PLACEHOLDER, api_key_env=key_var if has_key else "")
    deciding = {key_var if has_key else base_var}
    return ZeroConfig(family=family, provider=provider, base_from=base_var if base else "", model_from=model_from,
                      from_caller=bool(deciding & caller_names))
