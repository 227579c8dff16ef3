"""The code server's index over a real corpus of at least 300 000 lines (Python files of this virtualenv's
site-packages, copied into a scratch project), against a plain read of the same files in the same run.

Printed: the cold build (time, lines/s, peak RSS of the process that builds, index size on disk), a warm start over
the stored index (nothing parsed again), the latency of each tool warm (p50 / p99; target p50 <= 20 ms), and an
incremental update after one file changes (p50 / max of `refresh()`; target <= 100 ms) with the time until the
search model has caught up in the background. Each build runs in a fresh process (numbers not skewed by the
parent's memory); the baseline reads the same files in another fresh process.
Usage: python bench/codeintel.py [MIN_LINES]
"""

from __future__ import annotations

import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def corpus(target: Path, min_lines: int) -> tuple[int, int]:
    """Copy whole packages of site-packages (sorted by name) until `min_lines` lines are in; (files, lines)."""
    site = Path(sysconfig.get_paths()["purelib"])
    files = lines = 0
    packages = sorted(p for p in site.iterdir() if p.is_dir() and not p.name.endswith((".dist-info", "__pycache__")))
    for package in packages:
        for path in sorted(package.rglob("*.py")):
            if "__pycache__" in path.parts or path.is_symlink():
                continue
            data = path.read_bytes()
            if len(data) > 1024 * 1024:
                continue
            out = target / path.relative_to(site)
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(data)
            files += 1
            lines += data.count(b"\n")
        if lines >= min_lines:
            break
    return files, lines


def child_read(root: str) -> dict:
    import psutil

    began = time.perf_counter()
    total = 0
    for directory, _dirs, names in os.walk(root):
        for name in names:
            with open(os.path.join(directory, name), "rb") as fh:
                total += len(fh.read())
    return {"seconds": time.perf_counter() - began, "bytes": total, "rss": psutil.Process().memory_info().rss}


def child_build(root: str, index: str) -> dict:
    import resource

    import psutil

    from tests.codeintel.trees import built, stop
    from yagent.workers.codeintel import indexer as indexer_module

    parsed = [0]
    real = indexer_module.parse

    def counting(data: bytes, rel: str):
        parsed[0] += 1
        return real(data, rel)

    indexer_module.parse = counting
    rss_before = psutil.Process().memory_info().rss
    began = time.perf_counter()
    queries = built(Path(root), Path(index), timeout=1800)
    seconds = time.perf_counter() - began
    result = {"seconds": seconds, "parsed": parsed[0], "files": len(queries.indexer.index.files),
              "rss_before": rss_before, "rss_after": psutil.Process().memory_info().rss,
              "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
              "chunks": len(queries.indexer.model or [])}
    stop(queries)
    return result


