"""The provider part of `config.toml`: which LLM endpoints exist and which one each agent or tool uses.

It works on the plain dict `tomllib` returns, so the daemon (which loads the file) and the client's setup
wizard share one validator. What it resolves is made of records (`records.py`), so the daemon hands it to
every run as it is (`run_settings.RunSettings.llm`); workers never parse the file.

Tables read::

    [global.llm]              use_provider = "NAME"
    [global.llm.providers.NAME]
                              api_base_url, api_key | api_key_env, model, api_format ("openai" | "anthropic"),
                              context_window, temperature, max_tokens, reasoning_effort,
                              fallback_providers = ["other", { provider = "third", weight = 2 }],
                              price = { input = 3.0, cached_input = 0.3, output = 15.0 }  (USD per 1M tokens)
    [agents.llm]              use_provider = "NAME"            (default for every agent)
    [agents.llm.AGENT]        use_provider = "NAME"
    [tools.llm]               use_provider = "NAME"            (default for every LLM-backed tool)
    [tools.llm.TOOL]          use_provider = "NAME"
    [llm]                     timeout, max_retries, enable_fallback, fallback_max_retries
    [routing]                 mode = "auto" | "fixed";  [routing.baselines] AGENT = "fast" | "balanced" | "high"

Zero means "not configured" for `max_tokens` and `context_window` (no model takes zero tokens). For
`temperature` the key's existence decides: `temperature = 0` asks for greedy decoding and is sent as 0, while
a missing key leaves the provider's own default (`ProviderConfig.temperature` is None).

Every number is bounded (`NUMBER_LIMITS`, `MAX_LLM_DURATION`): what is resolved here travels to every
worker through the msgpack codec, which carries 64-bit integers only, and into HTTP timeouts.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Mapping
from dataclasses import field, replace
from typing import Any

from .records import Record, record
from .workflows import WORKFLOW_MODEL_ROLES

__all__ = [
    "AGENT_NAMES",
    "API_FORMATS",
    "DEFAULT_FALLBACK_MAX_RETRIES",
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_TIMEOUT",
    "LLM_REQUEST_KEYS",
    "NO_PROVIDER_ADVICE",
    "PROVIDER_KEYS",
    "REMOVED_PROVIDER_KEYS",
    "ROUTING_KEYS",
    "ROUTING_MODES",
    "TIERS",
    "TOOL_NAMES",
    "FallbackRef",
    "LLMConfig",
    "LLMSettings",
    "ModelPrice",
    "ProviderConfig",
    "ProviderConfigError",
    "RoutingSettings",
    "parse_llm_config",
    "referenced_providers",
    "resolve_provider",
    "resolve_provider_name",
    "shown_value",
    "validate_provider_table",
    "validate_table",
]

API_FORMATS = ("openai", "anthropic")
AGENT_NAMES = ("director", "coding", "repo", "chat", "devops", "browser", "meta")
TOOL_NAMES = ("micro_agent", "thinking", "deepthinking", "design")
TIERS = ("fast", "balanced", "high")
ROUTING_MODES = ("auto", "fixed")
ANTHROPIC_EFFORTS = ("low", "medium", "high", "max")

DEFAULT_TIMEOUT = 600.0
# Silence after which a response counts as stalled; a local server reading a long prompt may need more.
DEFAULT_STALL_TIMEOUT = 120.0
DEFAULT_MAX_RETRIES = 5
DEFAULT_FALLBACK_MAX_RETRIES = 2
# The largest value each whole-number key takes: far above any model or sane retry count, far below what
# the codec and the engines can carry.
NUMBER_LIMITS = {"context_window": 100_000_000, "max_tokens": 10_000_000, "max_retries": 100,
                 "fallback_max_retries": 100, "weight": 1000}
MAX_LLM_DURATION = 86400.0  # [llm] timeout and stall_timeout: a day is already "never" for one request

PROVIDER_KEYS = ("api_base_url", "api_key", "api_key_env", "model", "api_format", "context_window", "temperature",
                 "max_tokens", "reasoning_effort", "fallback_providers", "price")
# Provider keys yagent no longer reads, with what to do instead: a warning each (`config_keys`), never an error.
REMOVED_PROVIDER_KEYS = {
    "aws_region": "Bedrock is no longer special: every provider needs api_base_url and a key (use an "
                  "OpenAI-compatible gateway); delete aws_region",
    "aws_profile": "Bedrock is no longer special: every provider needs api_base_url and a key; delete aws_profile",
    "model_provider": "api_format says which wire format a provider speaks; delete model_provider",
}
LLM_REQUEST_KEYS = ("timeout", "stall_timeout", "max_retries", "enable_fallback", "fallback_max_retries")  # [llm]
ROUTING_KEYS = ("mode",)  # [routing], besides the [routing.baselines] table
# What to do when no provider is usable (`zero_config` says which variables count).
NO_PROVIDER_ADVICE = ("run `yagent setup`, or export OPENAI_API_KEY (OPENAI_BASE_URL alone for a local server such "
                      "as Ollama, llama.cpp or vLLM) or ANTHROPIC_API_KEY in the shell you run yagent from")
_PRICE_KEYS = ("input", "cached_input", "output")
_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")


def shown_value(value: Any, limit: int = 40) -> str:
    """A value as a message quotes it: its repr, cut short so that a huge value cannot flood the terminal."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters)"


