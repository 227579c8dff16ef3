"""Event-log costs with framed records, against the bare-msgpack log of before, measured in the same run.

Builds a task log of about SIZE MiB (default 64, the default cap) from realistic frames (batches of
streamed chunks), then prints:
  - opening it (the scan that builds the offset index and finds damage): framed, the same frames bare
    read by today's code, and the pre-framing scan (a msgpack.Unpacker pass, as the old code did);
  - opening it with 16 bytes of damage a third of the way in (framed: the rest is still read);
  - appending: records/s through `TaskLog.append` against plain writes of the same frames;
  - a replay page of 5000 events from the middle.
Usage: python bench/event_log_scan.py [SIZE_MIB]
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import msgpack

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from best_time import best_of  # noqa: E402

from yagent.daemon.event_log import TaskLog  # noqa: E402
from yagent.ipc.messages import PublishedEvents  # noqa: E402
from yagent.ipc.records import encode  # noqa: E402
from yagent.ipc.vocabulary import EventType  # noqa: E402

TASK = "tbench0001"


def frames(total: int) -> list[tuple[int, bytes]]:
    out, seq, size = [], 1, 0
    while size < total:
        batch = [[seq + i, "r0123456789", "coding", EventType.AI_CHUNK.value, 1.0, {"text": "token " * 12}]
                 for i in range(8)]
        frame = encode(PublishedEvents(task=TASK, events=batch))
        out.append((seq, frame))
        seq += 8
        size += len(frame)
    return out


def old_scan(path: Path) -> int:
    """The scan the log did before records: every frame decoded to find its seqs."""
    last = 0
    with path.open("rb") as fh:
        for frame in msgpack.Unpacker(fh, raw=False):
            if isinstance(frame, dict) and isinstance(frame.get("events"), list) and frame["events"]:
                last = max(last, *[item[0] for item in frame["events"]])
    return last


def main() -> None:
    size_mib = float(sys.argv[1]) if len(sys.argv) > 1 else 64.0
    cap = int(size_mib * 2 * 1024 * 1024)  # no compaction while building
    root = Path(tempfile.mkdtemp(prefix="ygl-", dir="/tmp"))
    try:
        data = frames(int(size_mib * 1024 * 1024))
        framed, bare, plain = root / f"{TASK}.log", root / "bare" / f"{TASK}.log", root / "plain.log"
        bare.parent.mkdir()
        with bare.open("wb") as fh:
            for _, frame in data:
                fh.write(frame)

        def append_framed() -> None:
            framed.unlink(missing_ok=True)
            task_log = TaskLog(framed, cap)
            for seq, frame in data:
                task_log.append(seq, frame)
            task_log.close()

        def append_plain() -> None:
            with plain.open("wb") as fh:
                for _, frame in data:
                    fh.write(frame)
                    fh.flush()

        t_append = best_of(append_framed, 1)
        t_plain = best_of(append_plain, 1)
        n = len(data)
        print(f"log: {framed.stat().st_size / 2**20:.1f} MiB framed ({bare.stat().st_size / 2**20:.1f} MiB bare), "
              f"{n} frames, {n * 8} events")
        print(f"append: {n / t_append:,.0f} records/s framed vs {n / t_plain:,.0f} frames/s plain writes "
              f"(ratio {t_plain / t_append:.2f})")

        t_old = best_of(lambda: old_scan(bare))
        t_framed = best_of(lambda: TaskLog(framed, cap))
        t_bare = best_of(lambda: TaskLog(bare, cap))
        print(f"open (scan): framed {t_framed * 1000:.0f} ms, bare by today's code {t_bare * 1000:.0f} ms, "
              f"pre-framing scan {t_old * 1000:.0f} ms (framed/pre-framing ratio {t_framed / t_old:.2f})")

        with framed.open("r+b") as fh:
            fh.seek(framed.stat().st_size // 3)
            fh.write(b"\xff" * 16)
        t_damaged = best_of(lambda: TaskLog(framed, cap))
        task_log = TaskLog(framed, cap)
        middle = data[n // 2][0]
        kept = sum(1 for _ in task_log.read(0))
        print(f"open with 16 bad bytes at a third: {t_damaged * 1000:.0f} ms; {kept} of {n * 8} events still read "
              f"(the pre-framing log kept {n * 8 // 3} or so and cut the rest)")

        def page() -> None:
            got = 0
            for item in task_log.read(middle):
                if item[0] > middle:
                    got += 1
                    if got == 5000:
                        break

        print(f"replay page of 5000 events from the middle: {best_of(page) * 1000:.1f} ms")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
