"""`[enhanced_commander]`: context compression, read by the daemon's one config parser.

    [enhanced_commander]
    enable_context_compression = true     # the one switch of all three tiers (absent = on)
    context_compression_threshold = 0     # tokens; caps the catalog's window x 0.75 (0, negative or absent = no cap)
    tool_result_keep_tokens = 200         # what a tool result cut by the first tier keeps of itself
    enable_ultimate_compression = true    # the third tier; absent = on, false = really off
    ultimate_compression_keep_plans = 0   # thought/plan blocks the third tier rebuilds from (0 = all)

Both switches default to on, so their meaning comes from the key's existence: a missing key is "on", a written
`false` is "off" (never read back as the default). `YAGENT_COMPRESS_THRESHOLD` (read here, and only here, from
the environment the settings are built in) replaces the threshold outright, for debugging; a value that is not
a positive whole number is ignored with a warning. The values reach workers resolved, in
`RunSettings.compression`; the worker takes the minimum with the model catalog's window, which only it knows
(the model is chosen in the run: routing, /model).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .provider_config import shown_value
from .records import Record, record

__all__ = ["COMPRESSION_KEYS", "COMPRESS_THRESHOLD_ENV", "DEFAULT_TOOL_RESULT_KEEP_TOKENS", "CompressionSettings",
           "parse_compression"]

COMPRESSION_KEYS = ("enable_context_compression", "context_compression_threshold", "tool_result_keep_tokens",
                    "enable_ultimate_compression", "ultimate_compression_keep_plans")
COMPRESS_THRESHOLD_ENV = "YAGENT_COMPRESS_THRESHOLD"
DEFAULT_TOOL_RESULT_KEEP_TOKENS = 200
# Ten million tokens: far past any model's window; a bigger number is a typo, not a setting.
_MAX_TOKENS = 10_000_000
_MAX_PLANS = 100_000


@record
class CompressionSettings(Record):
    """The resolved `[enhanced_commander]` values; every field already means exactly what it says."""

    enabled: bool = True  # enable_context_compression: off = no tier ever runs
    threshold: int = 0  # context_compression_threshold; 0 = no configured cap (the catalog alone)
    threshold_override: int = 0  # YAGENT_COMPRESS_THRESHOLD; 0 = not set
    tool_result_keep_tokens: int = DEFAULT_TOOL_RESULT_KEEP_TOKENS
    ultimate_enabled: bool = True  # enable_ultimate_compression
    ultimate_keep_plans: int = 0  # ultimate_compression_keep_plans; 0 = every plan


def _switch(section: Mapping[str, Any], key: str) -> bool:
    if key not in section:
        return True
    value = section[key]
    if not isinstance(value, bool):
        raise ValueError(f"[enhanced_commander] {key} must be true or false, got {shown_value(value)}")
    return value


def _whole(section: Mapping[str, Any], key: str, default: int, *, negative_means_default: bool,
           maximum: int) -> int:
    if key not in section:
        return default
    value = section[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"[enhanced_commander] {key} must be a whole number, got {shown_value(value)}; "
                         f"remove the key for the default ({default})")
    if value < 0:
        if negative_means_default:
            return default
        raise ValueError(f"[enhanced_commander] {key} must not be negative, got {shown_value(value)}")
    if value > maximum:
        raise ValueError(f"[enhanced_commander] {key} must be at most {maximum:,}, got {shown_value(value)}")
    return value


def _override(environ: Mapping[str, str], warnings: list[str]) -> int:
    raw = environ.get(COMPRESS_THRESHOLD_ENV, "").strip()
    if not raw:
        return 0
    if raw.isdigit() and 0 < int(raw) <= _MAX_TOKENS:
        return int(raw)
    warnings.append(f"{COMPRESS_THRESHOLD_ENV}={shown_value(raw)} is not a whole number of tokens from 1 to "
                    f"{_MAX_TOKENS:,}; it is ignored and the configured threshold applies")
    return 0


def parse_compression(table: Mapping[str, Any], environ: Mapping[str, str], warnings: list[str]
                      ) -> CompressionSettings:
    """`[enhanced_commander]` resolved; `ValueError` naming the key for a value that cannot be meant. A problem
    that does not stop the daemon (a bad `YAGENT_COMPRESS_THRESHOLD`) is added to `warnings`."""
    section = table.get("enhanced_commander", {})
    if not isinstance(section, Mapping):
        raise ValueError("[enhanced_commander] must be a table")
    return CompressionSettings(
        enabled=_switch(section, "enable_context_compression"),
        threshold=_whole(section, "context_compression_threshold", 0, negative_means_default=True,
                         maximum=_MAX_TOKENS),
        threshold_override=_override(environ, warnings),
        tool_result_keep_tokens=_whole(section, "tool_result_keep_tokens", DEFAULT_TOOL_RESULT_KEEP_TOKENS,
                                       negative_means_default=False, maximum=_MAX_TOKENS),
        ultimate_enabled=_switch(section, "enable_ultimate_compression"),
        ultimate_keep_plans=_whole(section, "ultimate_compression_keep_plans", 0, negative_means_default=False,
                                   maximum=_MAX_PLANS),
    )
