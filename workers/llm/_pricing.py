"""What a model call cost, in US dollars: the provider's `price` if the configuration sets one, else the
catalog's list price for the model the server says answered. Unknown stays unknown (None), never 0."""

from __future__ import annotations

from yagent.ipc.provider_config import LLMConfig, ModelPrice

from ._catalog import ModelCatalog, default_catalog
from ._response import Usage

__all__ = ["call_cost", "price_for"]


def price_for(config: LLMConfig, provider: str, model: str, catalog: ModelCatalog | None = None) -> ModelPrice | None:
    settings = config.providers.get(provider)
    if settings is not None and settings.price is not None:
        return settings.price
    catalog = catalog or default_catalog()
    return catalog.price(model) or (catalog.price(settings.model) if settings is not None else None)


def call_cost(config: LLMConfig, provider: str, model: str, usage: Usage,
              catalog: ModelCatalog | None = None) -> float | None:
    """The call's cost; None when no price is known for it. Estimated usage gives an estimated cost."""
    price = price_for(config, provider, model, catalog)
    if price is None:
        return None
    return price.cost(usage.total_input_tokens, usage.cached_input_tokens, usage.output_tokens)
