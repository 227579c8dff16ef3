"""The settings a worker runs with, resolved from the configuration file before the run starts.

`yagent.ipc.config.settings_from_table` (the one parser of config.toml) builds a `RunSettings` next to the
daemon's own `Settings`; the daemon hands it to every run in `RunSpec.settings`. Workers read nothing
else of the configuration: no TOML table crosses into a worker, so a key has one parser and one
meaning. Third-party agent kinds (`[daemon] agent_modules`) read `spec.settings` the same way.

The LLM part travels as records (`ResolvedLLM` → `ResolvedProvider` → `ResolvedFallback`) because the
engines' `LLMConfig` holds mappings and tuples the codec does not carry; `ResolvedLLM.config()` gives
the engines their `LLMConfig` back, field for field. Keys named by `api_key_env` are already expanded
from the environment the settings were built in; a variable that was not set leaves `missing_key_env`
named, and only a run that calls that provider fails, saying what to export.
"""

from __future__ import annotations

from dataclasses import field

from .provider_config import (
    DEFAULT_FALLBACK_MAX_RETRIES,
    DEFAULT_MAX_RETRIES,
    DEFAULT_STALL_TIMEOUT,
    DEFAULT_TIMEOUT,
    FallbackRef,
    LLMConfig,
    LLMSettings,
    ProviderConfig,
    RoutingSettings,
)
from .records import Record, record

__all__ = [
    "DEFAULT_BREAKER_RESET",
    "DEFAULT_LANG",
    "DEFAULT_MAX_STEPS",
    "DEFAULT_PARALLEL_READONLY_TOOLS",
    "DEFAULT_STEP_RETRIES",
    "DEFAULT_TOOL_HEARTBEAT_INTERVAL",
    "OTHER_ROLE_MAX_STEPS",
    "ResolvedFallback",
    "ResolvedLLM",
    "ResolvedProvider",
    "RunSettings",
]

# `[agent] <role>_max_steps`, per agent role; a role not listed here (a third-party agent) gets OTHER_ROLE_MAX_STEPS.
DEFAULT_MAX_STEPS = {"director": 100, "coding": 150, "repo": 50, "chat": 50, "devops": 50, "custom": 15}
OTHER_ROLE_MAX_STEPS = 50
DEFAULT_STEP_RETRIES = 2  # `[llm] step_retries`: a failed model step is tried again this many times
DEFAULT_PARALLEL_READONLY_TOOLS = 4  # `[agent] max_parallel_readonly_tools`
# A long-running tool beats this often at most, and at least four times per `[agent] delegate_idle_timeout`.
DEFAULT_TOOL_HEARTBEAT_INTERVAL = 5.0
DEFAULT_LANG = "English"  # `[agent] lang`: the language agents answer in
DEFAULT_BREAKER_RESET = 60.0  # `[llm] circuit_breaker_reset_timeout`


@record
class ResolvedFallback(Record):
    """One `fallback_providers` entry."""

    provider: str
    weight: int = 1


@record
class ResolvedProvider(Record):
    """One `[global.llm.providers.NAME]` table, validated, its key expanded (`ProviderConfig` on the wire)."""

    name: str
    model: str
    api_base_url: str
    api_key: str = field(default="", repr=False)  # never in a logged repr
    api_key_env: str = ""
    api_format: str = "openai"
    context_window: int = 0
    temperature: float = 0.0
    max_tokens: int = 0
    reasoning_effort: str = ""
    fallback_providers: list[ResolvedFallback] = field(default_factory=list)
    missing_key_env: str = ""  # the api_key_env variable that was not set; the provider fails when used

    @classmethod
    def of(cls, provider: ProviderConfig) -> ResolvedProvider:
        return cls(name=provider.name, model=provider.model, api_base_url=provider.api_base_url,
                   api_key=provider.api_key, api_key_env=provider.api_key_env, api_format=provider.api_format,
                   context_window=provider.context_window, temperature=provider.temperature,
                   max_tokens=provider.max_tokens, reasoning_effort=provider.reasoning_effort,
                   fallback_providers=[ResolvedFallback(provider=ref.provider, weight=ref.weight)
                                       for ref in provider.fallback_providers],
                   missing_key_env=provider.missing_key_env)

    def config(self) -> ProviderConfig:
        return ProviderConfig(name=self.name, model=self.model, api_base_url=self.api_base_url,
                              api_key=self.api_key, api_key_env=self.api_key_env, api_format=self.api_format,
                              context_window=self.context_window, temperature=self.temperature,
                              max_tokens=self.max_tokens, reasoning_effort=self.reasoning_effort,
                              fallback_providers=tuple(FallbackRef(ref.provider, ref.weight)
                                                       for ref in self.fallback_providers),
                              missing_key_env=self.missing_key_env)


