"""`[tui]`: what the full-screen client reads of the configuration.

    [tui]
    yolo = "none"      # the yolo level of turns sent from the full-screen client: none | yolo | full

The daemon never acts on it; its keys are declared here so the one registry (`config_keys`) knows them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .vocabulary import YoloLevel

__all__ = ["TUI_KEYS", "tui_yolo"]

TUI_KEYS = ("yolo",)


def tui_yolo(table: Mapping[str, Any]) -> str:
    """`[tui] yolo` when it names a yolo level, else "" (the client's own default applies)."""
    section = table.get("tui", {})
    value = section.get("yolo", "") if isinstance(section, Mapping) else ""
    return value if value in tuple(YoloLevel) else ""
