"""The package's public surface: every name in __all__ exists, and the module layout has no grab-bags."""

from __future__ import annotations

from pathlib import Path

import yagent.workers.tools as tools

PACKAGE_DIR = Path(tools.__file__).parent


def test_every_exported_name_exists() -> None:
    missing = [name for name in tools.__all__ if not hasattr(tools, name)]
    assert missing == []
    assert len(set(tools.__all__)) == len(tools.__all__)


def test_no_grab_bag_modules_and_no_subpackages() -> None:
    modules = {p.stem for p in PACKAGE_DIR.glob("*.py")}
    assert not modules & {"utils", "helpers", "common", "misc"}
    # pyproject lists packages explicitly; a new subpackage here would silently miss the wheel.
    assert [p.name for p in PACKAGE_DIR.iterdir() if p.is_dir() and (p / "__init__.py").exists()] == []
