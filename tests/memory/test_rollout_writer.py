"""The rollout writer: enqueue never waits for the disk, batches are bounded, close loses nothing."""

from __future__ import annotations

import asyncio
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import BinaryIO

from tests.memory.rollout_fixtures import SlowDisk
from yagent.workers.memory import rollout_records as records
from yagent.workers.memory.rollout_writer import BATCH_RECORDS, RolloutWriter, wait_for_writer


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_enqueue_returns_while_the_disk_is_stuck_and_close_drains_in_bounded_batches(tmp_path: Path) -> None:
    disk = SlowDisk()
    path = tmp_path / "r.jsonl"
    writer = RolloutWriter(path, open_file=disk.open)
    writer.enqueue(records.event_msg("first", {"i": -1}))
    assert disk.entered.wait(10)  # the writer thread is now blocked inside a write
    for i in range(100):  # would hang here if enqueue waited for the disk
        writer.enqueue(records.event_msg("e", {"i": i}))
    assert writer.written == 0
    disk.release.set()
    assert writer.close(10)
    got = [rec["payload"]["i"] for rec in _lines(path)]
    assert got == [-1, *range(100)]
    assert len(disk.writes) >= 1 + 100 // BATCH_RECORDS
    assert all(chunk.count(b"\n") <= BATCH_RECORDS for chunk in disk.writes)


def test_a_record_enqueued_right_before_close_is_never_lost(tmp_path: Path) -> None:
    for attempt in range(20):
        path = tmp_path / f"r{attempt}.jsonl"
        writer = RolloutWriter(path)
        for i in range(37):
            writer.enqueue(records.event_msg("e", {"i": i}))
        assert writer.close(10)
        writer.enqueue(records.event_msg("after close", {}))  # dropped, never raised
        assert [rec["payload"]["i"] for rec in _lines(path)] == list(range(37))


def test_a_drain_or_the_close_ends_the_batch_window_at_once(tmp_path: Path) -> None:
    # Records wait for their window to close before they are encoded and written; a window this long would fail
    # the waits below at their deadlines if nothing closed it early.
    path = tmp_path / "r.jsonl"
    writer = RolloutWriter(path, batch_seconds=3600)
    for i in range(3):
        writer.enqueue(records.event_msg("e", {"i": i}))
    assert writer.drain(10)
    assert [rec["payload"]["i"] for rec in _lines(path)] == [0, 1, 2]
    writer.enqueue(records.event_msg("e", {"i": 3}))
    assert writer.close(10)
    assert [rec["payload"]["i"] for rec in _lines(path)] == [0, 1, 2, 3]


def test_a_full_batch_ends_its_window_without_a_drain(tmp_path: Path) -> None:
    disk = SlowDisk()
    path = tmp_path / "r.jsonl"
    writer = RolloutWriter(path, open_file=disk.open, batch_seconds=3600)
    for i in range(BATCH_RECORDS):
        writer.enqueue(records.event_msg("e", {"i": i}))
    assert disk.entered.wait(10)  # the batch is being written: nothing but its size closed the window
    disk.release.set()
    assert writer.close(10)
    assert disk.writes[0].count(b"\n") == BATCH_RECORDS


def test_drain_waits_for_everything_enqueued_before_it(tmp_path: Path) -> None:
    disk = SlowDisk()
    path = tmp_path / "r.jsonl"
    writer = RolloutWriter(path, open_file=disk.open)
    for i in range(5):
        writer.enqueue(records.event_msg("e", {"i": i}))
    disk.release.set()
    assert writer.drain(10)
    assert len(_lines(path)) == 5  # in the file before close: read-back safe
    writer.close(10)


class _FullDisk:
    def __init__(self, path: Path) -> None:
        self.fh: BinaryIO = path.open("ab")

    def write(self, data: bytes) -> int:
        raise OSError(28, "No space left on device")

    def flush(self) -> None:
        self.fh.flush()

    def fileno(self) -> int:
        return self.fh.fileno()

    def close(self) -> None:
        self.fh.close()


