"""From the resolved configuration to the engine an agent holds (always a RoutingEngine)."""

from __future__ import annotations

import functools
import os
import ssl
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import httpx

from yagent.ipc.provider_config import (
    LLMConfig,
    ProviderConfig,
    ProviderConfigError,
    resolve_provider,
)

from ._anthropic import AnthropicEngine
from ._catalog import ModelCatalog
from ._connect_ahead import ConnectAheadTransport, connects_ahead
from ._engine import PARSED_AHEAD, Engine, HTTPEngine
from ._fallback import FallbackEngine
from ._gate import UNLIMITED_GATE, InFlightGate
from ._openai import OpenAIEngine
from ._retry import RetryPolicy
from ._router import RoutingEngine, assign_tiers

__all__ = ["EngineFactory", "build_engine", "engine_for_provider", "make_client_ahead", "parse_ahead",
           "shared_ssl_context"]


@functools.cache
def shared_ssl_context() -> ssl.SSLContext:
    """One TLS context per process. Building one costs ~20 ms of CPU (loading the CA bundle); the worker
    forkserver builds it once and every forked worker inherits it instead of paying that per run.

    Raises `ProviderConfigError` naming the certificate settings when the CA bundle cannot be loaded."""
    try:
        return httpx.create_ssl_context()
    except (OSError, ssl.SSLError) as exc:
        named = [f"{name}={os.environ[name]!r}" for name in ("SSL_CERT_FILE", "SSL_CERT_DIR") if os.environ.get(name)]
        where = ("; the environment sets " + " and ".join(named) + ": point it at a readable PEM bundle or unset it"
                 if named else "; reinstall certifi (httpx's CA bundle) or set SSL_CERT_FILE to a PEM bundle")
        raise ProviderConfigError([f"the TLS certificate store cannot be loaded ({exc}){where}"]) from exc


def engine_for_provider(provider: ProviderConfig, **kwargs: Any) -> HTTPEngine:
    """The wire-format engine for one provider (no routing, no fallback)."""
    cls = AnthropicEngine if provider.api_format == "anthropic" else OpenAIEngine
    return cls(provider, **kwargs)


def _client_ahead() -> tuple[ConnectAheadTransport, httpx.AsyncClient]:
    transport = ConnectAheadTransport(shared_ssl_context())
    return transport, httpx.AsyncClient(transport=transport)


# A client made while a warm worker waited, for its run's first `EngineFactory`.
_made_ahead: tuple[ConnectAheadTransport, httpx.AsyncClient] | None = None


def make_client_ahead() -> None:
    """Make the HTTP client a run's first `EngineFactory` takes, in a warm worker while it waits: a client and its
    transport are objects only (no socket, no thread, no event loop) until a request or `open_ahead`, and they are
    the same for every provider. Nothing is made where a client cannot connect ahead (proxies)."""
    global _made_ahead
    try:
        if _made_ahead is None and connects_ahead():
            _made_ahead = _client_ahead()
    except ProviderConfigError:
        pass  # the run's `EngineFactory` meets the same error and fails the run with it; the wait goes on


def parse_ahead(providers: Iterable[tuple[str, str]]) -> None:
    """Parse the request address of each (api_format, api_base_url), for a run's engine to take instead of parsing
    it on its way to its first request (a warm worker, while it waits, with the daemon's configured providers). An
    address httpx refuses is left for the run, whose request says what is wrong with it."""
    for api_format, base in providers:
        cls = AnthropicEngine if api_format == "anthropic" else OpenAIEngine
        text = cls.url_for(base)
        try:
            PARSED_AHEAD[text] = httpx.URL(text)
        except Exception:  # a head start only: whatever httpx makes of it, the run's request meets and reports it
            continue


def _take_client_ahead() -> tuple[ConnectAheadTransport, httpx.AsyncClient] | None:
    global _made_ahead
    made, _made_ahead = _made_ahead, None
    return made


