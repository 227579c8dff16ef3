"""System prompts: one `<agent>.prompt.md` file per agent, next to this module."""

from __future__ import annotations

from functools import cache
from importlib import resources

__all__ = ["load_prompt", "render_prompt"]


@cache
def load_prompt(agent: str) -> str:
    return resources.files(__package__).joinpath(f"{agent}.prompt.md").read_text(encoding="utf-8")


def render_prompt(agent: str, **values: str) -> str:
    """Fill `{name}` placeholders; other braces in the text are left alone."""
    text = load_prompt(agent)
    for key, value in values.items():
        text = text.replace("{" + key + "}", value)
    return text