class ProviderConfigError(ValueError):
    """One or more problems in the provider configuration; `problems` lists each one on its own."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        if len(self.problems) == 1:
            text = self.problems[0]
        else:
            text = f"{len(self.problems)} problems in the LLM provider configuration:\n" + "\n".join(
                f"  - {p}" for p in self.problems)
        super().__init__(text)


@record
class FallbackRef(Record):
    """One entry of `fallback_providers`; a higher weight makes the provider more likely to be tried first."""

    provider: str
    weight: int = 1


@record
class ModelPrice(Record):
    """List prices in US dollars per million tokens; `cached_input` is what a cache read costs."""

    input: float
    output: float
    cached_input: float | None = None  # not given: cached input costs as much as input
    as_of: str = ""  # when the price was taken (catalog prices), or "" for one the user set

    def cost(self, total_input: int, cached_input: int, output: int) -> float:
        """The cost of one call; `total_input` includes the cached part, as `Usage` counts it."""
        cached = min(max(cached_input, 0), max(total_input, 0))
        cached_rate = self.input if self.cached_input is None else self.cached_input
        return ((total_input - cached) * self.input + cached * cached_rate + output * self.output) / 1_000_000


@record
class ProviderConfig(Record):
    """One `[global.llm.providers.NAME]` table after validation and `api_key_env` expansion.

    `api_key` is left out of `repr` so a logged config never leaks the secret. When `api_key_env`
    names a variable that is not set, `api_key` is empty and `missing_key_env` names the variable.
    """

    name: str
    model: str
    api_base_url: str
    api_key: str = field(default="", repr=False)
    api_key_env: str = ""
    api_format: str = "openai"
    context_window: int = 0
    temperature: float | None = None  # None: not in the file, the provider's default applies
    max_tokens: int = 0
    reasoning_effort: str = ""
    fallback_providers: list[FallbackRef] = field(default_factory=list)
    missing_key_env: str = ""
    missing_key_where: str = ""  # where `missing_key_env` was looked for ("": the environment it was parsed in)
    price: ModelPrice | None = None  # `price = {input = …, cached_input = …, output = …}`: overrides the catalog

    @property
    def usable(self) -> bool:
        return not self.missing_key_env

    def require_key(self) -> None:
        """Raise an actionable error when the key comes from an environment variable that is unset."""
        if self.missing_key_env:
            raise ProviderConfigError([_missing_env_problem(self.name, self.missing_key_env, self.missing_key_where)])


@record
class LLMSettings(Record):
    """`[llm]`: `timeout` is the budget of one logical request (retries included, lease wait excluded)."""

    timeout: float = DEFAULT_TIMEOUT
    stall_timeout: float = DEFAULT_STALL_TIMEOUT  # no byte from the server for this long: retry
    max_retries: int = DEFAULT_MAX_RETRIES
    enable_fallback: bool = True
    fallback_max_retries: int = DEFAULT_FALLBACK_MAX_RETRIES


@record
class RoutingSettings(Record):
    """`[routing]`: `baselines` maps an agent name to the tier it uses when classification fails."""

    mode: str = "auto"
    baselines: dict[str, str] = field(default_factory=dict)


@record
class LLMConfig(Record):
    """Everything the engines need from the configuration file, validated.

    `warnings` are problems that do not stop loading (an unknown agent name, an effort the
    Anthropic format cannot map); callers should show them to the user.
    """

    providers: dict[str, ProviderConfig] = field(default_factory=dict)
    use_provider: str = ""
    agent_providers: dict[str, str] = field(default_factory=dict)
    agents_default: str = ""
    tool_providers: dict[str, str] = field(default_factory=dict)
    tools_default: str = ""
    settings: LLMSettings = field(default_factory=LLMSettings)
    routing: RoutingSettings = field(default_factory=RoutingSettings)
    warnings: list[str] = field(default_factory=list)


def _missing_env_problem(provider: str, variable: str, looked_in: str = "") -> str:
    where = f"[global.llm.providers.{provider}] api_key_env = \"{variable}\""
    if looked_in:  # a turn needs it now
        return (f"{where}, but {variable} is set neither in {looked_in.replace(', then ', ' nor in ')}: export "
                f"{variable} in the shell you run yagent from and send the message again (no restart needed), or "
                "write api_key instead")
    return (f"{where}, which is not set in this environment: a turn that uses this provider takes {variable} from "
            "the environment of the `yagent` command that sends it, then from yagentd's own; export it in the shell "
            "you run yagent from (no restart needed), or write api_key instead")


def _table(raw: Mapping[str, Any], path: tuple[str, ...], problems: list[str]) -> Mapping[str, Any]:
    node: Any = raw
    for i, part in enumerate(path):
        if not isinstance(node, Mapping):
            return {}
        node = node.get(part, {})
        if not isinstance(node, Mapping):
            where = ".".join(path[: i + 1])
            problems.append(f"[{where}] must be a table, found {type(node).__name__}: rewrite it as [{where}]")
            return {}
    return node


def _duration(value: Any, key: str, problems: list[str]) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        problems.append(f"{key} must be a duration such as \"90s\" or \"10m\" (or a number of seconds), "
                        f"found {shown_value(value)}")
        return None
    if isinstance(value, int | float):
        # An integer of hundreds of digits would overflow float(); past the bound its size no longer matters.
        seconds = float(value) if isinstance(value, float) else float(min(value, MAX_LLM_DURATION + 1))
    else:
        text, pos, seconds = value.strip(), 0, 0.0
        for m in _DURATION_PART.finditer(text):
            if m.start() != pos:
                break
            seconds += float(m.group(1)) * {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}[m.group(2)]
            pos = m.end()
        if pos == 0 or pos != len(text):
            problems.append(f"{key} = {shown_value(value)} is not a duration: write e.g. \"90s\", \"10m\" or \"1h30m\"")
            return None
    if not math.isfinite(seconds) or seconds <= 0:
        problems.append(f"{key} must be a positive duration, found {shown_value(value)}")
        return None
    if seconds > MAX_LLM_DURATION:
        problems.append(f"{key} = {shown_value(value)} is longer than a day, the most it may be")
        return None
    return seconds


def _int_key(table: Mapping[str, Any], key: str, where: str, problems: list[str], default: int) -> int:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        problems.append(f"{where} {key} must be a whole number >= 0, found {shown_value(value)}")
        return default
    if value > NUMBER_LIMITS[key]:
        problems.append(f"{where} {key} must be at most {NUMBER_LIMITS[key]:,}, found {shown_value(value)}")
        return default
    return value


def _parse_fallbacks(name: str, value: Any, problems: list[str]) -> list[FallbackRef]:
    where = f"[global.llm.providers.{name}] fallback_providers"
    if not isinstance(value, list):
        problems.append(f"{where} must be a list such as [\"other\", {{ provider = \"third\", weight = 2 }}], "
                        f"found {shown_value(value)}")
        return ()
    refs: list[FallbackRef] = []
    for item in value:
        if isinstance(item, str):
            refs.append(FallbackRef(provider=item))
        elif isinstance(item, Mapping) and isinstance(item.get("provider"), str):
            weight = item.get("weight", 1)
            if isinstance(weight, bool) or not isinstance(weight, int) or weight < 1:
                problems.append(f"{where}: weight of {item['provider']!r} must be a whole number >= 1, "
                                f"found {shown_value(weight)}")
                weight = 1
            elif weight > NUMBER_LIMITS["weight"]:
                problems.append(f"{where}: weight of {item['provider']!r} must be at most "
                                f"{NUMBER_LIMITS['weight']}, found {shown_value(weight)}")
                weight = 1
            extra = set(item) - {"provider", "weight"}
            if extra:
                problems.append(f"{where}: unknown key(s) {sorted(extra)} in the entry for "
                                f"{item['provider']!r}; only provider and weight are read")
            refs.append(FallbackRef(provider=item["provider"], weight=weight))
        else:
            problems.append(f"{where}: entry {item!r} must be a provider name or "
                            f"{{ provider = \"NAME\", weight = N }}")
    return refs


def validate_provider_table(name: str, table: Mapping[str, Any]) -> list[str]:
    """Problems in one provider table, without touching the environment (the setup wizard's form check).

    The wizard's required fields and this function must agree: name, api_base_url, model and one of
    api_key / api_key_env.
    """
    problems: list[str] = []
    where = f"[global.llm.providers.{name}]"
    if not _NAME.match(name):
        problems.append(f"{where}: provider names may use letters, digits, '_', '-' and '.' only; rename it")
    for key in sorted(set(table) - set(PROVIDER_KEYS) - set(REMOVED_PROVIDER_KEYS)):
        close = difflib.get_close_matches(key, PROVIDER_KEYS, n=1, cutoff=0.75) if len(key) <= 64 else []
        near = f"did you mean {close[0]}? " if close else ""
        problems.append(f"{where}: unknown key {shown_value(key)}; {near}the known keys are "
                        f"{', '.join(sorted(PROVIDER_KEYS))}")
    for key in ("api_base_url", "model", "api_key", "api_key_env", "api_format", "reasoning_effort"):
        if key in table and not isinstance(table[key], str):
            problems.append(f"{where} {key} must be a string, found {table[key]!r}")
    url = table.get("api_base_url")
    if not url:
        problems.append(f"{where} api_base_url is missing: set the endpoint, e.g. "
                        f"\"https://api.deepseek.com/v1\" or \"https://api.anthropic.com\"")
    elif isinstance(url, str) and not url.startswith(("http://", "https://")):
        problems.append(f"{where} api_base_url = {url!r} must start with http:// or https://")
    if not table.get("model"):
        problems.append(f"{where} model is missing: set the model name the endpoint expects, "
                        f"e.g. \"deepseek-chat\"")
    has_key, has_env = bool(table.get("api_key")), bool(table.get("api_key_env"))
    if has_key and has_env:
        problems.append(f"{where} sets both api_key and api_key_env: keep only one of them")
    elif not has_key and not has_env:
        problems.append(f"{where} has no credentials: set api_key = \"...\" or api_key_env = \"VARIABLE\" "
                        f"(local servers that ignore keys still need a placeholder such as \"none\")")
    env = table.get("api_key_env")
    if isinstance(env, str) and env and not _ENV_NAME.match(env):
        problems.append(f"{where} api_key_env = {env!r} is not an environment variable name; write the "
                        f"variable's name (e.g. \"DEEPSEEK_API_KEY\"), not its value")
    fmt = table.get("api_format", "openai")
    if isinstance(fmt, str) and fmt not in API_FORMATS:
        problems.append(f"{where} api_format = {fmt!r} is not supported: use \"openai\" (any "
                        f"OpenAI-compatible server) or \"anthropic\"")
    for key in ("context_window", "max_tokens"):
        if key in table:
            _int_key(table, key, where, problems, 0)
    if "temperature" in table:
        temp = table["temperature"]
        if isinstance(temp, bool) or not isinstance(temp, int | float) or not 0 <= temp <= 2:
            problems.append(f"{where} temperature must be a number between 0 and 2, found {shown_value(temp)}")
    if "fallback_providers" in table:
        refs = _parse_fallbacks(name, table["fallback_providers"], problems)
        if any(r.provider == name for r in refs):
            problems.append(f"{where} fallback_providers lists the provider itself; remove {name!r} from it")
    if "price" in table:
        _parse_price(where, table["price"], problems)
    return problems


def _parse_price(where: str, value: Any, problems: list[str]) -> ModelPrice | None:
    """`price = {input = 0.27, cached_input = 0.07, output = 1.10}`, dollars per million tokens."""
    example = "price = { input = 3.0, cached_input = 0.3, output = 15.0 } (US dollars per million tokens)"
    if not isinstance(value, Mapping):
        problems.append(f"{where} price must be a table: {example}")
        return None
    unknown = sorted(set(value) - set(_PRICE_KEYS))
    if unknown:
        problems.append(f"{where} price has unknown keys {', '.join(unknown)}: {example}")
    rates: dict[str, float] = {}
    for key in _PRICE_KEYS:
        if key not in value:
            continue
        rate = value[key]
        if isinstance(rate, bool) or not isinstance(rate, int | float) or not math.isfinite(rate) or rate < 0:
            problems.append(f"{where} price.{key} must be a number of dollars per million tokens, 0 or more; "
                            f"found {rate!r}")
            return None
        rates[key] = float(rate)
    if "input" not in rates or "output" not in rates:
        problems.append(f"{where} price needs both input and output: {example}")
        return None
    return ModelPrice(input=rates["input"], output=rates["output"], cached_input=rates.get("cached_input"))


def _provider(name: str, table: Mapping[str, Any], environ: Mapping[str, str],
              problems: list[str], warnings: list[str]) -> ProviderConfig | None:
    own = validate_provider_table(name, table)
    problems.extend(own)
    if own:
        return None
    api_format = table.get("api_format", "openai")
    effort = table.get("reasoning_effort", "")
    if api_format == "anthropic" and effort and effort not in ANTHROPIC_EFFORTS:
        warnings.append(f"[global.llm.providers.{name}] reasoning_effort = {effort!r} is not one of "
                        f"{', '.join(ANTHROPIC_EFFORTS)}: extended thinking stays off for this provider")
    key, env_name, missing = table.get("api_key", ""), table.get("api_key_env", ""), ""
    if env_name:
        key = environ.get(env_name, "")
        if not key:
            missing = env_name
    return ProviderConfig(
        name=name,
        model=table["model"],
        api_base_url=table["api_base_url"].rstrip("/"),
        api_key=key,
        api_key_env=env_name,
        api_format=api_format,
        context_window=table.get("context_window", 0),
        temperature=float(table["temperature"]) if "temperature" in table else None,
        max_tokens=table.get("max_tokens", 0),
        reasoning_effort=effort,
        fallback_providers=_parse_fallbacks(name, table.get("fallback_providers", []), []),
        missing_key_env=missing,
        price=_parse_price("", table["price"], []) if "price" in table else None,
    )


def _use_provider(table: Mapping[str, Any], where: str, problems: list[str]) -> str:
    value = table.get("use_provider", "")
    if not isinstance(value, str):
        problems.append(f"{where} use_provider must be a provider name (a string), found {shown_value(value)}")
        return ""
    return value


def _per_name(table: Mapping[str, Any], section: str, known: tuple[str, ...],
              problems: list[str], warnings: list[str]) -> dict[str, str]:
    chosen: dict[str, str] = {}
    for name, sub in table.items():
        if name == "use_provider":
            continue
        where = f"[{section}.{name}]"
        if not isinstance(sub, Mapping):
            problems.append(f"[{section}] {name} must be a table such as {name}.use_provider = \"NAME\", "
                            f"found {sub!r}")
            continue
        if name not in known:
            warnings.append(f"{where} is not a known name ({', '.join(known)}); it only applies if something "
                            f"asks for {name!r} by that exact name")
        value = _use_provider(sub, where, problems)
        if value:
            chosen[name] = value
    return chosen


def _settings(raw: Mapping[str, Any], problems: list[str]) -> LLMSettings:
    llm = _table(raw, ("llm",), problems)
    timeout = DEFAULT_TIMEOUT
    if "timeout" in llm:
        timeout = _duration(llm["timeout"], "[llm] timeout", problems) or DEFAULT_TIMEOUT
    stall = DEFAULT_STALL_TIMEOUT
    if "stall_timeout" in llm:
        stall = _duration(llm["stall_timeout"], "[llm] stall_timeout", problems) or DEFAULT_STALL_TIMEOUT
    enable = llm.get("enable_fallback", True)
    if not isinstance(enable, bool):
        problems.append(f"[llm] enable_fallback must be true or false, found {enable!r}")
        enable = True
    return LLMSettings(
        timeout=timeout,
        stall_timeout=stall,
        max_retries=_int_key(llm, "max_retries", "[llm]", problems, DEFAULT_MAX_RETRIES),
        enable_fallback=enable,
        fallback_max_retries=_int_key(llm, "fallback_max_retries", "[llm]", problems,
                                      DEFAULT_FALLBACK_MAX_RETRIES),
    )


def _routing(raw: Mapping[str, Any], problems: list[str], warnings: list[str]) -> RoutingSettings:
    routing = _table(raw, ("routing",), problems)
    mode = routing.get("mode", "auto")
    if mode not in ROUTING_MODES:
        problems.append(f"[routing] mode = {mode!r} is not supported: use \"auto\" (pick a tier per task) "
                        f"or \"fixed\" (always the configured provider)")
        mode = "auto"
    baselines: dict[str, str] = {}
    for agent, tier in _table(raw, ("routing", "baselines"), problems).items():
        if tier not in TIERS:
            problems.append(f"[routing.baselines] {agent} = {tier!r} is not a tier: use one of "
                            f"{', '.join(repr(t) for t in TIERS)}")
            continue
        if agent not in AGENT_NAMES:
            warnings.append(f"[routing.baselines] {agent!r} is not a known agent ({', '.join(AGENT_NAMES)})")
        baselines[agent] = tier
    return RoutingSettings(mode=mode, baselines=baselines)


def referenced_providers(config: LLMConfig) -> list[str]:
    """Every provider name a use_provider or fallback_providers entry points at, in first-seen order."""
    names: list[str] = []
    for name in (config.use_provider, config.agents_default, config.tools_default,
                 *config.agent_providers.values(), *config.tool_providers.values()):
        if name and name not in names:
            names.append(name)
    for provider in config.providers.values():
        for ref in provider.fallback_providers:
            if ref.provider not in names:
                names.append(ref.provider)
    return names


def parse_llm_config(raw: Mapping[str, Any], environ: Mapping[str, str]) -> LLMConfig:
    """Validate the provider-related tables of a parsed config file and expand `api_key_env` once.

    Raises `ProviderConfigError` listing every problem. A provider whose `api_key_env` variable is
    unset is an error only when something references it; otherwise it is kept with `missing_key_env`
    set and fails when it is actually resolved.
    """
    problems: list[str] = []
    warnings: list[str] = []
    global_llm = _table(raw, ("global", "llm"), problems)
    providers: dict[str, ProviderConfig] = {}
    for name, table in _table(raw, ("global", "llm", "providers"), problems).items():
        if not isinstance(table, Mapping):
            problems.append(f"[global.llm.providers] {name} must be a table [global.llm.providers.{name}], "
                            f"found {table!r}")
            continue
        provider = _provider(name, table, environ, problems, warnings)
        if provider is not None:
            providers[name] = provider
    agents = _table(raw, ("agents", "llm"), problems)
    tools = _table(raw, ("tools", "llm"), problems)
    config = LLMConfig(
        providers=providers,
        use_provider=_use_provider(global_llm, "[global.llm]", problems),
        agent_providers=_per_name(agents, "agents.llm", (*AGENT_NAMES, *WORKFLOW_MODEL_ROLES), problems, warnings),
        agents_default=_use_provider(agents, "[agents.llm]", problems),
        tool_providers=_per_name(tools, "tools.llm", TOOL_NAMES, problems, warnings),
        tools_default=_use_provider(tools, "[tools.llm]", problems),
        settings=_settings(raw, problems),
        routing=_routing(raw, problems, warnings),
    )
    declared = set(_table(raw, ("global", "llm", "providers"), []))
    for name in referenced_providers(config):
        if name not in declared:
            known = ", ".join(sorted(declared)) or "none are defined"
            problems.append(f"provider {name!r} is used but not defined: add [global.llm.providers.{name}] "
                            f"or point use_provider/fallback_providers at one of: {known}")
        elif name in providers and providers[name].missing_key_env:
            # Only the process that calls the provider needs the key: a client started from another shell
            # must still attach, and a daemon must still start (each request then says what is missing).
            warnings.append(_missing_env_problem(name, providers[name].missing_key_env))
    if providers and not config.use_provider and len(providers) > 1:
        problems.append(f"[global.llm] use_provider is missing and {len(providers)} providers are defined: "
                        f"set use_provider to one of {', '.join(sorted(providers))}")
    if problems:
        raise ProviderConfigError(problems)
    return replace(config, warnings=list(warnings))


def validate_table(raw: Mapping[str, Any], environ: Mapping[str, str]) -> None:
    """Check the provider tables only; raises `ProviderConfigError` (a ValueError) listing every problem."""
    parse_llm_config(raw, environ)


def resolve_provider_name(config: LLMConfig, agent: str | None = None, tool: str | None = None) -> str:
    """tool's own → `[tools.llm] use_provider` → agent's own → `[agents.llm] use_provider` → global."""
    candidates: list[str] = []
    if tool is not None:
        candidates += [config.tool_providers.get(tool, ""), config.tools_default]
    if agent is not None:
        candidates += [config.agent_providers.get(agent, ""), config.agents_default]
    candidates.append(config.use_provider)
    for name in candidates:
        if name:
            return name
    if len(config.providers) == 1:
        return next(iter(config.providers))
    if not config.providers:
        raise ProviderConfigError([f"no LLM provider is configured, and none is in the environment: "
                                   f"{NO_PROVIDER_ADVICE}"])
    raise ProviderConfigError([f"no provider chosen: set [global.llm] use_provider to one of "
                               f"{', '.join(sorted(config.providers))}"])


def resolve_provider(config: LLMConfig, agent: str | None = None, tool: str | None = None) -> ProviderConfig:
    """The provider an agent (or a tool run by it) talks to; its key must be available."""
    name = resolve_provider_name(config, agent, tool)
    provider = config.providers.get(name)
    if provider is None:
        raise ProviderConfigError([f"provider {name!r} is not defined: add [global.llm.providers.{name}]"])
    provider.require_key()
    return provider
