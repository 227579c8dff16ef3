"""The daemon's page profile (`daemon/page_profile.py`, `ipc/page_runs.py`): only a few runs are asked, reports of
one forkserver are joined, and a forged or damaged report is refused whole, said once in the log."""

from __future__ import annotations

import logging
import threading

import pytest

from yagent.daemon.page_profile import PageProfile
from yagent.ipc.page_runs import MAX_PREFAULT_PAGES, merged_runs, page_runs_of


def test_reports_of_one_forkserver_are_joined_and_another_forkservers_replace_them() -> None:
    profile = PageProfile()
    assert profile.current() is None
    assert profile.learn([[100, 10], [200, 5]], 4242)
    assert profile.learn([[105, 10], [300, 1]], 4242)
    assert profile.current() == (4242, ((100, 15), (200, 5), (300, 1)))
    assert profile.learn([[7, 1]], 5151)  # a new forkserver: the old pages are not its memory
    assert profile.current() == (5151, ((7, 1),))
    assert profile.reports == 3


def test_only_the_first_runs_are_asked_even_when_asked_from_two_threads() -> None:
    profile = PageProfile(learn_runs=3)
    assert profile.learning()
    answers: list[bool] = []
    lock = threading.Lock()

    def ask() -> None:
        for _ in range(50):
            got = profile.ask()
            with lock:
                answers.append(got)

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert answers.count(True) == 3 and len(answers) == 200
    assert not profile.learning()  # warm workers forked from now on open no page map


@pytest.mark.parametrize("report, why", [
    ("not a list", "must be a list"),
    ([[1, 2, 3]], "a pair"),
    ([[True, 1]], "integers"),
    ([[10, 1.0]], "integers"),
    ([[10, float("nan")]], "integers"),
    ([[0, 1]], "outside any address space"),
    ([[-5, 1]], "outside any address space"),
    ([[10, 0]], "outside any address space"),
    ([[1 << 60, 1]], "outside any address space"),
    ([[(1 << 45) - 1, 2]], "outside any address space"),
    ([[10, MAX_PREFAULT_PAGES + 1]], "outside any address space"),
    ([[10, MAX_PREFAULT_PAGES], [1 << 20, 1]], f"more than {MAX_PREFAULT_PAGES} pages"),
    ([[i * 2 + 1, 1] for i in range(MAX_PREFAULT_PAGES + 1)], "more than the"),
])
def test_a_forged_or_damaged_report_is_refused_whole(report: object, why: str) -> None:
    found = page_runs_of(report)
    assert isinstance(found, str) and why in found


def test_a_refused_report_leaves_the_profile_as_it_was_and_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    profile = PageProfile()
    profile.learn([[100, 10]], 4242)
    with caplog.at_level(logging.WARNING, logger="yagent.daemon.page_profile"):
        for _ in range(5):
            assert not profile.learn([[True, 1]], 4242, run="r1")
        assert not profile.learn([[100, 1]], 1, run="r2")  # init is no forkserver
        assert not profile.learn([[100, 1]], "4242", run="r3")
    assert profile.current() == (4242, ((100, 10),))
    refusals = [r.getMessage() for r in caplog.records]
    assert len(refusals) == 3 and "run r1: its page report was left out" in refusals[0]


def test_the_union_stops_at_the_limit_keeping_the_lowest_addresses() -> None:
    assert merged_runs([(10, 5), (12, 10)], [(22, 3), (40, 1)]) == ((10, 15), (40, 1))
    assert merged_runs([(10, 5), (100, 50)], limit=8) == ((10, 5), (100, 3))
    profile = PageProfile()
    half = MAX_PREFAULT_PAGES // 2 + 10
    assert profile.learn([[1000, half]], 4242) and profile.learn([[1_000_000, half]], 4242)
    current = profile.current()
    assert current is not None and sum(count for _, count in current[1]) == MAX_PREFAULT_PAGES
