"""Start a function named by a string in a new process.

The daemon launches workers without importing worker code (the two packages never import each
other): the process target is this function, and the worker entry point is named, not referenced.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["call_entry"]


def call_entry(target: str, *args: Any) -> Any:
    """Call `module:function` with `args`."""
    module, _, function = target.partition(":")
    return getattr(importlib.import_module(module), function)(*args)
