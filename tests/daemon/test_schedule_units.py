"""Timers and periodic jobs, and the configuration source the daemon re-reads."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from pathlib import Path

import pytest

from yagent.daemon.schedule import Scheduler
from yagent.daemon.settings_source import SettingsSource
from yagent.ipc.config import ConfigError, load_settings


def test_a_failing_pass_of_a_periodic_job_is_logged_and_the_job_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> int:
        scheduler = Scheduler()
        passes = 0
        enough = asyncio.Event()

        def job() -> None:
            nonlocal passes
            passes += 1
            if passes == 3:
                enough.set()
            if passes == 1:
                raise RuntimeError("first pass broke")

        scheduler.every("flaky", lambda: 0.01, job)
        running = asyncio.create_task(scheduler.run())
        await asyncio.wait_for(enough.wait(), 10.0)
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        return passes

    with caplog.at_level(logging.ERROR):
        assert asyncio.run(main()) >= 3
    assert "periodic job flaky failed" in caplog.text and "first pass broke" in caplog.text


def test_the_lag_probe_reports_a_blocked_loop_and_a_failing_timer_is_named(caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> None:
        scheduler = Scheduler()
        woke = asyncio.Event()
        scheduler.every("probe", lambda: 0.05, woke.set, lag_probe=True)
        running = asyncio.create_task(scheduler.run())
        await asyncio.wait_for(woke.wait(), 10.0)
        woke.clear()
        time.sleep(1.3)  # the loop itself is blocked: that is what the probe must notice
        await asyncio.wait_for(woke.wait(), 10.0)
        fired = asyncio.Event()

        def broken() -> None:
            fired.set()
            raise ValueError("bad timer")

        scheduler.after(0.0, broken, "my-timer")
        await asyncio.wait_for(fired.wait(), 10.0)
        await asyncio.sleep(0)
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running

    with caplog.at_level(logging.WARNING):
        asyncio.run(main())
    assert "event loop was blocked for" in caplog.text
    assert "timer my-timer failed" in caplog.text and "bad timer" in caplog.text


def test_a_gated_job_runs_only_while_its_event_is_set_and_costs_no_wake_up_while_clear() -> None:
    async def main() -> tuple[int, int, int]:
        scheduler = Scheduler()
        gate = asyncio.Event()
        asked = 0  # the interval is read before every wait: a job that wakes while clear asks for it
        passes = 0
        woke = asyncio.Event()

        def interval() -> float:
            nonlocal asked
            asked += 1
            return 0.01

        def job() -> None:
            nonlocal passes
            passes += 1
            if passes >= 3:
                woke.set()

        scheduler.every("gated", interval, job, only_while=gate)
        running = asyncio.create_task(scheduler.run())
        await asyncio.sleep(0.2)  # closed: twenty intervals, and not one of them may wake the job
        closed = (asked, passes)
        gate.set()
        async with asyncio.timeout(10):
            await woke.wait()
        gate.clear()
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        return closed[0], closed[1], passes

    asked_closed, passes_closed, passes_open = asyncio.run(main())
    assert asked_closed == 0 and passes_closed == 0 and passes_open >= 3


def test_the_settings_source_reloads_a_changed_file_and_keeps_what_the_daemon_sized(tmp_path: Path) -> None:
    home = tmp_path
    path = home / "config" / "config.toml"
    path.parent.mkdir()
    path.write_text('[daemon]\npub_hwm = 10\n[agent]\ndelegate_idle_timeout = "30s"\n')
    source = SettingsSource(home, load_settings(path))
    assert not source.refresh()  # unchanged: not read again
    path.write_text('[daemon]\npub_hwm = 99\n[agent]\ndelegate_idle_timeout = "45s"\n')
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 1_000_000))
    assert source.refresh()
    assert source.current.delegate_idle_timeout == 45.0 and source.current.pub_hwm == 10
    path.write_text("[agent\n")
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 2_000_000))
    with pytest.raises(ConfigError):
        source.refresh()
    assert source.current.delegate_idle_timeout == 45.0  # a broken file changes nothing


def test_a_config_that_becomes_a_dangling_symlink_is_read_and_refused_not_taken_for_no_file(tmp_path: Path) -> None:
    path = tmp_path / "config" / "config.toml"
    path.parent.mkdir()
    source = SettingsSource(tmp_path, load_settings(path))  # no file: built-in defaults
    path.symlink_to(tmp_path / "gone.toml")
    with pytest.raises(ConfigError):
        source.refresh()
