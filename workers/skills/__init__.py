"""Skills inside a run: the catalogue in its system prompt and what `use_skill` hands the model.

Which skills exist, and why, is `yagent.ipc.skill_account` (the client shows the same account); this package
turns it into one run's catalogue (within its budget) and the `use_skill` port the tool layer calls.
"""

from __future__ import annotations

from .catalogue import (
    CATALOGUE_SHARE,
    DEFAULT_CONTEXT_WINDOW,
    MIN_BUDGET_TOKENS,
    Catalogue,
    catalogue_budget,
    render_catalogue,
)
from .shelf import DEFAULT_PAGE, MAX_PAGE, USE_SKILL, SkillShelf, SkillUnavailable

__all__ = [
    "CATALOGUE_SHARE",
    "DEFAULT_CONTEXT_WINDOW",
    "DEFAULT_PAGE",
    "MAX_PAGE",
    "MIN_BUDGET_TOKENS",
    "USE_SKILL",
    "Catalogue",
    "SkillShelf",
    "SkillUnavailable",
    "catalogue_budget",
    "render_catalogue",
]
