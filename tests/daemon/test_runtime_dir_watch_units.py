"""The kernel tells the daemon when control.sock is removed or replaced: an idle daemon need not wake up to look."""

from __future__ import annotations

import asyncio
import shutil
import socket
import sys
import tempfile
from pathlib import Path

import pytest

from yagent.daemon.runtime_dir_watch import ControlSocketWatch

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's")


def _bind(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    return sock


def test_removing_or_replacing_control_sock_is_reported_by_the_kernel_without_polling() -> None:
    short = Path(tempfile.mkdtemp(prefix="yg-", dir="/tmp"))
    path = short / "control.sock"
    ours = _bind(path)
    theirs: socket.socket | None = None

    async def main() -> list[str | None]:
        nonlocal theirs
        changed = asyncio.Event()
        watch = ControlSocketWatch(path)
        assert watch.watch(changed.set)
        seen: list[str | None] = [watch.problem()]
        try:
            (short / "yagentd.lock").touch()  # another entry changing: a look, and nothing wrong
            async with asyncio.timeout(10):
                await changed.wait()
            seen.append(watch.problem())
            changed.clear()
            path.unlink()
            async with asyncio.timeout(10):
                await changed.wait()
            seen.append(watch.problem())
            changed.clear()
            theirs = _bind(path)  # a second daemon bound a socket of its own there
            async with asyncio.timeout(10):
                await changed.wait()
            seen.append(watch.problem())
        finally:
            watch.close()
        return seen

    try:
        seen = asyncio.run(main())
    finally:
        ours.close()
        if theirs is not None:
            theirs.close()
        shutil.rmtree(short, ignore_errors=True)
    assert seen == [None, None, "was removed", "was replaced by another process"]
