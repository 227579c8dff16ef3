"""Event logs on real files, damaged as disks and crashes damage them: exactly which events survive.

Reading never modifies a log; damage costs only the records it touches; the tail after the last readable
record is cut only when the log is next appended to, and kept in `{task}.log.torn`; logs written before
records had a frame (bare msgpack frames) are read, appended to and compacted without losing an event.
"""

from __future__ import annotations

import logging
import os
import random
from pathlib import Path

import msgpack
import pytest
import zmq

from yagent.daemon.event_hub import EventHub
from yagent.daemon.event_log import TORN_SUFFIX, EventLogDir, TaskLog
from yagent.daemon.event_log_format import HEADER_SIZE, MAGIC
from yagent.ipc.messages import PublishedEvents
from yagent.ipc.records import encode
from yagent.ipc.vocabulary import EventType

TASK = "tdamage001"
CAP = 64 * 1024 * 1024

Spans = list[tuple[int, int]]


def _frame(seqs: list[int], size: int = 40) -> bytes:
    """A published frame as the hub writes it: one run's events, stamped from the first seq (seqs run on)."""
    return encode(PublishedEvents(task=TASK, run="r1", agent="coding", seq=seqs[0], events=[
        [EventType.AI_CHUNK.value, 1.0, {"text": f"{s:05d}" + "x" * size}] for s in seqs]))


def _old_frame(seqs: list[int], size: int = 40) -> bytes:
    """A published frame as a yagent before protocol 3 wrote it: every event whole, `[seq, run, agent, ...]`."""
    return msgpack.packb({"task": TASK, "events": [
        [s, "r1", "coding", EventType.AI_CHUNK.value, 1.0, {"text": f"{s:05d}" + "x" * size}] for s in seqs],
        "k": "published"})


def _write_records(path: Path, seqs: list[int], cap: int = CAP) -> Spans:
    """One record per seq, appended by the daemon's own writer; returns each record's byte span."""
    task_log = TaskLog(path, cap)
    spans = []
    for seq in seqs:
        start = task_log.size
        task_log.append(seq, _frame([seq]))
        spans.append((start, task_log.size))
    task_log.close()
    return spans


def _write_bare(path: Path, seqs: list[int]) -> Spans:
    """Frames as a yagent from before records wrote them: bare and back to back."""
    spans = []
    with path.open("ab") as fh:
        for seq in seqs:
            start = fh.tell()
            fh.write(_old_frame([seq]))
            spans.append((start, fh.tell()))
    return spans


def _overwrite(path: Path, at: int, data: bytes) -> None:
    with path.open("r+b") as fh:
        fh.seek(at)
        fh.write(data)


def _read(path: Path, after: int = 0) -> list[int]:
    """The seqs after `after` that the log holds (a read starts at the indexed record before them)."""
    seqs = [e[0] for e in TaskLog(path, CAP).read(after)]
    return [s for s in seqs if s > after]


def _hit(spans: Spans, seqs: list[int], at: int, n: int) -> set[int]:
    """The seqs whose record overlaps bytes [at, at + n)."""
    return {seq for seq, (start, end) in zip(seqs, spans, strict=True) if start < at + n and at < end}


@pytest.fixture
def log_path(tmp_path: Path) -> Path:
    return tmp_path / f"{TASK}.log"


def test_sixteen_bad_bytes_a_third_of_the_way_in_cost_only_the_records_they_hit(log_path: Path) -> None:
    seqs = list(range(1, 121))
    spans = _write_records(log_path, seqs)
    at = log_path.stat().st_size // 3
    _overwrite(log_path, at, b"\xff" * 16)
    before = log_path.read_bytes()
    lost = _hit(spans, seqs, at, 16)
    assert 1 <= len(lost) <= 2
    assert _read(log_path) == [s for s in seqs if s not in lost]
    assert log_path.read_bytes() == before  # reading repaired nothing, cut nothing
    for after in (0, 30, 39, 40, 41, 90):  # seeking through the index lands on either side of the damage
        assert _read(log_path, after) == [s for s in seqs if s not in lost and s > after], after


def test_a_replay_of_a_damaged_log_reports_the_lost_events_dropped_and_leaves_the_file_alone(tmp_path: Path) -> None:
    events = tmp_path / "events"
    events.mkdir()
    path = events / f"{TASK}.log"
    seqs = list(range(1, 61))
    spans = _write_records(path, seqs)
    lost = {20, 21, 22}
    _overwrite(path, spans[19][0] + 3, b"\x00" * (spans[21][1] - spans[19][0] - 6))
    before = path.read_bytes()
    ctx = zmq.Context()
    pub = ctx.socket(zmq.PUB)
    try:
        hub = EventHub(pub, events, ring_size=10)
        page = hub.replay(TASK, 0, 1000)
        assert [e[0] for e in page.events] == [s for s in seqs if s not in lost]
        assert page.dropped == len(lost) and page.last_seq == 60
        hub.close()
    finally:
        pub.close(0)
        ctx.term()
    assert path.read_bytes() == before


