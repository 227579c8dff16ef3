"""Rollout write throughput: records/s through the rollout writer against a bare buffered write of the same bytes.

Both in this process, on the same disk, the best of three runs each: the writer (enqueue every record, then
`close`, which drains and fsyncs) and the baseline (encode the same records, write them through one buffered
file, flush, fsync). Also prints what the agent loop itself waits: the enqueue time alone.
Usage: python bench/rollout_throughput.py [RECORDS] [MESSAGE_BYTES]
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.best_time import best_of  # noqa: E402
from yagent.workers.llm import Message, ToolCall  # noqa: E402
from yagent.workers.memory import rollout_records as records  # noqa: E402
from yagent.workers.memory.rollout_writer import RolloutWriter, encode  # noqa: E402


def sample(count: int, size: int) -> list[dict]:
    out = []
    for i in range(count):
        if i % 2:
            message = Message.tool(f"call_{i}", "x" * size, name="read_file")
        else:
            message = Message.assistant("y" * (size // 4), reasoning="z" * (size // 4),
                                        tool_calls=(ToolCall(f"call_{i + 1}", "read_file", '{"path": "a.py"}'),))
        out.append(records.response_item(message, i // 2))
    return out


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    size = int(sys.argv[2]) if len(sys.argv) > 2 else 512
    recs = sample(count, size)
    with tempfile.TemporaryDirectory(prefix="yg-bench-") as tmp:
        directory = Path(tmp)
        serial = iter(range(1_000_000))
        enqueue_times: list[float] = []

        def writer() -> None:
            path = directory / f"w{next(serial)}.jsonl"
            w = RolloutWriter(path)
            started = time.perf_counter()
            for rec in recs:
                w.enqueue(rec)
            enqueue_times.append(time.perf_counter() - started)
            assert w.close(600) and w.written == count, w.error

        def bare() -> None:
            path = directory / f"b{next(serial)}.jsonl"
            with path.open("ab") as fh:
                for rec in recs:
                    fh.write(encode(rec))
                fh.flush()
                os.fsync(fh.fileno())

        nbytes = sum(len(encode(rec)) for rec in recs)
        w_s = best_of(writer)
        b_s = best_of(bare)
    print(f"{count} records, {nbytes / count:.0f} bytes each ({nbytes / 1e6:.1f} MB)")
    print(f"rollout writer: {count / w_s:12,.0f} records/s  ({w_s * 1000:.1f} ms, enqueue alone "
          f"{min(enqueue_times) * 1000:.1f} ms = {count / min(enqueue_times):,.0f} records/s seen by the loop)")
    print(f"bare buffered : {count / b_s:12,.0f} records/s  ({b_s * 1000:.1f} ms)")
    print(f"ratio writer/bare: {b_s / w_s:.2f}")


if __name__ == "__main__":
    main()
