"""An approved operation's cost: a `create_file` outside the project that the user allowed, carried out by a
process of its own from the forkserver (confined to the run's command rules plus the approved path, as yagentd
does it), against the same call made by the tool code in this process (what an unconfined run pays), in one run.

Both sides write a new file in the approved directory; the process side is timed from the launch to its result
on the pipe and its exit, as the daemon waits for them. Usage: python bench/approved_operation.py [N]
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from multiprocessing.connection import wait
from pathlib import Path

import msgpack

from yagent.daemon.launcher import MultiprocessingLauncher
from yagent.daemon.main import PRELOAD
from yagent.ipc.confinement import ConfinementSpec, landlock_abi
from yagent.ipc.vocabulary import YoloLevel
from yagent.workers.tools import REGISTRY
from yagent.workers.tools.context import ToolContext
from yagent.workers.tools.spec import Invocation


def _spec(root: Path) -> ConfinementSpec:
    home, project = root / "home", root / "project"
    for d in (home / "tasks" / "t1", home / "scratch" / "r1", project, root / "approved"):
        d.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    return ConfinementSpec(abi=landlock_abi(), agent="coding", project_root=str(project), home=str(home),
                           runtime_dir=str(root / "run"), task_dir=str(home / "tasks" / "t1"),
                           scratch_dir=str(home / "scratch" / "r1"))


def through_a_process(launcher: MultiprocessingLauncher, spec: ConfinementSpec, target: Path, i: int) -> float:
    request = {"tool": "create_file", "call_id": f"c{i}", "approved": [str(target.parent)],
               "args": {"path": str(target), "content": "approved\n"}}
    started = time.perf_counter()
    handle, reader = launcher.launch_operation(f"bench{i}", request, confinement=spec)
    got = msgpack.unpackb(reader.recv_bytes(1 << 20), raw=False)
    wait([handle.sentinel], timeout=10)
    elapsed = time.perf_counter() - started
    reader.close()
    handle.close()
    assert not got["is_error"] and target.exists(), got
    return elapsed


def in_this_process(spec: ConfinementSpec, target: Path, i: int) -> float:
    tool = REGISTRY.get("create_file")
    assert tool is not None
    ctx = ToolContext(project_root=Path(spec.project_root), run_id="bench", yolo=YoloLevel.FULL,
                      scratch_dir=Path(spec.scratch_dir))
    args = {"path": str(target), "content": "approved\n"}
    started = time.perf_counter()
    paths = {p: ctx.guard.resolve(args.get(p) or ".") for p in tool.path_params}
    result = asyncio.run(tool.executor(Invocation(tool, args, f"c{i}", ctx, None, paths)))
    elapsed = time.perf_counter() - started
    assert not result.is_error and target.exists(), result.content
    return elapsed


def report(name: str, samples: list[float]) -> float:
    ms = sorted(s * 1000 for s in samples)
    p50 = statistics.median(ms)
    print(f"{name:<34} n={len(ms):<4} p50={p50:7.2f} ms  p90={ms[int(len(ms) * 0.9)]:7.2f} ms  min={ms[0]:6.2f} ms")
    return p50


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    root = Path(tempfile.mkdtemp(prefix="ygb-op-", dir="/tmp"))
    spec = _spec(root)
    launcher = MultiprocessingLauncher("forkserver", preload=PRELOAD)
    launcher.start()
    through_a_process(launcher, spec, root / "approved" / "warm", -1)  # the forkserver's preload, not measured
    local, process = [], []
    for i in range(runs):  # interleaved: machine load falls on both alike
        local.append(in_this_process(spec, root / "approved" / f"local{i}", i))
        process.append(through_a_process(launcher, spec, root / "approved" / f"op{i}", i))
    launcher.stop()
    print("an approved create_file outside the project: its own confined process vs the tool code in-process")
    if not spec.abi:
        print("(this kernel has no Landlock: the process side runs unconfined)")
    base = report("in this process (baseline)", local)
    own = report("own process from the forkserver", process)
    print(f"ratio process/in-process p50 = {own / base:.1f}; added {own - base:+.2f} ms per approved operation "
          "(a user answered a prompt for it: seconds, not milliseconds)")


if __name__ == "__main__":
    main()