@pytest.mark.parametrize(("at", "data"), [(0, b"\x00"), (5, b"yEv2"), (9, b"\x01"), (HEADER_SIZE + 2, b"\x00")],
                         ids=["marker", "magic", "seq", "payload"])
def test_damage_at_the_very_start_costs_the_first_record_only(log_path: Path, at: int, data: bytes) -> None:
    seqs = list(range(1, 21))
    _write_records(log_path, seqs)
    _overwrite(log_path, at, data)
    assert _read(log_path) == seqs[1:]
    assert TaskLog(log_path, CAP).first_seq == 2


@pytest.mark.parametrize("length", [0, 7, 0x00FFFFFF, 0xFFFFFFFF, "past_the_end", "into_the_next"])
def test_a_damaged_length_field_costs_that_record_and_never_the_ones_after_it(log_path: Path, length) -> None:
    seqs = list(range(1, 41))
    spans = _write_records(log_path, seqs)
    victim = 19  # seq 20
    start, end = spans[victim]
    size = log_path.stat().st_size
    body = {"past_the_end": size, "into_the_next": end - start + 30}.get(length, length)
    _overwrite(log_path, start + 1, int(body).to_bytes(4, "big"))
    survivors = [s for s in seqs if s != 20]
    assert _read(log_path) == survivors
    # Appending decides nothing about the middle: no record is cut, none moved aside.
    task_log = TaskLog(log_path, CAP)
    task_log.append(41, _frame([41]))
    task_log.close()
    assert _read(log_path) == [*survivors, 41]
    assert not log_path.with_name(log_path.name + TORN_SUFFIX).exists()


