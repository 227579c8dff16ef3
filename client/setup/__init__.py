"""The setup wizard: providers and preferences, written back without losing a comment."""

from .config_file import ConfigFile, write
from .probe import ProbeResult, probe_provider
from .readiness import SetupNeed, needs_setup
from .view import run_setup
from .wizard import Wizard

__all__ = ["ConfigFile", "ProbeResult", "SetupNeed", "Wizard", "needs_setup", "probe_provider", "run_setup",
           "write"]
