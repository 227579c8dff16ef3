"""What the run_bash exec helper costs a command: `bash -c true` started directly vs through the helper that
applies the nested Landlock domain (a Coding worker's command rules), interleaved in one run.

Usage: python bench/run_bash_sandbox.py [N]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from yagent.ipc.confinement import ConfinementSpec, landlock_abi
from yagent.workers.sandbox import policy

HELPER = Path(policy.__file__).with_name("shell_exec.py")


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    abi = landlock_abi()
    if abi < 1:
        print("this kernel has no Landlock: nothing to measure")
        return
    root = Path(tempfile.mkdtemp(prefix="ygb-", dir="/tmp"))
    for d in ("home/tasks/t1", "home/scratch/r1", "project"):
        (root / d).mkdir(parents=True)
    spec = ConfinementSpec(abi=abi, agent="coding", project_root=str(root / "project"), home=str(root / "home"),
                           runtime_dir=str(root), task_dir=str(root / "home/tasks/t1"),
                           scratch_dir=str(root / "home/scratch/r1"),
                           deny_read=[str(Path.home() / p) for p in (".ssh", ".gnupg", ".aws")])
    t0 = time.perf_counter()
    rules = policy.shell_rules(spec, writes_project=True)
    build_ms = (time.perf_counter() - t0) * 1000
    args = [a for r in rules for a in (str(r.access), r.path)]
    through = [sys.executable, "-E", "-s", "-S", str(HELPER), str(abi), str(len(rules)), *args, "--",
               "bash", "-c", "true"]
    direct, helped = [], []
    for _ in range(runs):
        for argv, into in ((["bash", "-c", "true"], direct), (through, helped)):
            t = time.perf_counter()
            subprocess.run(argv, check=True)
            into.append((time.perf_counter() - t) * 1000)
    d50, h50 = statistics.median(direct), statistics.median(helped)
    print(f"command rules: {len(rules)} (built once per run in {build_ms:.2f} ms)")
    print(f"bash -c true, direct          n={runs} p50={d50:6.2f} ms  min={min(direct):6.2f} ms")
    print(f"bash -c true, through helper  n={runs} p50={h50:6.2f} ms  min={min(helped):6.2f} ms")
    print(f"the helper adds {h50 - d50:+.2f} ms per command at p50 (ratio {h50 / d50:.2f})")


if __name__ == "__main__":
    main()
