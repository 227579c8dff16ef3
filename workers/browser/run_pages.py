"""The pages of one run (a browser session): its tabs in order, the current one, and what happened to them between
two tool calls (a dialog answered, a request blocked, a download saved, a tab a page opened) — told to the model
with the next result. Bounded: a page that floods events keeps only the newest notes.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["MAX_NOTES", "RunPages"]

MAX_NOTES = 20


@dataclass(slots=True)
class RunPages:
    session: str
    pages: list[Any] = field(default_factory=list)  # playwright Page objects, in the order they opened
    current: Any = None
    downloads: Path | None = None  # the run's scratch directory
    notes: collections.deque[str] = field(default_factory=lambda: collections.deque(maxlen=MAX_NOTES))
    last_action: str = ""

    def adopt(self, page: Any, *, make_current: bool) -> None:
        if page not in self.pages:
            self.pages.append(page)
        if make_current or self.current is None:
            self.current = page

    def forget(self, page: Any) -> None:
        if page in self.pages:
            self.pages.remove(page)
        if self.current is page:
            self.current = self.pages[-1] if self.pages else None

    def note(self, text: str) -> None:
        self.notes.append(text)

    def take_notes(self) -> list[str]:
        taken = list(self.notes)
        self.notes.clear()
        return taken
