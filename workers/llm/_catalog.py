"""The shipped model catalog (`model_catalog.json`): context window, output limit, score and list price per
model.

Two consumers read context windows with different meanings (see the package README): compression
thresholds come from this catalog, while a provider's `context_window` only feeds the UI's progress bar.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from yagent.ipc.provider_config import ModelPrice

__all__ = ["ModelCatalog", "ModelInfo", "default_catalog", "lookup_model", "normalise_model_name"]

_DATE_SUFFIX = re.compile(r"-(\d{8}|\d{4}-\d{2}-\d{2})(-v\d+)?$")
# Bedrock ids carry the vendor (and a region) as dotted words: "us.anthropic.claude-sonnet-4-5-…-v1:0".
# Only all-letter words followed by a letter count, so versions such as "gpt-4.1" are left alone.
_DOTTED_VENDOR = re.compile(r"^(?:[a-z]+\.)+(?=[a-z])")


def normalise_model_name(name: str) -> str:
    """"anthropic/claude-sonnet-4.5:beta" → "claude-sonnet-4-5"; "gpt-4o-2024-08-06" → "gpt-4o";
    "us.anthropic.claude-sonnet-4-5-20250929-v1:0" → "claude-sonnet-4-5"."""
    text = name.strip().lower().rsplit("/", 1)[-1]
    text = _DOTTED_VENDOR.sub("", text)
    text = text.split("@", 1)[0].split(":", 1)[0]
    text = text.replace(".", "-").replace("_", "-")
    text = _DATE_SUFFIX.sub("", text)
    return text.removesuffix("-latest")


@dataclass(frozen=True, slots=True)
class ModelInfo:
    name: str
    family: str
    context_window: int
    max_output: int
    score: float
    price: ModelPrice | None = None  # list price when the catalog knows it
    images: bool = False  # reads images in a request (a tool result's screenshot is sent as one)


class ModelCatalog:
    """Lookup by model name: exact key, then alias, then the longest key that prefixes the name."""

    def __init__(self, models: Mapping[str, ModelInfo], aliases: Mapping[str, str] | None = None) -> None:
        self._models = dict(models)
        self._aliases = dict(aliases or {})

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ModelCatalog:
        as_of = str(data.get("prices_as_of", ""))
        models = {
            normalise_model_name(key): ModelInfo(name=key, family=str(entry.get("family", "")),
                                                 context_window=int(entry["context_window"]),
                                                 max_output=int(entry.get("max_output", 0)),
                                                 score=float(entry.get("score", 0)),
                                                 price=_price(key, entry.get("price"), as_of),
                                                 images=entry.get("images") is True)
            for key, entry in data.get("models", {}).items()
        }
        aliases = {normalise_model_name(k): normalise_model_name(v) for k, v in data.get("aliases", {}).items()}
        unknown = sorted(a for a, target in aliases.items() if target not in models)
        if unknown:
            raise ValueError(f"model catalog aliases point at unknown models: {unknown}")
        return cls(models, aliases)

    @classmethod
    def load(cls, path: Path) -> ModelCatalog:
        return cls.from_dict(json.loads(path.read_text(encoding="utf-8")))

    def __len__(self) -> int:
        return len(self._models)

    def names(self) -> list[str]:
        return sorted(self._models)

    def price(self, model: str) -> ModelPrice | None:
        """The list price of exactly this model (or an alias of it); None when unknown.

        No prefix fallback here: a model named like a known one ("gpt-4o-audio-preview") may cost something
        else entirely, and a wrong price is worse than none.
        """
        key = normalise_model_name(model)
        found = self._models.get(key) or self._models.get(self._aliases.get(key, ""))
        return found.price if found is not None else None

    def lookup(self, model: str) -> ModelInfo | None:
        """The catalog entry for a configured model name, or None for an unknown model."""
        key = normalise_model_name(model)
        if not key:
            return None
        found = self._models.get(key) or self._models.get(self._aliases.get(key, ""))
        if found is not None:
            return found
        best = ""
        for candidate in self._models:
            if len(candidate) > len(best) and key.startswith(candidate + "-"):
                best = candidate
        return self._models[best] if best else None


def _price(model: str, value: Any, as_of: str) -> ModelPrice | None:
    if value is None:
        return None
    try:
        return ModelPrice(input=float(value["input"]), output=float(value["output"]),
                          cached_input=None if value.get("cached_input") is None else float(value["cached_input"]),
                          as_of=as_of)
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"model catalog: the price of {model} needs numbers input and output ({exc})") from None


@functools.cache
def default_catalog() -> ModelCatalog:
    """The catalog shipped inside the package."""
    text = resources.files(__package__).joinpath("model_catalog.json").read_text(encoding="utf-8")
    return ModelCatalog.from_dict(json.loads(text))


def lookup_model(model: str) -> ModelInfo | None:
    return default_catalog().lookup(model)
