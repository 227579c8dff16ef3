"""Where compression starts: the smaller of the model catalog's window x 0.75 and the configured cap.

Both sources are caps and either may be missing: no configured cap (0) leaves the catalog alone, a model the
catalog does not know leaves the configured cap alone, and with neither the threshold is 120 000 tokens.
`YAGENT_COMPRESS_THRESHOLD` (resolved by the daemon's config parser into `threshold_override`) replaces the
result outright. A provider's own `context_window` setting takes no part: it only sizes the UI's gauge.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from yagent.ipc.compression_settings import CompressionSettings

__all__ = ["CATALOG_SHARE", "DEFAULT_THRESHOLD", "Threshold", "resolve_threshold"]

CATALOG_SHARE = 0.75  # of the catalog's window: room for the reply, the tool definitions and the next results
DEFAULT_THRESHOLD = 120_000


@dataclass(frozen=True, slots=True)
class Threshold:
    tokens: int
    source: str  # "env" | "config" | "catalog" | "default": where the number came from, for the gauge
    window: int = 0  # the catalog's context window of the model; 0 = unknown


def resolve_threshold(model: str, settings: CompressionSettings, window_of: Callable[[str], int | None]
                      ) -> Threshold:
    """The threshold for a call to `model`; `window_of` is the catalog's context window lookup (None: unknown)."""
    window = window_of(model) or 0
    if settings.threshold_override > 0:
        return Threshold(settings.threshold_override, "env", window)
    catalog = int(window * CATALOG_SHARE) if window > 0 else 0
    configured = settings.threshold if settings.threshold > 0 else 0
    if catalog and configured:
        return Threshold(configured, "config", window) if configured < catalog else Threshold(catalog, "catalog",
                                                                                               window)
    if configured:
        return Threshold(configured, "config", window)
    if catalog:
        return Threshold(catalog, "catalog", window)
    return Threshold(DEFAULT_THRESHOLD, "default", window)
