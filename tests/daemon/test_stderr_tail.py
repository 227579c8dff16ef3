"""A daemon child's stderr is kept by its last lines, each cut short: a line that never ends and a flood of lines
cost a bounded tail, read from a real pipe."""

from __future__ import annotations

import asyncio
import sys

from yagent.daemon.stderr_tail import STDERR_LINE_CHARS, STDERR_TAIL, StderrTail

CHILD = r"""
import sys
w = sys.stderr.buffer
w.write(b"x" * 5_000_000)          # a line that never ends
w.write(b"\n\xff\xfe broken utf-8\n\n   \n")
for i in range(1000):
    w.write(b"line %d " % i + b"y" * 1000 + b"\n")
w.write(b"last words without a newline")
"""


async def _tail_of_child() -> tuple[StderrTail, list[str]]:
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", CHILD, stderr=asyncio.subprocess.PIPE)
    seen: list[str] = []
    tail = StderrTail(seen.append)
    assert proc.stderr is not None
    await asyncio.wait_for(tail.read(proc.stderr), 60)
    await proc.wait()
    return tail, seen


def test_a_flood_and_an_endless_line_leave_a_bounded_tail_ending_with_the_last_words() -> None:
    tail, seen = asyncio.run(_tail_of_child())
    lines = list(tail.lines)
    assert len(lines) == STDERR_TAIL and all(len(line) <= STDERR_LINE_CHARS for line in lines)
    assert lines[-1] == "last words without a newline" and lines[-2].startswith("line 999 ")
    assert seen[0] == "x" * STDERR_LINE_CHARS and seen[1].startswith("\ufffd")  # the endless line: its start only
    assert "\ufffd\ufffd broken utf-8" in seen and "" not in seen  # bad bytes replaced, blank lines dropped
    assert sum(1 for line in seen if line.startswith("line ")) == 1000