def child_queries(root: str, index: str, rounds: int) -> dict:
    from tests.codeintel.trees import built, stop
    from yagent.workers.codeintel.indexer import ProjectIndexer

    queries = built(Path(root), Path(index), timeout=1800)
    index_ = queries.indexer.index
    rng = random.Random(7)
    functions = sorted({s.name for e in index_.files.values() for s in e.facts.symbols if s.kind in
                        ("function", "method") and not s.name.startswith("_")})
    files = sorted(index_.files)
    words = ["parse config", "retry backoff", "read file", "connection pool", "serialize json", "thread lock",
             "http request headers", "cache expire", "validate schema", "encode utf8"]
    calls = {
        "semantic_search": lambda: queries.semantic_search(rng.choice(words)),
        "query_code_skeleton": lambda: queries.skeleton([rng.choice(files)]),
        "query_code_snippet": lambda: queries.snippet(rng.choice(functions)),
        "find_function_caller": lambda: queries.callers(rng.choice(functions)),
        "find_function_callee": lambda: queries.callees(rng.choice(functions)),
        "query_call_graph": lambda: queries.call_graph(rng.choice(functions), depth=2),
    }
    latency: dict[str, list[float]] = {}
    for tool, call in calls.items():
        for _ in range(20):  # warm-up
            call()
        samples = []
        for _ in range(rounds):
            began = time.perf_counter()
            call()
            samples.append(time.perf_counter() - began)
        latency[tool] = samples
    indexer: ProjectIndexer = queries.indexer
    target = Path(root) / files[len(files) // 2]
    original = target.read_bytes()
    updates, catch_up = [], []
    for i in range(20):
        target.write_bytes(original + f"\n\ndef bench_added_{i}(x):\n    return x\n".encode())
        began = time.perf_counter()
        changed, _removed = indexer.refresh()
        updates.append(time.perf_counter() - began)
        assert changed == 1
        deadline = time.monotonic() + 120
        while True:  # the background model rebuild: observed, bounded
            with indexer.lock:
                if indexer.model is not None and indexer.model.version >= indexer.index.version:
                    break
            if time.monotonic() > deadline:
                raise SystemExit("the search model never caught up")
            time.sleep(0.005)
        catch_up.append(time.perf_counter() - began)
    walk_began = time.perf_counter()
    indexer.refresh()  # nothing changed: the price of the check itself (one walk, a stat per file)
    idle_check = time.perf_counter() - walk_began
    target.write_bytes(original)
    stop(queries)
    return {"latency": latency, "updates": updates, "catch_up": catch_up, "idle_check": idle_check}


def run_child(*args: str) -> dict:
    done = subprocess.run([sys.executable, __file__, "--child", *args], capture_output=True, text=True, timeout=3600,
                          env={**os.environ, "PYTHONPATH": str(REPO), "OPENBLAS_NUM_THREADS": "1"})
    if done.returncode != 0:
        raise SystemExit(f"child {args[0]} failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def p50_p99(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        kind, *rest = sys.argv[2:]
        result = {"read": lambda: child_read(*rest), "build": lambda: child_build(*rest),
                  "queries": lambda: child_queries(rest[0], rest[1], int(rest[2]))}[kind]()
        print(json.dumps(result))
        return
    min_lines = int(sys.argv[1]) if len(sys.argv) > 1 else 300_000
    scratch = Path(tempfile.mkdtemp(prefix="yagent-bench-codeintel-"))
    try:
        root, index = scratch / "project", scratch / "index"
        files, lines = corpus(root, min_lines)
        megabytes = sum(p.stat().st_size for p in root.rglob("*.py")) / 1e6
        print(f"corpus: {files} Python files, {lines} lines ({megabytes:.1f} MB) from site-packages")
        read = run_child("read", str(root))
        cold = run_child("build", str(root), str(index))
        warm = run_child("build", str(root), str(index))
        size = sum(p.stat().st_size for p in index.iterdir())
        print(f"plain read of the same files: {read['seconds']:.2f} s")
        ratio = cold["seconds"] / read["seconds"]
        print(f"cold build: {cold['seconds']:.2f} s ({lines / cold['seconds']:.0f} lines/s; {ratio:.0f}x the plain "
              f"read), {cold['parsed']} files parsed, {cold['chunks']} search chunks")
        print(f"  memory: RSS {cold['rss_before'] / 2**20:.0f} MiB before, {cold['rss_after'] / 2**20:.0f} MiB after, "
              f"peak {cold['peak'] / 2**20:.0f} MiB (the plain read's process: {read['rss'] / 2**20:.0f} MiB); "
              f"index on disk {size / 2**20:.1f} MiB")
        print(f"warm start over the stored index: {warm['seconds']:.2f} s, {warm['parsed']} files parsed")
        result = run_child("queries", str(root), str(index), "200")
        print("warm query latency (200 calls each; target p50 <= 20 ms):")
        for tool, samples in result["latency"].items():
            p50, p99 = p50_p99(samples)
            print(f"  {tool:<22} p50 {ms(p50):>9}  p99 {ms(p99):>9}")
        p50, _ = p50_p99(result["updates"])
        caught_up = p50_p99(result["catch_up"])[0]
        print(f"incremental update after one file changed (refresh, 20 times; target <= 100 ms): p50 {ms(p50)}, "
              f"max {ms(max(result['updates']))}; search model caught up after p50 {ms(caught_up)}")
        print(f"a refresh that finds nothing changed (a walk and a stat per file): {ms(result['idle_check'])}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
