"""Orchestration overhead of a scripted 20-delegation session.

A real daemon and real workers; only the model is scripted. The fake provider runs in its own process
(so the client reading events here does not slow the model down), and each response takes a fixed
time. The Director delegates to Chat 20 times in a row, so the model's time is on the critical path
end to end. Baseline, measured in the same run against the same server: the very request bodies the
session sent, replayed one after another by a bare httpx loop and answered with the same scripted
responses (the model plus HTTP, without yagent).
Overhead = session wall − baseline wall. Target: overhead ≤ 5 % of wall time. Also printed, from the provider's
own clock: the time it sat idle per delegation (from an answer's end to the next request, over both hops), in the
session and in the bare replay; their difference is the orchestration without the noise of two wall clocks.
The daemon first serves one warm-up turn (a direct answer), as a long-lived daemon has: the first worker
after a daemon start waits for the forkserver to finish preloading. That cold start is printed on its own.
Also prints CPU seconds of the daemon and of all workers.

The session runs twice, each with a daemon of its own: with `[daemon] warm_workers = 0` (every delegation forks
its worker: the baseline) and with the default pool (a delegation takes a warm worker; once the first runs have
reported the pages they copy on write, the warm worker has copied those before its run, `workers/page_warmth.py`, and
it has added the Landlock rules every run shares to its ruleset, its channel's context and its provider client made).
For each, the time of every delegation is broken into phases from the timestamps of the events it produced and of
the provider's record of each request (the workers', the daemon's and the provider's clocks are the same system
clock): the Director reading its model's answer and making the tool call, the request to the daemon, admission, the
fork or assignment, the hello, the start message with settings, tool surface and prompt assembly up to the first model
request, that request reaching the provider; after the sub-agent's answer was read, its result back to the daemon, the
parent resuming, and its next request reaching the provider. The phases add up to the provider's idle time per
delegation; the bare replay's is the part any HTTP client pays.
Usage: python bench/delegation_session.py [DELEGATIONS] [MODEL_SECONDS]
"""

from __future__ import annotations

import statistics
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
from tests.fake_provider.provider_process import start_provider_process  # noqa: E402


def bare_baseline(base_url: str, replay: list[Step], skip: int) -> tuple[float, list[dict]]:
    """The bare loop's wall time, and every request the provider saw (the session's, then the loop's)."""
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
        wall = time.perf_counter() - started
        return wall, client.get(f"{base_url}/_fake/requests").json()


def provider_gaps(requests: list[dict], skip: int, n: int) -> tuple[list[float], list[float]]:
    """Per delegation, in ms, the provider's idle time between the Director's answer and the Chat's request plus
    between the Chat's answer and the Director's next request: in the session, and in the bare replay of the same
    bodies. Both are the provider's own clock, so no client-side scheduling enters the figure."""
    total = 2 * n + 1
    session_requests, bare_requests = requests[skip:skip + total], requests[skip + total:skip + 2 * total]

    def per_delegation(reqs: list[dict]) -> list[float]:
        gaps = [(reqs[i + 1]["received_at"] - reqs[i]["finished_at"]) * 1000 for i in range(len(reqs) - 1)]
        return [gaps[2 * d] + gaps[2 * d + 1] for d in range(n)]

    return per_delegation(session_requests), per_delegation(bare_requests)


PHASES = ("director: model's last byte → answer", "director: answer → tool call", "request to daemon (→ run queued)",
          "admission (queued for a slot)", "fork / warm assignment", "launch → hello",
          "start message, settings, surface, prompt → first request", "sub-agent: call start → request at the model",
          "sub-agent: model's last byte → answer", "sub-agent: answer → agent_exit's result",
          "result back (agent_exit → run finished)", "parent resumes (→ tool result)", "parent → next model request",
          "director: call start → request at the model")


def breakdown(events: list, requests: list[dict]) -> list[list[float]]:
    """Per delegation, each of `PHASES` in milliseconds, from the session's events and the provider's record of the
    session's requests (its wall-clock stamps: the same clock as the events'). Together the phases cover the provider's
    idle time per delegation; its part spent in HTTP alone is the bare replay's."""
    by_run: dict[str, list] = {}
    for e in events:
        by_run.setdefault(e.run, []).append(e)
    rows = []
    delegations = [e for e in of_type(events, "run_started") if e.data.get("parent")]
    for d, started in enumerate(delegations):
        data = started.data
        parent, child, call = by_run[data["parent"]], by_run[started.run], data["call_id"]

        def first(evs: list, type_: str, after: float = 0.0, **match: object) -> float:
            return next(e.ts for e in evs if e.type == type_ and e.ts >= after
                        and all(e.data.get(k) == v for k, v in match.items()))

        t_call = first(parent, "tool_call_start", call_id=call)
        t_answer = max(e.ts for e in parent if e.type == "ai_response" and e.ts <= t_call)
        t_queued = first(parent, "run_queued", call_id=call)
        t_hello = started.ts
        t_request = first(child, "llm_call_start")  # the daemon may publish its hello after the worker went on
        t_child_answer = first(child, "ai_response", t_request)
        t_exit = max(e.ts for e in child if e.type == "tool_call_result")
        t_finished = first(child, "run_finished")
        t_back = first(parent, "tool_call_result", call_id=call)
        t_next = first(parent, "llm_call_start", t_back)
        forked, hello = data["forked_ms"], data["hello_ms"]
        queued = (t_hello - t_queued) * 1000 - hello  # from its queueing to its launch
        asked, answered, next_asked = requests[2 * d], requests[2 * d + 1], requests[2 * d + 2]
        seconds = [t_answer - asked["finished_wall"], t_call - t_answer, t_queued - t_call, None, None, None,
                   t_request - t_hello, answered["received_wall"] - t_request,
                   t_child_answer - answered["finished_wall"], t_exit - t_child_answer, t_finished - t_exit,
                   t_back - t_finished, t_next - t_back, next_asked["received_wall"] - t_next]
        row = [s * 1000 if s is not None else 0.0 for s in seconds]
        row[3:6] = [queued, forked, hello - forked]  # the daemon reports these in milliseconds
        rows.append(row)
    return rows


