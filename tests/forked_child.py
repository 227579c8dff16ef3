"""Running a probe in a forked child, for tests of what a process may do once it has confined itself for good."""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable


def in_forked_child(fn: Callable[..., object], *args: object, timeout: float = 120) -> object:
    """`fn(*args)` in a forked child: what it returned, or the exception it raised (returned, not raised)."""
    ctx = multiprocessing.get_context("fork")
    reader, writer = ctx.Pipe(duplex=False)

    def run() -> None:
        try:
            writer.send(fn(*args))
        except BaseException as exc:  # the parent asserts on what happened: nothing may escape a forked pytest
            writer.send(exc)
        os._exit(0)

    child = ctx.Process(target=run)
    child.start()
    writer.close()
    assert reader.poll(timeout), "the child did not answer"
    got = reader.recv()
    child.join(30)
    return got
