"""What opening beneath the project root costs the file tools, against opening by name, in the same run.

For a file four directories deep, the median time per operation of: replacing it (by name with
`write_atomic(path)`, as create_file did before, against a parent opened beneath the root and
`FileAccess.replace_file`, as it does now), and reading it (`open(path)` against `FileAccess.open`), each
with openat2 and with the O_NOFOLLOW walk. Then whole tool calls (create_file, read_file) through
`invoke_tool`, for scale. Prints microseconds and the ratio to the by-name baseline.
Usage: python bench/file_tools_beneath.py [ROUNDS]
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from yagent.ipc.atomic_file import write_atomic  # noqa: E402
from yagent.workers.tools import ToolCall, ToolContext, build_surface, invoke_tool  # noqa: E402
from yagent.workers.tools.beneath import FileAccess, Resolution, default_resolution  # noqa: E402

BATCH = 200


def per_op(fn: Callable[[], None], rounds: int) -> float:
    """Median microseconds per call over `rounds` batches of BATCH calls."""
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(BATCH):
            fn()
        samples.append((time.perf_counter() - start) / BATCH * 1e6)
    return statistics.median(samples)


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(os.path.realpath(tmp)) / "proj"
        deep = root / "a" / "b" / "c" / "d"
        deep.mkdir(parents=True)
        target = deep / "f.txt"
        target.write_bytes(b"x" * 4096)
        data = b"y" * 4096
        resolutions = [r for r in (Resolution.OPENAT2, Resolution.WALK)
                       if r is Resolution.WALK or default_resolution() is Resolution.OPENAT2]

        def by_name_write() -> None:
            write_atomic(target, data)

        def by_name_read() -> None:
            with open(target, "rb") as fh:
                fh.read()

        base_write = per_op(by_name_write, rounds)
        base_read = per_op(by_name_read, rounds)
        print(f"replace by name (write_atomic(path))      {base_write:8.1f} us   1.00x")
        for resolution in resolutions:
            files = FileAccess(root, resolution=resolution)

            def beneath_write(files: FileAccess = files) -> None:
                with files.directory(target.parent) as parent:
                    files.replace_file(parent, target.name, data)

            cost = per_op(beneath_write, rounds)
            print(f"replace beneath the root ({resolution.value:7})        {cost:8.1f} us   {cost / base_write:.2f}x")
        print(f"read by name (open(path))                 {base_read:8.1f} us   1.00x")
        for resolution in resolutions:
            files = FileAccess(root, resolution=resolution)

            def beneath_read(files: FileAccess = files) -> None:
                with files.opened(target) as fd, os.fdopen(os.dup(fd), "rb") as fh:
                    fh.read()

            cost = per_op(beneath_read, rounds)
            print(f"read beneath the root ({resolution.value:7})           {cost:8.1f} us   {cost / base_read:.2f}x")

        surface = build_surface("coding")
        for resolution in resolutions:
            ctx = ToolContext(project_root=root, scratch_dir=Path(tmp) / "scratch", resolution=resolution)
            for name, args in (("create_file", {"path": "a/b/c/d/f.txt", "content": "z" * 4096, "overwrite": True}),
                               ("read_file", {"path": "a/b/c/d/f.txt"})):
                async def calls(name: str = name, args: dict = args, ctx: ToolContext = ctx) -> float:
                    samples = []
                    for _ in range(rounds):
                        start = time.perf_counter()
                        for i in range(BATCH // 4):
                            await invoke_tool(surface, ToolCall(f"c{i}", name, args), ctx)
                        samples.append((time.perf_counter() - start) / (BATCH // 4) * 1e6)
                    return statistics.median(samples)

                print(f"{name} tool call ({resolution.value:7})           {asyncio.run(calls()):8.1f} us")


if __name__ == "__main__":
    main()
