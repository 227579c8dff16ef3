"""Errors raised by the tool layer.

Tool *failures* the model should see are never exceptions: an executor returns a `ToolResult` with
`is_error=True`, and the batch executor turns any unexpected exception into such a result. The
exceptions below are programming or wiring errors, raised to the code that builds the tool layer:

    ToolError                      base of everything this package raises
    ├── ToolDeclarationError       a spec breaks a registry rule (static registry at import, or an extra spec)
    └── SurfaceError               a surface was asked for something it cannot build (unknown agent, bad pick)
"""

from __future__ import annotations


class ToolError(Exception):
    """Base class for errors raised by `yagent.workers.tools`."""


class ToolDeclarationError(ToolError):
    """One or more tool specs violate the declaration rules; the message lists every problem."""


class SurfaceError(ToolError):
    """A tool surface cannot be built as requested."""