@record
class ResolvedLLM(Record):
    """The provider part of the file as `parse_llm_config` resolved it (`LLMConfig` on the wire)."""

    providers: list[ResolvedProvider] = field(default_factory=list)
    use_provider: str = ""
    agent_providers: dict[str, str] = field(default_factory=dict)
    agents_default: str = ""
    tool_providers: dict[str, str] = field(default_factory=dict)
    tools_default: str = ""
    timeout: float = DEFAULT_TIMEOUT
    stall_timeout: float = DEFAULT_STALL_TIMEOUT
    max_retries: int = DEFAULT_MAX_RETRIES
    enable_fallback: bool = True
    fallback_max_retries: int = DEFAULT_FALLBACK_MAX_RETRIES
    routing_mode: str = "auto"
    routing_baselines: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, config: LLMConfig) -> ResolvedLLM:
        s = config.settings
        return cls(providers=[ResolvedProvider.of(p) for p in config.providers.values()],
                   use_provider=config.use_provider, agent_providers=dict(config.agent_providers),
                   agents_default=config.agents_default, tool_providers=dict(config.tool_providers),
                   tools_default=config.tools_default, timeout=s.timeout, stall_timeout=s.stall_timeout,
                   max_retries=s.max_retries, enable_fallback=s.enable_fallback,
                   fallback_max_retries=s.fallback_max_retries, routing_mode=config.routing.mode,
                   routing_baselines=dict(config.routing.baselines), warnings=list(config.warnings))

    def config(self) -> LLMConfig:
        """The engines' view (`yagent.workers.llm.build_engine` takes it)."""
        return LLMConfig(
            providers={p.name: p.config() for p in self.providers},
            use_provider=self.use_provider, agent_providers=dict(self.agent_providers),
            agents_default=self.agents_default, tool_providers=dict(self.tool_providers),
            tools_default=self.tools_default,
            settings=LLMSettings(timeout=self.timeout, stall_timeout=self.stall_timeout, max_retries=self.max_retries,
                                 enable_fallback=self.enable_fallback, fallback_max_retries=self.fallback_max_retries),
            routing=RoutingSettings(mode=self.routing_mode, baselines=dict(self.routing_baselines)),
            warnings=tuple(self.warnings))


@record
class RunSettings(Record):
    """What one run needs of the configuration, each value already normalised the one way it is meant."""

    max_steps: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_MAX_STEPS))  # per agent role
    step_retries: int = DEFAULT_STEP_RETRIES
    max_parallel_readonly_tools: int = DEFAULT_PARALLEL_READONLY_TOOLS  # clamped; 1 under YAGENT_CONCURRENCY=0
    tool_heartbeat_interval: float = DEFAULT_TOOL_HEARTBEAT_INTERVAL  # from `[agent] delegate_idle_timeout`
    lang: str = DEFAULT_LANG
    circuit_breaker_threshold: int = 0  # failures in a row that open a provider's breaker; 0 = no breaker
    circuit_breaker_reset: float = DEFAULT_BREAKER_RESET  # seconds an open breaker waits before one probe
    llm: ResolvedLLM = field(default_factory=ResolvedLLM)

    def max_steps_for(self, role: str) -> int:
        return self.max_steps.get(role, OTHER_ROLE_MAX_STEPS)
