"""fsyncs done after the work that waits for them (`workers/late_sync.py`): every descriptor handed over is synced
and closed, a worker on its way out can wait for them, and a failing disk is counted, never raised."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from yagent.workers.board.exclusive_file import place_exclusive
from yagent.workers.late_sync import LATE_SYNC, LateSync
from yagent.workers.memory.rollout_writer import RolloutWriter


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def _open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def test_a_descriptor_handed_over_is_synced_then_closed_and_wait_says_when(tmp_path: Path) -> None:
    synced: list[int] = []
    release = threading.Event()

    def slow_disk(fd: int) -> None:
        assert release.wait(10.0)
        synced.append(fd)

    late = LateSync(sync=slow_disk)
    fds = [os.open(tmp_path / f"f{i}", os.O_WRONLY | os.O_CREAT, 0o600) for i in range(3)]
    for fd in fds:
        late.add(fd)
    assert not late.wait(0.05)  # the disk has not answered: nothing is durable yet, and the caller is told so
    release.set()
    assert late.wait(10.0)
    assert synced == fds  # in the order given
    assert not any(_is_open(fd) for fd in fds)


def test_a_sync_waits_out_its_delay_unless_someone_waits_for_it(tmp_path: Path) -> None:
    synced = threading.Event()

    def disk(fd: int) -> None:
        synced.set()

    late = LateSync(sync=disk, delay=3600)  # a delay no wait below could outlast
    late.add(os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT, 0o600))
    assert not synced.wait(0.1)  # handed over, not synced: the run that wrote it goes on first
    assert late.wait(10.0) and synced.is_set()  # a worker on its way out does not wait out the delay
    synced.clear()
    late.add(os.open(tmp_path / "g", os.O_WRONLY | os.O_CREAT, 0o600))
    assert not synced.wait(0.1)  # that wait is over: a later file gets its delay again
    assert late.wait(10.0) and synced.is_set()


def test_a_failing_sync_is_counted_and_the_descriptor_still_closed(tmp_path: Path) -> None:
    def full_disk(fd: int) -> None:
        raise OSError(28, "No space left on device")

    late = LateSync(sync=full_disk)
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT, 0o600)
    late.add(fd)
    assert late.wait(10.0)
    assert late.failures == 1 and not _is_open(fd)
    late.add(os.open(tmp_path / "g", os.O_WRONLY | os.O_CREAT, 0o600))  # the thread lives on
    assert late.wait(10.0) and late.failures == 2


def test_a_forked_child_syncs_on_a_thread_of_its_own(tmp_path: Path) -> None:
    LATE_SYNC.add(os.open(tmp_path / "parent", os.O_WRONLY | os.O_CREAT, 0o600))  # the parent's thread is running
    assert LATE_SYNC.wait(10.0)
    pid = os.fork()
    if pid == 0:  # the parent's thread does not exist here: without the reset, wait would never come true
        try:
            LATE_SYNC.add(os.open(tmp_path / "child", os.O_WRONLY | os.O_CREAT, 0o600))
            os._exit(0 if LATE_SYNC.wait(10.0) else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_a_placed_file_is_whole_before_its_sync_and_a_taken_name_leaks_no_descriptor(tmp_path: Path) -> None:
    data = os.urandom(300_000)  # more than one write may take
    before = _open_fds()
    assert place_exclusive(tmp_path / ".a.tmp", tmp_path / "a", data)
    assert (tmp_path / "a").read_bytes() == data and not (tmp_path / ".a.tmp").exists()
    assert not place_exclusive(tmp_path / ".b.tmp", tmp_path / "a", b"other")  # the name is taken
    assert (tmp_path / "a").read_bytes() == data and not (tmp_path / ".b.tmp").exists()
    assert LATE_SYNC.wait(10.0)
    assert _open_fds() == before  # the placed file's descriptor was synced and closed; the refused one closed at once


def test_a_closed_rollout_is_complete_at_once_and_its_sync_follows(tmp_path: Path) -> None:
    path = tmp_path / "rollout.jsonl"
    writer = RolloutWriter(path)
    for i in range(100):
        writer.enqueue({"i": i})
    before = _open_fds()
    assert writer.close(10.0)
    assert [json.loads(line)["i"] for line in path.read_text().splitlines()] == list(range(100))
    assert LATE_SYNC.wait(10.0)
    assert _open_fds() <= before  # the rollout's descriptor and the copy handed over are both closed
