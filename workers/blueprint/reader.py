"""A run's view of its project's blueprint (`tools.context.BlueprintPort`): the derived layer computed at each use,
the persisted layer read from the directory the daemon granted, the views in `views.py`, budgets from `[blueprint]`."""

from __future__ import annotations

from pathlib import Path

from yagent.ipc.blueprint_settings import BlueprintSettings
from yagent.workers.context.tokens import count_tokens

from .derivation import Derived, derive
from .document import Blueprint
from .store import BlueprintStore
from .views import delegation_prose, read_view, shape_text

__all__ = ["BlueprintReader"]


class BlueprintReader:
    def __init__(self, project_root: Path, directory: Path, settings: BlueprintSettings) -> None:
        self.project_root = project_root
        self.store = BlueprintStore(directory)
        self.settings = settings

    def layers(self) -> tuple[Derived, Blueprint]:
        return derive(self.project_root), self.store.read()

    def read(self, *, section: str, module: str, field: str, state: str, offset: int, limit: int) -> str:
        derived, persisted = self.layers()
        return read_view(derived, persisted, section=section, module=module, field=field, state=state,
                         offset=offset, limit=limit, budget=self.settings.prose_budget_tokens, count=count_tokens)

    def shape(self, role: str) -> str:
        """The modules-and-edges shape for a `role` the configuration names in `inject_into` ("" otherwise)."""
        if role not in self.settings.inject_into or self.settings.index_max_tokens <= 0:
            return ""
        derived, persisted = self.layers()
        return shape_text(derived, persisted, max_tokens=self.settings.index_max_tokens, count=count_tokens)

    def prose_for(self, task: str) -> str:
        """What the blueprint says of the modules a delegated task names word for word ("" for none)."""
        persisted = self.store.read()
        if not persisted.entries:  # nothing to say: the structure alone is not worth a derivation here
            return ""
        return delegation_prose(derive(self.project_root), persisted, task, budget=self.settings.prose_budget_tokens,
                                count=count_tokens)
