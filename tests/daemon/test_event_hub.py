"""The event hub with a real PUB socket and real log files."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import zmq

from yagent.daemon.event_hub import EventHub
from yagent.ipc.messages import Event, PublishedEvents
from yagent.ipc.records import decode
from yagent.ipc.vocabulary import EventType


@contextlib.contextmanager
def _hub(tmp_path: Path, ring: int = 10, **options: Any) -> Iterator[tuple[EventHub, zmq.Socket]]:
    """A hub publishing on a real PUB socket, with a subscriber to task t1; all closed on exit."""
    ctx = zmq.Context()
    pub = ctx.socket(zmq.PUB)
    pub.bind(f"ipc://{tmp_path}/ev.sock")
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, b"t1")
    sub.connect(f"ipc://{tmp_path}/ev.sock")
    hub = EventHub(pub, tmp_path / "events", ring, **{"clock": lambda: 42.0, **options})
    try:
        yield hub, sub
    finally:
        sub.close(0)
        hub.close()
        ctx.destroy(0)
        (tmp_path / "ev.sock").unlink(missing_ok=True)


def test_seq_is_per_task_and_monotonic_and_bad_items_are_skipped(tmp_path: Path) -> None:
    with _hub(tmp_path) as (hub, _sub):
        # A batch arrives decoded from a worker's frame: its event types are plain str, as `.value` gives.
        n = hub.publish_batch("t1", "r1", "coding", [[EventType.AI_CHUNK.value, 1.0, {"text": "a"}], ["bad"], "junk",
                                                      [EventType.AI_CHUNK.value, 2.0, {"text": "b"}]])
        assert n == 2
        assert hub.publish("t2", "r9", "repo", "mark", {}) == 1
        assert hub.publish("t1", "", "", EventType.TURN_FINISHED, {}) == 3
        page = hub.replay("t1", 0, 100)
        assert [e[0] for e in page.events] == [1, 2, 3]
        assert page.events[2][4] == 42.0
        assert page.dropped == 0 and not page.more


def test_published_frames_carry_the_task_topic(tmp_path: Path) -> None:
    with _hub(tmp_path) as (hub, sub):
        # Slow-joiner: publish until the subscription is live, then check a frame's content.
        poller = zmq.Poller()
        poller.register(sub, zmq.POLLIN)
        for _ in range(200):
            hub.publish("t1", "r1", "a", "mark", {})
            if poller.poll(20):
                break
        topic, frame = sub.recv_multipart()
        assert topic == b"t1"
        msg = decode(frame)
        assert isinstance(msg, PublishedEvents) and msg.task == "t1"


def test_replay_beyond_the_ring_reads_the_log_and_pages(tmp_path: Path) -> None:
    with _hub(tmp_path, ring=10) as (hub, _sub):
        for i in range(50):
            hub.publish_batch("t1", "r1", "a", [["x", float(i), {"i": i}]])
        page = hub.replay("t1", 5, 20)
        assert [e[0] for e in page.events] == list(range(6, 26))
        assert page.more
        tail = hub.replay("t1", 45, 20)
        assert [e[0] for e in tail.events] == [46, 47, 48, 49, 50]
        assert not tail.more


def test_seq_continues_across_a_restart_and_lost_events_are_counted(tmp_path: Path) -> None:
    with _hub(tmp_path, ring=10) as (hub, _sub):
        for i in range(30):
            hub.publish("t1", "r1", "a", "x", {"i": i})
    with _hub(tmp_path, ring=10) as (hub2, _sub2):
        assert hub2.publish("t1", "r2", "a", "x", {}) == 31
        assert [e[0] for e in hub2.replay("t1", 0, 100).events] == list(range(1, 32))
        log = tmp_path / "events" / "t1.log"
        log.unlink()  # the history is gone: only the ring (seq 31) is left
        page = hub2.replay("t1", 0, 100)
        assert [e[0] for e in page.events] == [31]
        assert page.dropped == 30
        assert page.first_available == 31


def test_a_torn_log_tail_keeps_everything_before_it(tmp_path: Path) -> None:
    with _hub(tmp_path, ring=10) as (hub, _sub):
        for i in range(20):
            hub.publish("t1", "r1", "a", "x", {"i": i})
    with (tmp_path / "events" / "t1.log").open("ab") as fh:
        fh.write(b"\x92\x01")  # half a frame, as after a crash mid-write
    with _hub(tmp_path, ring=10) as (hub2, _sub2):
        assert hub2.last_seq("t1") == 20
        assert len(hub2.replay("t1", 0, 100).events) == 20


def test_idle_tasks_beyond_the_cache_are_served_from_disk(tmp_path: Path) -> None:
    with _hub(tmp_path, ring=10) as (hub, _sub):
        hub.max_idle_tasks = 2
        for task in ("ta", "tb", "tc"):
            for i in range(5):
                hub.publish(task, "r", "a", "x", {"i": i})
            hub.close_task(task)
        assert set(hub._tasks) == {"tb", "tc"}  # the least recently used idle task left memory
        page = hub.replay("ta", 0, 100)
        assert [e[0] for e in page.events] == [1, 2, 3, 4, 5] and page.dropped == 0
        assert hub.publish("ta", "r", "a", "x", {}) == 6  # its seq continues from the log


def test_events_appended_after_a_torn_tail_stay_readable(tmp_path: Path) -> None:
    with _hub(tmp_path, ring=10) as (hub, _sub):
        for i in range(20):
            hub.publish("t1", "r1", "a", "x", {"i": i})
    with (tmp_path / "events" / "t1.log").open("ab") as fh:
        fh.write(b"\x82\xa4task\xa2t1\xa6events\x91\x96\x15")  # a frame cut off mid-event
    with _hub(tmp_path, ring=10) as (hub2, _sub2):
        for i in range(5):
            assert hub2.publish("t1", "r1", "a", "x", {"i": 20 + i}) == 21 + i
        hub2.close_task("t1")
        hub2.max_idle_tasks = 0
        hub2.close_task("t1")  # forget the ring: the replay below must come from disk
        page = hub2.replay("t1", 0, 100)
        assert [e[0] for e in page.events] == list(range(1, 26))
        assert page.dropped == 0


def test_seq_never_goes_below_the_registry_floor(tmp_path: Path) -> None:
    with _hub(tmp_path, seq_floor=lambda task: 40 if task == "t1" else 0) as (hub, _sub):
        hub.publish("t1", "r1", "a", "x", {})
        assert hub.publish("t1", "r1", "a", "x", {}) == 42
        assert hub.publish("t2", "r1", "a", "x", {}) == 1


def test_a_batch_over_the_frame_cap_is_split_and_an_oversize_event_is_cut(tmp_path: Path) -> None:
    from yagent.ipc.records import MAX_FRAME_BYTES

    with _hub(tmp_path, ring=100) as (hub, _sub):
        chunk = "y" * (MAX_FRAME_BYTES // 3)
        batch = [[EventType.TOOL_CALL_RESULT.value, float(i), {"text": chunk}] for i in range(4)]
        batch.append([EventType.TOOL_CALL_RESULT.value, 9.0, {"text": "z" * (MAX_FRAME_BYTES + 10), "call_id": "c1"}])
        assert hub.publish_batch("t1", "r1", "a", batch) == 5
        page = hub.replay("t1", 0, 100, byte_budget=10 * MAX_FRAME_BYTES)
        assert [e[0] for e in page.events] == [1, 2, 3, 4, 5]
        last = page.events[-1][5]
        assert last["call_id"] == "c1" and len(last["text"]) < 10_000 and "frame cap" in last["truncated"]
        assert all(e[5]["text"] == chunk for e in page.events[:4])


def test_replay_pages_stay_within_the_byte_budget(tmp_path: Path) -> None:
    with _hub(tmp_path, ring=10) as (hub, _sub):
        for i in range(30):
            hub.publish("t1", "r1", "a", "x", {"text": "q" * 1000, "i": i})
        seen: list[int] = []
        after = 0
        while True:
            page = hub.replay("t1", after, 5000, byte_budget=5000)
            assert 1 <= len(page.events) <= 5
            seen.extend(e[0] for e in page.events)
            after = page.events[-1][0]
            if not page.more:
                break
        assert seen == list(range(1, 31))


def _pages(hub: EventHub, task: str, after: int) -> tuple[list[int], int, int]:
    """Every seq a client gets replaying from `after` page by page, the dropped total and first_available."""
    seqs: list[int] = []
    dropped = 0
    first = 0
    while True:
        page = hub.replay(task, after, 50)
        seqs += [e[0] for e in page.events]
        dropped += page.dropped
        first = first or page.first_available
        if not page.more:
            return seqs, dropped, first
        after = page.events[-1][0]


def test_a_log_past_its_cap_keeps_its_newest_half_and_replay_reports_the_rest_dropped(tmp_path: Path) -> None:
    cap = 64 * 1024
    log = tmp_path / "events" / "t1.log"
    with _hub(tmp_path, log_max_bytes=cap) as (hub, _sub):
        for i in range(400):  # about 400 KB of events: the log is compacted several times
            hub.publish("t1", "r1", "coding", EventType.AI_CHUNK, {"text": f"{i:04d}" + "x" * 1000})
            assert log.stat().st_size <= cap
        seqs, dropped, first = _pages(hub, "t1", 0)
        assert first > 300 and seqs == list(range(first, 401)) and dropped == first - 1
        assert log.stat().st_size > cap // 4  # the newest half was kept, not everything thrown away
    with _hub(tmp_path, log_max_bytes=cap) as (hub, _sub):  # a restarted daemon
        assert hub.publish("t1", "r1", "coding", "mark", {}) == 401
        seqs, dropped, again = _pages(hub, "t1", 0)
        assert again == first and seqs == list(range(first, 402)) and dropped == first - 1


def test_replay_from_any_point_of_a_long_log_is_complete(tmp_path: Path) -> None:
    with _hub(tmp_path, ring=10) as (hub, _sub):
        # ~1.5 MB of log: many index entries, so replays start by seeking into the file.
        for i in range(1500):
            hub.publish_batch("t1", "r1", "coding", [[EventType.AI_CHUNK.value, 1.0, {"text": f"{i}" + "y" * 1000}]])
        hub.close_task("t1")
        for after in (0, 1, 63, 64, 65, 700, 1488, 1489, 1499):
            seqs, dropped, first = _pages(hub, "t1", after)
            assert seqs == list(range(after + 1, 1501)) and dropped == 0 and first == 1, after


def test_a_full_disk_costs_the_log_its_events_but_never_the_live_stream(tmp_path: Path, caplog) -> None:
    with _hub(tmp_path, ring=4) as (hub, sub):
        poller = zmq.Poller()
        poller.register(sub, zmq.POLLIN)
        for _ in range(200):  # slow joiner: wait until the subscription is live, then drain the probes
            hub._pub.send_multipart([b"t1", b"probe"])
            if poller.poll(20):
                break
        while poller.poll(50):
            sub.recv_multipart()
        for i in range(3):
            hub.publish("t1", "r1", "a", "mark", {"i": i})
        hub.close_task("t1")  # the turn ended; the next event reopens the log
        log_path = tmp_path / "events" / "t1.log"
        saved = log_path.rename(tmp_path / "saved.log")
        log_path.symlink_to("/dev/full")  # every write fails with ENOSPC, as on a full disk
        for i in range(3, 6):
            assert hub.publish("t1", "r1", "a", "mark", {"i": i}) == i + 1  # no exception reaches the caller
        assert [e[0] for e in hub.replay("t1", 3, 100).events] == [4, 5, 6]  # the ring still has them
        assert sum("cannot write event log" in r.getMessage() for r in caplog.records) == 1  # said once
        assert "free disk space" in caplog.text

        log_path.unlink()
        saved.rename(log_path)  # space is back
        for i in range(6, 10):
            hub.publish("t1", "r1", "a", "mark", {"i": i})
        assert "writable again" in caplog.text
        page = hub.replay("t1", 0, 100)
        # 4..6 never reached the log and have left the 4-event ring: reported as dropped, the rest readable.
        assert [e[0] for e in page.events] == [1, 2, 3, 7, 8, 9, 10]
        assert page.dropped == 3

        received: set[int] = set()
        while poller.poll(2000):
            received.update(e.seq for e in Event.from_batch(decode(sub.recv_multipart()[1])))
            if {4, 5, 6} <= received:
                break
        assert {4, 5, 6} <= received  # subscribers got the events the log could not keep


def test_prune_deletes_only_the_logs_of_idle_tasks_past_their_retention(tmp_path: Path) -> None:
    with _hub(tmp_path, ring=10) as (hub, _sub):
        for task in ("old", "recent", "old_busy", "old_open"):
            hub.publish(task, "r", "a", "x", {})
            if task != "old_open":
                hub.close_task(task)  # "old_open" is still publishing: its turn has not ended
        week_ago = time.time() - 7 * 86400
        for task in ("old", "old_busy", "old_open"):
            os.utime(tmp_path / "events" / f"{task}.log", (week_ago, week_ago))
        assert hub.prune(86400, busy=lambda task: task == "old_busy") == ["old"]
        assert sorted(p.stem for p in (tmp_path / "events").glob("*.log")) == ["old_busy", "old_open", "recent"]
        page = hub.replay("old", 0, 100)
        assert page.events == [] and page.last_seq == 0
        assert hub.prune(86400, busy=lambda task: False) == ["old_busy"]  # no longer busy


def _big(n: int) -> dict[str, Any]:
    return {"text": "x" * n}


def test_a_task_ring_stays_within_its_byte_budget_and_older_events_replay_from_the_log(tmp_path: Path) -> None:
    with _hub(tmp_path, ring=20_000, ring_bytes=256 * 1024) as (hub, _sub):
        for i in range(100):
            hub.publish("t1", "r1", "a", "x", {"i": i, **_big(10_000)})
        held, held_bytes = hub.ring_held("t1")
        assert held_bytes <= 256 * 1024 and 0 < held < 30  # only the newest, not 100 of them
        assert hub.ring_bytes == held_bytes
        page = hub.replay("t1", 0, 1000)
        assert [e[0] for e in page.events] == list(range(1, 101)) and page.dropped == 0
        assert all(len(e[5]["text"]) == 10_000 for e in page.events)


def test_an_event_bigger_than_the_ring_budget_is_kept_only_in_the_log(tmp_path: Path) -> None:
    with _hub(tmp_path, ring=20_000, ring_bytes=64 * 1024) as (hub, _sub):
        hub.publish("t1", "r1", "a", "x", _big(100_000))
        assert hub.ring_held("t1") == (0, 0) and hub.ring_bytes == 0
        page = hub.replay("t1", 0, 10)
        assert [len(e[5]["text"]) for e in page.events] == [100_000] and page.dropped == 0


def test_the_overall_budget_takes_idle_tasks_first_then_the_largest_ring(tmp_path: Path) -> None:
    mib = 1024 * 1024
    with _hub(tmp_path, ring=20_000, ring_bytes=mib, ring_total_bytes=2 * mib) as (hub, _sub):
        for task in ("idle", "quiet", "loud"):
            for i in range(60):
                hub.publish(task, "r", "a", "x", {"i": i, **_big(10_000)})
        hub.close_task("idle")
        assert hub.ring_held("idle")[1] > 500 * 1024  # idle, but kept while the budget allows
        for i in range(60):  # loud goes on, over the overall budget: the idle task's oldest events leave
            hub.publish("loud", "r", "a", "x", {"i": i, **_big(10_000)})
        assert hub.ring_bytes <= 2 * mib
        assert 0 < hub.ring_held("idle")[0] < 60 and hub.ring_held("quiet")[0] == 60
        for i in range(120):  # another loud one: the idle ring empties, then the largest rings give way
            hub.publish("louder", "r", "a", "x", {"i": i, **_big(10_000)})
        assert hub.ring_bytes <= 2 * mib
        assert hub.ring_held("idle") == (0, 0)
        assert hub.ring_held("quiet")[0] == 60  # the smallest live ring is untouched
        assert hub.ring_bytes == sum(hub.ring_held(t)[1] for t in ("idle", "quiet", "loud", "louder"))
        for task, last in (("idle", 60), ("quiet", 60), ("loud", 120), ("louder", 120)):
            page = hub.replay(task, 0, 1000)
            assert [e[0] for e in page.events] == list(range(1, last + 1)) and page.dropped == 0


def test_ring_accounting_returns_to_zero_when_tasks_leave_memory(tmp_path: Path) -> None:
    with _hub(tmp_path, ring=20_000) as (hub, _sub):
        hub.max_idle_tasks = 1
        for task in ("ta", "tb", "tc"):
            for i in range(20):
                hub.publish(task, "r", "a", "x", {"i": i, **_big(1000)})
            hub.close_task(task)
        assert set(hub._tasks) == {"tc"} and hub.ring_bytes == hub.ring_held("tc")[1] > 0
        hub.prune(0, busy=lambda task: False, now=time.time() + 10)
        assert hub.ring_bytes == 0
