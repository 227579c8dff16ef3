from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.daemon_harness import DaemonProcess

# A suite started in the background by a non-interactive shell (`cmd &`, nohup, some CI runners) inherits SIGINT
# ignored, and every process it starts would too: the tests that press Ctrl+C on a client or on .ci/run would
# see nothing happen. Take SIGINT back, so the processes the tests start get its default again.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


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
