"""`QuickThread`: a thread started without the start handshake, joined and watched like the ones it replaces."""

from __future__ import annotations

import logging
import threading

import pytest

from yagent.workers.quick_thread import QuickThread


def test_it_runs_its_target_and_is_alive_until_the_target_returns() -> None:
    release = threading.Event()
    ran = threading.Event()

    def target() -> None:
        ran.set()
        release.wait(10)

    thread = QuickThread(target, name="t")
    assert not thread.is_alive() and thread.join(0)  # never started: nothing to wait for
    thread.start()
    assert thread.is_alive()  # from the start on, whether or not it has run yet
    assert ran.wait(10)
    assert not thread.join(0.01) and thread.is_alive()
    release.set()
    assert thread.join(10) and not thread.is_alive()
    with pytest.raises(RuntimeError, match="started twice"):
        thread.start()


def test_a_target_that_raises_is_logged_and_its_thread_ends(caplog: pytest.LogCaptureFixture) -> None:
    def target() -> None:
        raise ValueError("broken on purpose")

    thread = QuickThread(target, name="breaks")
    with caplog.at_level(logging.ERROR, logger="yagent.workers.quick_thread"):
        thread.start()
        assert thread.join(10)
    assert not thread.is_alive()
    assert "thread breaks failed" in caplog.text and "broken on purpose" in caplog.text
