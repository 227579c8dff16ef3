from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.daemon_harness import DaemonProcess


@pytest.fixture
def project(tmp_path: Path) -> Path:
    p = tmp_path / "project"
    p.mkdir()
    (p / "README.md").write_text("a project\n")
    return p


@pytest.fixture
def make_daemon(tmp_path: Path) -> Iterator:
    made: list[DaemonProcess] = []

    def make(config: str = "", *, start: bool = True, env: dict[str, str] | None = None,
             root: Path | None = None) -> DaemonProcess:
        d = DaemonProcess(root or tmp_path / f"d{len(made)}", config, env)
        made.append(d)
        return d.start() if start else d

    yield make
    for d in made:
        d.close()


@pytest.fixture
def daemon(make_daemon):
    return make_daemon()
