"""Start a function named by a string in a new process.

The daemon launches workers without importing worker code (the two packages never import each
other): the process target is this function, and the worker entry point is named, not referenced.
"""

from __future__ import annotations

import importlib
from multiprocessing.context import ForkServerProcess
from typing import Any

__all__ = ["call_entry", "forkserver_process"]


def call_entry(target: str, *args: Any) -> Any:
    """Call `module:function` with `args`."""
    module, _, function = target.partition(":")
    return getattr(importlib.import_module(module), function)(*args)


def forkserver_process(state: dict[str, Any]) -> ForkServerProcess:
    """The process object a new worker unpickles: the stdlib's own class with the launcher's state. Named by its
    launcher's subclass, it would import that daemon module (and its imports) into every new worker."""
    process = ForkServerProcess.__new__(ForkServerProcess)
    process.__dict__.update(state)
    return process