def test_a_torn_tail_is_read_around_and_cut_only_by_the_next_append_kept_aside(log_path: Path) -> None:
    seqs = list(range(1, 21))
    _write_records(log_path, seqs)
    whole = log_path.read_bytes()
    record = _write_records(log_path.with_name("other.log"), [21])
    partial = log_path.with_name("other.log").read_bytes()[:record[0][1] // 2]  # a crash mid-write
    with log_path.open("ab") as fh:
        fh.write(partial)
    torn = log_path.with_name(log_path.name + TORN_SUFFIX)
    assert _read(log_path) == seqs
    assert TaskLog(log_path, CAP).last_seq == 20
    assert log_path.read_bytes() == whole + partial and not torn.exists()  # readers leave it
    task_log = TaskLog(log_path, CAP)
    task_log.append(21, _frame([21]))
    task_log.close()
    assert torn.read_bytes() == partial
    assert _read(log_path) == [*seqs, 21]
    assert oct(torn.stat().st_mode & 0o777) == oct(0o600)


def test_a_damaged_last_record_is_the_tail_the_next_append_moves_aside(log_path: Path) -> None:
    seqs = list(range(1, 11))
    spans = _write_records(log_path, seqs)
    start, end = spans[-1]
    _overwrite(log_path, end - 5, b"\x00\x00\x00\x00\x00")
    damaged = log_path.read_bytes()[start:end]
    assert _read(log_path) == seqs[:-1]
    task_log = TaskLog(log_path, CAP)
    assert task_log.last_seq == 9
    task_log.append(11, _frame([11]))  # the hub's seq floor keeps 10 used; the log just lacks it
    task_log.close()
    assert log_path.with_name(log_path.name + TORN_SUFFIX).read_bytes() == damaged
    assert _read(log_path) == [*seqs[:-1], 11]


def test_records_written_before_batches_carried_one_seq_are_read_beside_new_ones(log_path: Path) -> None:
    # A log a protocol-2 daemon appended to (every event whole), continued by this one (one seq per batch).
    task_log = TaskLog(log_path, CAP)
    for seq in (1, 2):
        task_log.append(seq, _old_frame([seq]))
    task_log.append(3, _frame([3, 4, 5]))
    task_log.close()
    assert _read(log_path) == [1, 2, 3, 4, 5]
    assert TaskLog(log_path, CAP).last_seq == 5
    assert [e[1:3] for e in TaskLog(log_path, CAP).read(0)] == [["r1", "coding"]] * 5


def test_a_log_from_before_records_is_read_and_its_damage_skipped_without_changing_it(log_path: Path) -> None:
    seqs = list(range(1, 61))
    spans = _write_bare(log_path, seqs)
    at = log_path.stat().st_size // 3
    _overwrite(log_path, at, b"\xc1" * 16)  # bytes no msgpack value can start with
    before = log_path.read_bytes()
    lost = _hit(spans, seqs, at, 16)
    assert _read(log_path) == [s for s in seqs if s not in lost]
    assert TaskLog(log_path, CAP).last_seq == 60
    assert log_path.read_bytes() == before


def test_appending_to_an_old_log_keeps_its_bytes_and_adds_records_after_them(log_path: Path) -> None:
    old = list(range(1, 31))
    _write_bare(log_path, old)
    with log_path.open("ab") as fh:
        fh.write(_old_frame([31])[:20])  # the old log ends torn
    bare = log_path.read_bytes()
    task_log = TaskLog(log_path, CAP)
    for seq in range(32, 42):
        task_log.append(seq, _frame([seq]))
    task_log.close()
    mixed = log_path.read_bytes()
    assert mixed.startswith(bare[:-20])  # the old frames are untouched: never rewritten
    assert log_path.with_name(log_path.name + TORN_SUFFIX).read_bytes() == bare[-20:]
    assert _read(log_path) == [*old, *range(32, 42)]
    assert TaskLog(log_path, CAP).last_seq == 41


def test_a_mixed_log_with_damage_in_both_parts_keeps_every_other_event(log_path: Path) -> None:
    old = list(range(1, 31))
    bare_spans = _write_bare(log_path, old)
    new = list(range(31, 61))
    task_log = TaskLog(log_path, CAP)
    new_spans = []
    for seq in new:
        start = task_log.size
        task_log.append(seq, _frame([seq]))
        new_spans.append((start, task_log.size))
    task_log.close()
    _overwrite(log_path, bare_spans[10][0] + 8, b"\xde\xad\xbe\xef")  # inside old frame 11
    _overwrite(log_path, bare_spans[29][0], b"\xc1")  # the last old frame's first byte
    _overwrite(log_path, new_spans[0][0] + 30, b"junk")  # inside the first record (its header intact)
    _overwrite(log_path, new_spans[15][0] + 30, b"junk")  # inside record 46
    lost = {11, 30, 31, 46}
    assert _read(log_path) == [s for s in old + new if s not in lost]


def test_a_flood_of_garbage_costs_only_the_records_it_replaced(log_path: Path) -> None:
    seqs = list(range(1, 41))
    spans = _write_records(log_path, seqs)
    rng = random.Random(7)
    lure = b"\xc6\x00\x00\x00\x40" + MAGIC  # a record header over and over, every checksum wrong
    flood = bytes(rng.getrandbits(8) for _ in range(1 << 16)) * 16 + lure * 100_000
    head = log_path.read_bytes()
    cut_from, cut_to = spans[9][1], spans[29][1]  # records 11..30 are replaced by the flood
    log_path.write_bytes(head[:cut_from] + flood + head[cut_to:])
    assert _read(log_path) == [*range(1, 11), *range(31, 41)]
    assert _read(log_path, 35) == [36, 37, 38, 39, 40]


def test_garbage_in_an_old_log_that_mimics_its_frames_is_skipped(log_path: Path) -> None:
    spans = _write_bare(log_path, list(range(1, 21)))
    head = log_path.read_bytes()
    mimic = (b"\x83" + msgpack.packb("task") + msgpack.packb(TASK) + b"\xa6events\x91\x96") * 20_000
    log_path.write_bytes(head[:spans[9][1]] + mimic + head[spans[9][1]:])
    assert _read(log_path) == list(range(1, 21))


def test_an_old_yagent_reading_a_new_log_sees_opaque_values_and_no_damage(log_path: Path) -> None:
    _write_records(log_path, list(range(1, 11)))
    values = list(msgpack.Unpacker(log_path.open("rb"), raw=False))  # what the bare-format reader did
    assert len(values) == 10 and all(isinstance(v, bytes) for v in values)


def test_compaction_of_a_mixed_log_ages_the_old_part_out(tmp_path: Path) -> None:
    path = tmp_path / f"{TASK}.log"
    cap = 64 * 1024
    _write_bare(path, list(range(1, 301)))  # about 30 KB of old frames
    task_log = TaskLog(path, cap)
    for seq in range(301, 1001):
        task_log.append(seq, _frame([seq]))
        assert path.stat().st_size <= cap
    task_log.close()
    first = path.read_bytes()[0]
    assert first == 0xC6  # only records are left
    seqs = _read(path)
    assert seqs == list(range(seqs[0], 1001)) and seqs[0] > 300


def test_damage_is_logged_once_per_file(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    directory = tmp_path / "events"
    logs = EventLogDir(directory)
    spans = _write_records(directory / f"{TASK}.log", list(range(1, 21)))
    _overwrite(directory / f"{TASK}.log", spans[5][0] + 30, b"\x00" * 8)
    with caplog.at_level(logging.WARNING):
        for _ in range(3):  # the hub reopens a task's log each time it was forgotten
            logs.open(TASK).close()
    damaged = [r for r in caplog.records if "is damaged" in r.getMessage()]
    assert len(damaged) == 1 and f"{TASK}.log" in damaged[0].getMessage()


def test_a_log_that_is_not_a_regular_file_is_ignored_rather_than_read_forever(tmp_path: Path) -> None:
    path = tmp_path / f"{TASK}.log"
    path.symlink_to("/dev/zero")
    assert _read(path) == [] and TaskLog(path, CAP).last_seq == 0
    fifo = tmp_path / "tfifo00001.log"
    os.mkfifo(fifo)  # no writer: a plain open to read would wait forever
    task_log = TaskLog(fifo, CAP)
    assert list(task_log.read(0)) == []
    task_log.append(1, _frame([1]))  # no reader either: the append fails like a full disk, never blocks
    assert task_log.failing