def test_a_write_error_is_reported_once_and_never_raised(tmp_path: Path) -> None:
    reported: list[str] = []
    writer = RolloutWriter(tmp_path / "r.jsonl", open_file=_FullDisk, on_error=reported.append)
    for i in range(3):
        writer.enqueue(records.event_msg("e", {"i": i}))
        assert writer.drain(10)
    assert writer.close(10)
    assert len(reported) == 1 and "No space left" in reported[0] and str(tmp_path) in reported[0]
    assert writer.error == reported[0]


def test_an_unopenable_file_is_reported_and_the_writer_still_drains(tmp_path: Path) -> None:
    (tmp_path / "blocker").write_text("a file where the directory should be")
    reported: list[str] = []
    writer = RolloutWriter(tmp_path / "blocker" / "r.jsonl", on_error=reported.append)
    writer.enqueue(records.event_msg("e", {}))
    assert writer.drain(10) and writer.close(10)
    assert len(reported) == 1 and "opening" in reported[0]


def test_nan_huge_and_odd_values_are_written_as_strict_json(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    writer = RolloutWriter(path)
    writer.enqueue(records.event_msg("odd", {"nan": math.nan, "inf": -math.inf, "big": 10**400, "huge": 10**5000,
                                             "set": {1}, "path": Path("/x"), "bytes": b"\xff",
                                             "deep": [[[[[]]]]] * 3}))
    writer.close(10)
    text = path.read_text()
    assert "NaN" not in text and "Infinity" not in text
    payload = json.loads(text, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))["payload"]
    assert payload["nan"] == "nan" and payload["inf"] == "-inf" and payload["big"] == 10**400
    assert payload["huge"].startswith("[an integer of") and payload["set"] == [1] and payload["path"] == "/x"


# -- the writer's lock: a reader that needs the whole file waits for the writer's end ----------------------------

def _events(path: Path) -> list[str]:
    return [rec["payload"]["event"] for rec in _lines(path)]