def session(n: int, model_time: float, warm_workers: int | None) -> dict:
    """One 20-delegation session on a daemon of its own, and its bare baseline."""
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
    provider, base_url = start_provider_process([Script("director", MARKERS["director"], [warm_up, *director]),
                                                 Script("chat", MARKERS["chat"], chat)], root)
    config = ("[global.llm]\nuse_provider = \"fake\"\n[global.llm.providers.fake]\n"
              f"api_base_url = \"{base_url}/v1\"\napi_key = \"fake-key\"\nmodel = \"fake-model\"\n")
    if warm_workers is not None:
        config += f"[daemon]\nwarm_workers = {warm_workers}\n"
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
        baseline, requests = bare_baseline(base_url, bare, skip=1)
    finally:
        provider.communicate("")
    worker_cpu = sum(e.data.get("cpu_seconds", 0.0) for e in of_type(events, "run_finished"))
    status = of_type(events, "turn_finished")[0].data["status"]
    warm = sum(1 for e in of_type(events, "run_started") if e.data.get("parent") and e.data.get("warm"))
    ahead = [e.data.get("prefaulted", 0) for e in of_type(events, "run_started") if e.data.get("parent")]
    rules = [e.data.get("rules_ahead", 0) for e in of_type(events, "run_started") if e.data.get("parent")]
    return {"cold": cold, "status": status, "requests": len(bare), "wall": wall, "baseline": baseline,
            "daemon_cpu": daemon_cpu, "worker_cpu": worker_cpu, "rows": breakdown(events, requests[1:2 * n + 2]),
            "warm": warm, "ahead": ahead, "rules": rules, "gaps": provider_gaps(requests, 1, n)}


def report(name: str, n: int, got: dict) -> float:
    wall, baseline = got["wall"], got["baseline"]
    overhead = wall - baseline
    ahead = got["ahead"]
    print(f"\n== {name}: {n} delegations ({got['warm']} on a warm worker, {sum(1 for a in ahead if a)} of them with "
          f"pages copied ahead, p50 {statistics.median(ahead) if ahead else 0:.0f} pages; "
          f"{sum(1 for r in got['rules'] if r)} with Landlock rules added ahead), {got['requests']} model requests, "
          f"status {got['status']}")
    print(f"warm-up turn right after the daemon started (forkserver still preloading): {got['cold']:.2f} s")
    print(f"wall {wall:.2f} s; baseline (same responses, bare httpx loop) {baseline:.2f} s")
    print(f"orchestration overhead {overhead:.2f} s = {overhead / wall:.1%} of wall (target ≤ 5 %); "
          f"{overhead / n * 1000:.1f} ms per delegation")
    gaps, bare_gaps = got["gaps"]
    idle, bare_idle = statistics.median(gaps), statistics.median(bare_gaps)
    print(f"at the provider, idle per delegation (answer → next request, both hops), p50: {idle:.2f} ms in the "
          f"session, {bare_idle:.2f} ms in the bare replay → {idle - bare_idle:.2f} ms of orchestration")
    print(f"CPU: daemon {got['daemon_cpu']:.2f} s, workers {got['worker_cpu']:.2f} s "
          f"({got['worker_cpu'] / (n + 1):.3f} s per run)")
    print_phases(PHASES, got["rows"])
    return overhead / n * 1000


def print_phases(phases: tuple[str, ...], rows: list[list[float]]) -> None:
    """Each phase's p50 and mean over the delegations (`rows`: milliseconds, one list per delegation), and the sum."""
    if not rows:
        return
    width = max(len(phase) for phase in phases)
    print(f"per delegation, in ms (p50 / mean over {len(rows)}):")
    for i, phase in enumerate(phases):
        column = [row[i] for row in rows]
        print(f"  {phase:<{width}} {statistics.median(column):7.2f} / {statistics.fmean(column):7.2f}")
    totals = [sum(row) for row in rows]
    print(f"  {'sum of the phases':<{width}} {statistics.median(totals):7.2f} / {statistics.fmean(totals):7.2f}")


def orchestration(got: dict) -> float:
    """The provider's idle time per delegation (p50), less the bare replay's: the orchestration, in ms."""
    gaps, bare_gaps = got["gaps"]
    return statistics.median(gaps) - statistics.median(bare_gaps)


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    model_time = float(sys.argv[2]) if len(sys.argv) > 2 else 0.25
    cold = report("every delegation forks its worker ([daemon] warm_workers = 0; baseline)", n,
                  session(n, model_time, 0))
    warm_session = session(n, model_time, None)
    warm = report("warm workers (the default pool)", n, warm_session)
    print(f"\noverhead per delegation: {warm:.1f} ms with warm workers against {cold:.1f} ms without, "
          f"ratio {warm / cold:.3f}  (target ≤ 10 ms)")
    # The floor: the same processes and libraries doing nothing else (bench/delegation_floor.py), on this machine now.
    from delegation_floor import floor_session
    floor = orchestration(floor_session(n, model_time))
    ours = orchestration(warm_session)
    print(f"at the provider, orchestration per delegation: {ours:.2f} ms with warm workers; the floor of the process "
          f"model (a skeleton of the same processes and libraries, bench/delegation_floor.py) {floor:.2f} ms; "
          f"yagent's own work {ours - floor:.2f} ms, ratio to the floor {ours / floor:.2f}")


if __name__ == "__main__":
    main()
