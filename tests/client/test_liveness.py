"""The liveness watcher of a follow (`yagent run`, `yagent logs -f`) is owned: how it ended is always read."""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path
from typing import Any

import pytest

from yagent.client.liveness import DaemonLost, LivenessUnknown, run_while_daemon_lives
from yagent.ipc import DaemonClient
from yagent.ipc.runtime_dir import runtime_paths


def _client_for(root: Path) -> DaemonClient:
    client = DaemonClient(root)
    client.paths = runtime_paths(root)  # as `connect` leaves it; the follow below needs no daemon
    return client


async def _follow_until_cancelled(cancelled: asyncio.Event) -> None:
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        cancelled.set()
        raise


def _run_recording_loop_errors(main: Any) -> list[dict[str, Any]]:
    """Run `main()`; return what asyncio reported to the loop's exception handler (unread task errors)."""
    seen: list[dict[str, Any]] = []

    async def wrapped() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _loop, context: seen.append(context))
        try:
            await main()
        finally:
            gc.collect()  # a task whose exception nobody read is reported when it is collected

    asyncio.run(wrapped())
    return seen


def test_a_liveness_probe_that_fails_stops_the_follow_saying_so_and_leaves_no_error_unread(tmp_path: Path) -> None:
    root = tmp_path / "run"
    root.mkdir()
    control = runtime_paths(root).control
    control.symlink_to(control.name)  # connecting to it fails with ELOOP: neither "listening" nor "gone"
    caught: list[BaseException] = []
    follow_cancelled = asyncio.Event()

    async def main() -> None:
        try:
            async with asyncio.timeout(10):
                await run_while_daemon_lives(_client_for(root), "t1", _follow_until_cancelled(follow_cancelled),
                                             interval=0.01)
        except LivenessUnknown as exc:
            caught.append(exc)
        assert follow_cancelled.is_set()

    assert _run_recording_loop_errors(main) == []
    (error,) = caught
    assert not isinstance(error, DaemonLost)  # the daemon may be fine: only the check failed
    text = str(error)
    assert "cannot tell whether yagentd is still running" in text and str(control) in text
    assert "OSError" in text and "yagent attach t1" in text


def test_a_daemon_that_stops_listening_stops_the_follow_with_what_to_do(tmp_path: Path) -> None:
    root = tmp_path / "run"
    root.mkdir()  # no control.sock at all: nobody listens
    follow_cancelled = asyncio.Event()

    async def main() -> None:
        with pytest.raises(DaemonLost, match="yagent daemon start"):
            async with asyncio.timeout(10):
                await run_while_daemon_lives(_client_for(root), "t2", _follow_until_cancelled(follow_cancelled),
                                             interval=0.01)
        assert follow_cancelled.is_set()

    assert _run_recording_loop_errors(main) == []


def test_a_follow_that_fails_raises_its_own_error_and_the_watcher_is_reaped(tmp_path: Path) -> None:
    root = tmp_path / "run"
    root.mkdir()

    async def failing_follow() -> None:
        raise ValueError("the follow's own bug")

    async def main() -> None:
        with pytest.raises(ValueError, match="the follow's own bug"):
            await run_while_daemon_lives(_client_for(root), "t3", failing_follow(), interval=30)

    assert _run_recording_loop_errors(main) == []