def test_a_reader_waits_for_the_writers_end_and_then_finds_its_last_records(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    writer = RolloutWriter(path)
    writer.enqueue(records.event_msg("first"))
    assert writer.drain(10)
    assert asyncio.run(wait_for_writer(path, 0)) is False  # held from the opening on
    naps: list[float] = []

    async def nap(seconds: float) -> None:  # the writer's end comes while the reader waits
        naps.append(seconds)
        if len(naps) == 2:
            writer.enqueue(records.event_msg("last"))
            assert writer.close(10)

    assert asyncio.run(wait_for_writer(path, 30, sleep=nap)) is True
    assert naps == [0.001, 0.002]  # it waited, in growing naps, and went on at the first try after the close
    assert _events(path) == ["first", "last"]


def test_a_reader_gives_up_at_its_timeout_while_the_writer_holds_on(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    writer = RolloutWriter(path)
    now = [100.0]
    naps: list[float] = []

    async def nap(seconds: float) -> None:
        naps.append(seconds)
        now[0] += seconds

    try:
        assert asyncio.run(wait_for_writer(path, 0.5, sleep=nap, clock=lambda: now[0])) is False
    finally:
        assert writer.close(10)
    assert math.isclose(sum(naps), 0.5) and max(naps) <= 0.05  # never slept past its deadline, nor in long naps
    assert asyncio.run(wait_for_writer(path, 0)) is True


def test_a_writer_killed_with_sigkill_leaves_no_lock_behind(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    holds = ("import sys; from pathlib import Path; from yagent.workers.memory.rollout_writer import RolloutWriter; "
             "w = RolloutWriter(Path(sys.argv[1])); print('open', flush=True); sys.stdin.read()")
    proc = subprocess.Popen([sys.executable, "-c", holds, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "open"
        assert asyncio.run(wait_for_writer(path, 0)) is False
        proc.kill()
        proc.wait(30)
        assert asyncio.run(wait_for_writer(path, 0)) is True
    finally:
        proc.kill()
        proc.wait(30)


def test_a_path_swapped_for_a_link_or_gone_is_not_waited_on(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    writer = RolloutWriter(path)
    link = tmp_path / "link.jsonl"
    link.symlink_to(path)
    naps: list[float] = []

    async def nap(seconds: float) -> None:
        naps.append(seconds)

    try:
        assert asyncio.run(wait_for_writer(link, 30, sleep=nap)) is True  # never followed, never waited on
        assert asyncio.run(wait_for_writer(tmp_path / "missing.jsonl", 30, sleep=nap)) is True
    finally:
        assert writer.close(10)
    assert naps == []


def test_a_writer_started_later_opens_nothing_until_then_and_loses_nothing_queued_meanwhile(tmp_path: Path) -> None:
    path = tmp_path / "later" / "r.jsonl"
    writer = RolloutWriter(path, start=False)
    for i in range(3):
        writer.enqueue(records.event_msg("e", {"i": i}))
    assert not path.parent.exists()  # no directory, no file, no lock, no thread yet
    writer.start()
    writer.start()  # once
    assert not asyncio.run(wait_for_writer(path, 0))  # locked from the start on
    assert writer.drain(10)
    assert [rec["payload"]["i"] for rec in _lines(path)] == [0, 1, 2]
    assert writer.close(10) and asyncio.run(wait_for_writer(path, 0))


def test_a_writer_never_started_writes_its_queue_at_a_drain_or_its_close(tmp_path: Path) -> None:
    drained, closed = tmp_path / "drained.jsonl", tmp_path / "closed.jsonl"
    writer = RolloutWriter(drained, start=False)
    writer.enqueue(records.event_msg("e", {"i": 0}))
    assert writer.drain(10) and [rec["payload"]["i"] for rec in _lines(drained)] == [0]
    assert writer.close(10)
    writer = RolloutWriter(closed, start=False)
    writer.enqueue(records.event_msg("e", {"i": 1}))
    assert writer.close(10) and [rec["payload"]["i"] for rec in _lines(closed)] == [1]


def test_a_link_planted_where_the_rollout_goes_is_not_followed(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.txt"
    target.write_text("precious\n")
    path = tmp_path / "r.jsonl"
    path.symlink_to(target)
    reported: list[str] = []
    writer = RolloutWriter(path, on_error=reported.append, start=False)
    writer.enqueue(records.event_msg("e", {"i": 0}))
    writer.start()
    assert writer.close(10)
    assert target.read_text() == "precious\n"
    assert len(reported) == 1 and "opening failed" in reported[0]


def test_a_link_planted_in_place_of_the_rollout_directory_is_not_written_through(tmp_path: Path) -> None:
    # A run may write its task's directory: a link there in place of `rollouts/` must not lead a later run's
    # records elsewhere.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "task").mkdir()
    (tmp_path / "task" / "rollouts").symlink_to(elsewhere, target_is_directory=True)
    reported: list[str] = []
    writer = RolloutWriter(tmp_path / "task" / "rollouts" / "r.jsonl", on_error=reported.append)
    writer.enqueue(records.event_msg("e", {"i": 0}))
    assert writer.close(10)
    assert list(elsewhere.iterdir()) == []
    assert len(reported) == 1 and "is a symbolic link" in reported[0] and "remove the link" in reported[0]


def test_a_writer_that_gets_no_thread_says_so_and_lets_its_lock_go(tmp_path: Path, monkeypatch) -> None:
    import _thread

    def no_thread(*_args: object) -> None:
        raise RuntimeError("can't start new thread")

    path = tmp_path / "r.jsonl"
    reported: list[str] = []
    writer = RolloutWriter(path, on_error=reported.append, start=False)
    writer.enqueue(records.event_msg("e", {"i": 0}))
    with monkeypatch.context() as patched:
        patched.setattr(_thread, "start_new_thread", no_thread)
        writer.start()  # never raises into the run
    assert len(reported) == 1 and "starting its writer thread failed" in reported[0]
    assert asyncio.run(wait_for_writer(path, 0))  # no lock held: a reader does not wait for records that cannot come
    assert not writer.drain(0) and writer.close(0)


def test_a_pipe_planted_where_the_rollout_goes_is_reported_not_waited_on(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    os.mkfifo(path)  # no reader ever comes: a blocking open for writing would wait for ever
    reported: list[str] = []
    writer = RolloutWriter(path, on_error=reported.append)
    writer.enqueue(records.event_msg("e", {"i": 0}))
    assert writer.close(10)
    assert len(reported) == 1 and "is a named pipe" in reported[0]
