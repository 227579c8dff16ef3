"""The full-screen terminal client: attach to a task, follow its stream, answer, detach."""

from .app import TuiApp, run_tui
from .backend import Backend, DaemonBackend
from .controller import ExitInfo, TuiController, TuiOptions

__all__ = ["Backend", "DaemonBackend", "ExitInfo", "TuiApp", "TuiController", "TuiOptions", "run_tui"]
