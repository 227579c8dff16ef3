"""The watch on a run's pipe to yagentd: EOF is the daemon's death, at once; a run that does not wrap up in its
grace is given up on; a descriptor no longer open is never mistaken for a death."""

from __future__ import annotations

import os
import threading

import pytest

from yagent.workers.daemon_watch import DaemonWatch


def _watch(fd: int, grace: float = 30.0) -> tuple[DaemonWatch, threading.Event, threading.Event]:
    told, gave_up = threading.Event(), threading.Event()
    watch = DaemonWatch(fd, on_gone=lambda _why: told.set(), give_up=gave_up.set, grace=grace).start()
    return watch, told, gave_up


def test_the_daemons_end_closing_is_its_death_and_a_run_that_wraps_up_in_time_is_never_given_up_on() -> None:
    r, w = os.pipe()
    watch, told, gave_up = _watch(r, grace=0.2)
    assert not told.wait(0.05)
    os.close(w)
    assert told.wait(5.0) and watch.gone.is_set()
    watch.stop()  # the run wrapped up
    assert not gave_up.wait(0.4)
    os.close(r)


def test_a_run_that_does_not_wrap_up_within_its_grace_is_given_up_on() -> None:
    r, w = os.pipe()
    watch, told, gave_up = _watch(r, grace=0.1)
    os.close(w)
    assert told.wait(5.0) and gave_up.wait(5.0)
    watch.stop()
    os.close(r)


def test_a_watch_on_a_descriptor_no_longer_open_is_no_death() -> None:
    closed = 987  # say a tool closed every descriptor it did not know before the watch began
    with pytest.raises(OSError):
        os.fstat(closed)
    watch, told, gave_up = _watch(closed, grace=0.1)
    watch._thread.join(5.0)
    assert not watch._thread.is_alive()
    assert not told.is_set() and not gave_up.is_set() and not watch.gone.is_set()
    watch.stop()