class EngineFactory:
    """Builds and caches one engine per provider name, sharing one HTTP client and one gate.

    A provider with `fallback_providers` (and `[llm] enable_fallback`) becomes a FallbackEngine.
    """

    def __init__(self, config: LLMConfig, *, gate: InFlightGate = UNLIMITED_GATE,
                 client: httpx.AsyncClient | None = None, retry: RetryPolicy | None = None,
                 idle_timeout: float | None = None) -> None:
        self.config = config
        self._gate = gate
        # A client of its own can open a run's first connection while the run is still being built (`open_ahead`).
        self._ahead: ConnectAheadTransport | None = None
        self._owns_client = client is None
        if client is None and connects_ahead():
            self._ahead, client = _take_client_ahead() or _client_ahead()
        self._client = client if client is not None else httpx.AsyncClient(verify=shared_ssl_context())
        self._retry = replace(retry or RetryPolicy(), max_retries=config.settings.max_retries)
        self._idle_timeout = config.settings.stall_timeout if idle_timeout is None else idle_timeout
        self._cache: dict[str, Engine] = {}

    def _provider(self, name: str) -> ProviderConfig:
        provider = self.config.providers.get(name)
        if provider is None:
            known = ", ".join(sorted(self.config.providers)) or "none"
            raise ProviderConfigError([f"provider {name!r} is not defined: add [global.llm.providers.{name}] "
                                       f"or choose one of: {known}"])
        provider.require_key()
        return provider

    def _http(self, provider: ProviderConfig) -> HTTPEngine:
        return engine_for_provider(provider, settings=self.config.settings, client=self._client,
                                   gate=self._gate, retry=self._retry, idle_timeout=self._idle_timeout)

    def __call__(self, name: str) -> Engine:
        engine = self._cache.get(name)
        if engine is None:
            provider = self._provider(name)
            primary = self._http(provider)
            engine = primary
            if provider.fallback_providers and self.config.settings.enable_fallback:
                fallbacks = [(self._http(self._provider(ref.provider)), ref.weight)
                             for ref in provider.fallback_providers]
                engine = FallbackEngine(primary, fallbacks, gate=self._gate,
                                        fallback_max_retries=self.config.settings.fallback_max_retries)
            self._cache[name] = engine
        return engine

    def open_ahead(self, engine: Engine) -> bool:
        """Start opening the connection `engine`'s next request will use (one this factory made); False if there is
        nothing to open here: a client passed in, proxies in the environment, an engine of no HTTP provider."""
        if isinstance(engine, FallbackEngine):
            engine = engine.primary
        if self._ahead is None or not isinstance(engine, HTTPEngine):
            return False
        try:
            url = engine.request_url()
        except httpx.InvalidURL:
            return False  # the request says what is wrong with the address, in its own error
        return self._ahead.open_ahead(url, engine.connect_timeout)

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()


def build_engine(config: LLMConfig, agent: str | None = None, tool: str | None = None, *,
                 gate: InFlightGate = UNLIMITED_GATE,
                 override: str | None = None, factory: EngineFactory | None = None,
                 client: httpx.AsyncClient | None = None, retry: RetryPolicy | None = None,
                 catalog: ModelCatalog | None = None) -> RoutingEngine:
    """The engine for an agent (or for an LLM-backed tool run by that agent), wrapped by the router.

    `config` is the configuration as `yagent.ipc` resolved it (a run has it as `settings.llm`): this
    package never reads config.toml. Pass a shared `factory` to reuse connections between one worker's engines.
    """
    configured = resolve_provider(config, agent, tool).name
    owned = factory is None
    engines = factory or EngineFactory(config, gate=gate, client=client, retry=retry)
    role = tool or agent or "default"
    return RoutingEngine(
        role=role,
        configured=configured,
        engines=engines,
        tiers=assign_tiers(list(config.providers.values()), catalog),
        mode=config.routing.mode,
        baseline=config.routing.baselines.get(agent or ""),
        override=override,
        on_close=engines.aclose if owned else None,
    )
