from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    return root.resolve()


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory next to the project, outside its root."""
    path = tmp_path / "outside"
    path.mkdir()
    return path.resolve()
