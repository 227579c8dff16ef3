"""Orchestration overhead of a scripted 20-delegation session.

A real daemon and real workers; only the model is scripted. The fake provider runs in its own process
(so the client reading events here does not slow the model down), and each response takes a fixed
time. The Director delegates to Chat 20 times in a row, so the model's time is on the critical path
end to end. Baseline, measured in the same run against the same server: the very request bodies the
session sent, replayed one after another by a bare httpx loop and answered with the same scripted
responses (the model plus HTTP, without yagent).
Overhead = session wall − baseline wall. Target: overhead ≤ 5 % of wall time.
The daemon first serves one warm-up turn (a direct answer), as a long-lived daemon has: the first worker
after a daemon start waits for the forkserver to finish preloading. That cold start is printed on its own.
Also prints CPU seconds of the daemon and of all workers.
Usage: python bench/delegation_session.py [DELEGATIONS] [MODEL_SECONDS]
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.agent_harness import MARKERS, run_turn  # noqa: E402
from tests.daemon_harness import DaemonProcess, of_type  # noqa: E402
from tests.fake_provider import Script, Step, ToolCallSpec  # noqa: E402


def start_provider(scripts: list[Script], root: Path) -> tuple[subprocess.Popen[str], str]:
    path = root / "scripts.json"
    path.write_text(json.dumps([s.to_dict() for s in scripts]))
    proc = subprocess.Popen([sys.executable, "-m", "tests.fake_provider", "--scripts", str(path)], cwd=str(REPO),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    assert line.startswith("FAKE_PROVIDER_URL="), line
    return proc, line.split("=", 1)[1]


def bare_baseline(base_url: str, replay: list[Step], skip: int) -> float:
    with httpx.Client() as client:
        bodies = [r["body"] for r in client.get(f"{base_url}/_fake/requests").json()][skip:]
        # The session's scripts are exhausted now; this one answers every replayed body, in order.
        script = Script("bare", "yagent", replay, regex=True)
        client.post(f"{base_url}/_fake/scripts", json=[script.to_dict()]).raise_for_status()
        started = time.perf_counter()
        for body in bodies:
            with client.stream("POST", f"{base_url}/v1/chat/completions", json=body,
                               headers={"Authorization": "Bearer fake-key"}) as response:
                for _line in response.iter_lines():
                    pass
        return time.perf_counter() - started


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    model_time = float(sys.argv[2]) if len(sys.argv) > 2 else 0.25
    root = Path(tempfile.mkdtemp(prefix="ygb-"))
    project = root / "project"
    project.mkdir()
    text = "x" * 100
    warm_up = Step(text="ready", tool_calls=[ToolCallSpec("agent_exit", {"summary": "ready"})])
    director = [Step(tool_calls=[ToolCallSpec("delegate_chat", {"task": f"question {i}"})], latency=model_time / 4)
                for i in range(n)]
    director.append(Step(text=text, chunk_size=10, latency=model_time / 12,
                         tool_calls=[ToolCallSpec("agent_exit", {"summary": "done"})]))
    chat = [Step(text=text, chunk_size=10, latency=model_time / 12,
                 tool_calls=[ToolCallSpec("agent_exit", {"summary": "answer"})]) for _ in range(n)]
    # The baseline gets the very same responses, in the order the session asked for them.
    bare = [step for pair in zip(director, chat, strict=False) for step in pair] + [director[-1]]
    provider, base_url = start_provider([Script("director", MARKERS["director"], [warm_up, *director]),
                                         Script("chat", MARKERS["chat"], chat)], root)
    config = ("[global.llm]\nuse_provider = \"fake\"\n[global.llm.providers.fake]\n"
              f"api_base_url = \"{base_url}/v1\"\napi_key = \"fake-key\"\nmodel = \"fake-model\"\n")
    try:
        daemon = DaemonProcess(root / "d", config).start()
        try:
            cold_started = time.perf_counter()
            run_turn(daemon, project, "Are you there?", timeout=120)
            cold = time.perf_counter() - cold_started
            proc = psutil.Process(daemon.proc.pid)
            cpu0 = sum(proc.cpu_times()[:2])
            started = time.perf_counter()
            _, events = run_turn(daemon, project, "Ask the chat agent twenty questions.", timeout=600)
            wall = time.perf_counter() - started
            daemon_cpu = sum(proc.cpu_times()[:2]) - cpu0
        finally:
            daemon.close()
        baseline = bare_baseline(base_url, bare, skip=1)
    finally:
        provider.communicate("")
    worker_cpu = sum(e.data.get("cpu_seconds", 0.0) for e in of_type(events, "run_finished"))
    status = of_type(events, "turn_finished")[0].data["status"]
    overhead = wall - baseline
    print(f"warm-up turn right after the daemon started (forkserver still preloading): {cold:.2f} s")
    print(f"session: {n} delegations, {len(bare)} model requests, status {status}")
    print(f"wall {wall:.2f} s; baseline (same responses, bare httpx loop) {baseline:.2f} s")
    print(f"orchestration overhead {overhead:.2f} s = {overhead / wall:.1%} of wall (target ≤ 5 %); "
          f"{overhead / n * 1000:.0f} ms per delegation")
    print(f"CPU: daemon {daemon_cpu:.2f} s, workers {worker_cpu:.2f} s ({worker_cpu / (n + 1):.3f} s per run)")


if __name__ == "__main__":
    main()
