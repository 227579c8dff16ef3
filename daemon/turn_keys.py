"""The keys and the provider one turn runs with, from the variables its submit carried (`ipc.caller_keys`).

A submit (or a `continue` that resumes a turn) carries the caller's values of the variables the configuration
names and of the zero-config ones. `TurnKeySource.for_turn` checks them (only those names; bounded values) and,
when no provider is configured, picks the zero-config provider from them merged over yagentd's own environment,
asking the server's /models when the model is not otherwise known. The result lives in the turn's controller,
in memory only, and every run of the turn — delegations included — gets its settings through `TurnKeys.llm_for`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from yagent.ipc.caller_keys import CallerKeysError, accepted, variables_to_send, with_caller_keys
from yagent.ipc.config import Settings
from yagent.ipc.provider_config import LLMConfig
from yagent.ipc.shown_url import shown_url
from yagent.ipc.vocabulary import ErrorCode
from yagent.ipc.zero_config import (
    ZERO_CONFIG_VARIABLES,
    ZeroConfig,
    ZeroConfigError,
    offered_families,
    zero_config,
)

from .model_listing import ModelLister, ModelListingError

__all__ = ["TurnKeyError", "TurnKeySource", "TurnKeys", "daemon_env_provider"]

log = logging.getLogger(__name__)


class TurnKeyError(Exception):
    """The turn cannot start with these variables; `code` is the error code of the refusal."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class TurnKeys:
    caller: Mapping[str, str] = field(default_factory=dict)  # the caller's values, never written anywhere
    zero: ZeroConfig | None = None  # the provider picked without configuration, for every run of the turn

    def llm_for(self, config: LLMConfig, environ: Mapping[str, str] | None = None) -> LLMConfig:
        """The LLM settings a run of this turn gets: keys from the caller, then from yagentd's environment."""
        return with_caller_keys(config, self.caller, os.environ if environ is None else environ, self.zero)

    def __repr__(self) -> str:  # a logged turn must not show the values
        return f"TurnKeys(variables={sorted(self.caller)}, zero={self.zero.family if self.zero else None})"


def daemon_env_provider(environ: Mapping[str, str] | None = None) -> str:
    """The zero-config provider yagentd's own environment offers ("" none): clients learn it from the hello."""
    families = offered_families(os.environ if environ is None else environ)
    return families[0] if families else ""


class TurnKeySource:
    """Turns submitted variables into `TurnKeys`; owns the /models cache and says each zero-config pick once."""

    def __init__(self, lister: ModelLister | None = None) -> None:
        self.lister = lister or ModelLister()
        self._said: set[str] = set()

    async def for_turn(self, settings: Settings, sent: Any, environ: Mapping[str, str] | None = None) -> TurnKeys:
        env = os.environ if environ is None else environ
        try:
            caller = accepted(sent, variables_to_send(settings.table))
        except CallerKeysError as exc:
            raise TurnKeyError(ErrorCode.BAD_REQUEST, str(exc)) from None
        if settings.run_settings.llm.providers:
            return TurnKeys(caller)
        merged = {**{name: env[name] for name in ZERO_CONFIG_VARIABLES if env.get(name)}, **caller}
        try:
            zero = zero_config(merged, frozenset(caller))
        except ZeroConfigError as exc:
            raise TurnKeyError(ErrorCode.BAD_CONFIG, str(exc)) from None
        if zero is None:  # an agent kind that needs no model may still run; one that does fails saying so
            return TurnKeys(caller)
        if not zero.provider.model:
            provider = zero.provider
            key = merged.get(provider.api_key_env, "") if provider.api_key_env else provider.api_key
            try:
                zero = zero.with_model(await self.lister.model_for(provider.api_base_url, provider.api_format, key))
            except ModelListingError as exc:
                raise TurnKeyError(ErrorCode.BAD_CONFIG,
                                   f"no provider is configured and the model for "
                                   f"{shown_url(provider.api_base_url)} is not known: {exc}") from None
        line = zero.describe()
        if line not in self._said:
            self._said.add(line)
            log.info("%s", line)
        return TurnKeys(caller, zero)
