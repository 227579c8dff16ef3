"""What the start checks of state.db cost, on a registry of N tasks (default 10 000), against a bare open.

Each task has a turn and two runs (a director and one delegation), with inputs and outputs of a few
hundred bytes, so the file is about the size a long-used registry reaches. Prints the time to open it
through `Registry` (quick_check, identity, version), `PRAGMA quick_check` alone, `PRAGMA integrity_check`
for comparison, and the baseline: a plain sqlite3 connect and one query, measured in the same run (page
cache warm: the daemon's own start has just read the file, or the machine has).
Usage: python bench/registry_open.py [N]
"""

from __future__ import annotations

import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from best_time import best_of  # noqa: E402

from yagent.daemon.registry import Registry  # noqa: E402


def build(path: Path, n: int) -> None:
    registry = Registry(path)
    project = registry.ensure_project(path.parent)
    for i in range(n):
        task = registry.create_task(project, f"task {i}: " + "refactor the parser " * 3)
        turn = registry.add_turn(task.id, "please " + "do the thing " * 20)
        registry.add_run(f"r{i:011d}", task.id, turn, None, "director", "", "do the thing " * 20)
        registry.add_run(f"c{i:011d}", task.id, turn, f"r{i:011d}", "coding", f"call{i}", "edit files " * 20)
        registry.finish_run(f"c{i:011d}", "done", "agent_exit", "changed 3 files " * 10, "")
        registry.finish_run(f"r{i:011d}", "done", "agent_exit", "all done " * 20, "")
        registry.finish_turn(task.id, turn, "done", "all done " * 20)
    registry.close()


def pragma(path: Path, sql: str) -> None:
    db = sqlite3.connect(path)
    try:
        assert db.execute(sql).fetchone()[0] == "ok"
    finally:
        db.close()


def bare(path: Path) -> None:
    db = sqlite3.connect(path)
    try:
        db.execute("SELECT id FROM tasks ORDER BY updated_at DESC LIMIT 1").fetchone()
    finally:
        db.close()


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    root = Path(tempfile.mkdtemp(prefix="ygr-", dir="/tmp"))
    try:
        path = root / "state.db"
        t0 = time.perf_counter()
        build(path, n)
        print(f"registry: {n} tasks, {2 * n} runs, {path.stat().st_size / 2**20:.1f} MiB "
              f"(built in {time.perf_counter() - t0:.1f}s)")
        t_bare = best_of(lambda: bare(path))
        t_quick = best_of(lambda: pragma(path, "PRAGMA quick_check"))
        t_full = best_of(lambda: pragma(path, "PRAGMA integrity_check"), 3)
        t_open = best_of(lambda: Registry(path).close())
        print(f"bare open + one query: {t_bare * 1000:.1f} ms")
        print(f"PRAGMA quick_check: {t_quick * 1000:.1f} ms; integrity_check: {t_full * 1000:.1f} ms")
        print(f"Registry open with every start check: {t_open * 1000:.1f} ms "
              f"(ratio to the bare open {t_open / t_bare:.1f})")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
