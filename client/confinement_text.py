"""How clients say why a run is not confined by the kernel (the daemon sends an `Unconfined` value)."""

from __future__ import annotations

from yagent.ipc.vocabulary import Unconfined

__all__ = ["unconfined_text"]

_TEXT = {
    Unconfined.SANDBOX_OFF: '[sandbox] mode = "off"',
    Unconfined.FULL_YOLO: "--full-yolo",
    Unconfined.LANDLOCK_MISSING: "no Landlock on this kernel",
}


def unconfined_text(reason: str) -> str:
    """`reason` for a person; a value this client does not know (a newer daemon's) as it came."""
    try:
        return _TEXT[Unconfined(reason)]
    except ValueError:
        return reason
