"""Many concurrent runs sharing a small in-flight LLM limit: how close the wall time comes to the lease bound.

A real daemon and real workers; only the model is scripted. The fake provider runs in its own process and
answers each response over a fixed time (spread over its events, so the request is open for that long).
RUNS Director turns are submitted at once, spread evenly over PROJECTS projects; each makes STEPS model
requests (STEPS − 1 that list the project directory, then a final answer). With `[llm] max_in_flight_requests`
= LIMIT, no schedule can beat the lease bound: RUNS × STEPS × MODEL_SECONDS / LIMIT (the issue's 50 s for
100 runs × 4 responses × 0.5 s / 4). Efficiency = lease bound / wall; every gap between one request's end and
the next one's start on a freed slot (a hand-over through a timer, a late grant) lowers it.
The baseline, measured in the same run against the same provider: the very same number of requests sent by a
bare httpx loop that keeps exactly LIMIT in flight (the provider and HTTP, without yagent).
The daemon first serves one warm-up turn, as a long-lived daemon has (the forkserver preloads meanwhile).
Usage: python bench/concurrent_runs.py [RUNS] [PROJECTS] [LIMIT] [MODEL_SECONDS] [STEPS]
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.agent_harness import MARKERS, run_turn  # noqa: E402
from tests.daemon_harness import DaemonProcess, arun, collect_turn, of_type, submit  # noqa: E402
from tests.fake_provider import Script, Step, ToolCallSpec  # noqa: E402
from tests.fake_provider._wire import render_openai  # noqa: E402
from tests.fake_provider.provider_process import start_provider_process  # noqa: E402

_STREAM_BODY = {"stream": True, "stream_options": {"include_usage": True}}


def paced(step: Step, seconds: float) -> Step:
    """`step` answered over `seconds`: the provider's per-event pause, spread over the events it renders."""
    events = len(render_openai(step, _STREAM_BODY, 0, 0).events)
    step.latency = seconds / events
    return step


def bare_baseline(base_url: str, requests: int, limit: int, step: Step) -> float:
    """`requests` paced responses through exactly `limit` bare HTTP clients that never leave a slot idle."""
    body = {"model": "fake-model", "messages": [{"role": "system", "content": "bare"},
                                                {"role": "user", "content": "go"}], **_STREAM_BODY}
    with httpx.Client() as client:
        script = Script("bare", "bare", [step] * requests)
        client.post(f"{base_url}/_fake/scripts", json=[script.to_dict()]).raise_for_status()

    async def go() -> float:
        left = requests

        async def lane(http: httpx.AsyncClient) -> None:
            nonlocal left
            while left > 0:
                left -= 1
                async with http.stream("POST", f"{base_url}/v1/chat/completions", json=body,
                                       headers={"Authorization": "Bearer fake-key"}) as response:
                    async for _line in response.aiter_lines():
                        pass

        started = time.perf_counter()
        clients = [httpx.AsyncClient() for _ in range(limit)]
        try:
            await asyncio.gather(*(lane(c) for c in clients))
        finally:
            for c in clients:
                await c.aclose()
        return time.perf_counter() - started

    return asyncio.run(go())


def slot_figures(requests: list[dict], limit: int) -> tuple[float, float, float]:
    """(mean seconds a request was open at the provider, mean and p95 idle seconds of a slot between a request's
    end and the next start): the k-th start after the first `limit` needs the (k − limit)-th end."""
    spans = [(r["received_at"], r["finished_at"]) for r in requests if r.get("finished_at")]
    if len(spans) <= limit:
        return 0.0, 0.0, 0.0
    starts = sorted(s for s, _ in spans)
    ends = sorted(e for _, e in spans)
    gaps = sorted(max(0.0, starts[k] - ends[k - limit]) for k in range(limit, len(starts)))
    return (sum(e - s for s, e in spans) / len(spans), sum(gaps) / len(gaps), gaps[int(len(gaps) * 0.95)])


def main() -> None:
    args = sys.argv[1:]
    runs = int(args[0]) if len(args) > 0 else 100
    projects = int(args[1]) if len(args) > 1 else 10
    limit = int(args[2]) if len(args) > 2 else 4
    model_time = float(args[3]) if len(args) > 3 else 0.5
    steps = int(args[4]) if len(args) > 4 else 4
    root = Path(tempfile.mkdtemp(prefix="ygb-"))
    dirs = [root / f"project{p}" for p in range(projects)]
    for d in dirs:
        d.mkdir()
        (d / "notes.txt").write_text("a file to list\n")

    def look() -> Step:
        return paced(Step(tool_calls=[ToolCallSpec("list_dir", {"path": "."})], chunk_size=1000), model_time)

    def answer() -> Step:
        return paced(Step(text="done", chunk_size=1000, tool_calls=[ToolCallSpec("agent_exit", {"summary": "done"})]),
                     model_time)

    scripts = [Script("warm", MARKERS["director"], [answer()], user_contains="warm up")]
    scripts += [Script(f"job{i}", MARKERS["director"], [look() for _ in range(steps - 1)] + [answer()],
                       user_contains=f"job {i}.") for i in range(runs)]
    provider, base_url = start_provider_process(scripts, root)
    config = (f"[llm]\nmax_in_flight_requests = {limit}\n[daemon]\nmax_workers = {runs + 4}\n"
              "[global.llm]\nuse_provider = \"fake\"\n[global.llm.providers.fake]\n"
              f"api_base_url = \"{base_url}/v1\"\napi_key = \"fake-key\"\nmodel = \"fake-model\"\n")
    try:
        daemon = DaemonProcess(root / "d", config).start()
        try:
            run_turn(daemon, dirs[0], "warm up", timeout=120)

            async def all_turns() -> list[str]:
                async with daemon.client() as c:
                    subs = [await submit(c, dirs[i % projects], f"job {i}. Look around, then answer.",
                                         agent="director") for i in range(runs)]
                    results = await asyncio.gather(*(collect_turn(c, s.task, turn=s.turn) for s in subs))
                return [of_type(events, "turn_finished")[0].data["status"] for events in results]

            started, since = time.perf_counter(), time.monotonic()  # monotonic: the provider's clock too
            statuses = arun(all_turns(), timeout=runs * steps * model_time * 4 + 120)
            wall, until = time.perf_counter() - started, time.monotonic()
            stats = daemon.status()
        finally:
            daemon.close()
        baseline = bare_baseline(base_url, runs * steps, limit, answer())
        with httpx.Client() as client:
            problems = client.get(f"{base_url}/_fake/problems").json()
            recorded = client.get(f"{base_url}/_fake/requests").json()
    finally:
        provider.communicate("")
    bound = runs * steps * model_time / limit
    done = sum(1 for s in statuses if s == "done")
    print(f"{runs} runs over {projects} projects, {steps} model requests each, {model_time} s per response, "
          f"in-flight limit {limit}; {done}/{runs} completed"
          + (f"; provider problems: {problems}" if problems else ""))
    print(f"leases: {stats.leases}")
    print(f"wall {wall:.2f} s; lease bound {bound:.2f} s → efficiency {bound / wall:.1%} (target ≥ 95 %)")
    jobs = [r for r in recorded if r["identity"].startswith("job")]
    held, gap, gap95 = slot_figures(jobs, limit)
    first = min(r["received_at"] for r in jobs) - since
    last = until - max(r["finished_at"] or until for r in jobs)
    print(f"first request at the provider {first * 1000:.0f} ms after the first submit; the last turn seen finished "
          f"{last * 1000:.0f} ms after the last response ended")
    bare_held, bare_gap, bare_gap95 = slot_figures([r for r in recorded if r["identity"] == "bare"], limit)
    print(f"at the provider: a request open {held * 1000:.0f} ms on average; a freed slot idle until the next "
          f"request {gap * 1000:.1f} ms on average, p95 {gap95 * 1000:.1f} ms (bare: open {bare_held * 1000:.0f} ms, "
          f"idle {bare_gap * 1000:.1f} ms, p95 {bare_gap95 * 1000:.1f} ms)")
    print(f"bare baseline (same requests, {limit} httpx lanes, same provider) {baseline:.2f} s → "
          f"efficiency {bound / baseline:.1%}; yagent / bare = {wall / baseline:.3f}")
    if done < runs:
        sys.exit(f"only {done} of {runs} turns completed: the figures above do not measure the lease hand-over")


if __name__ == "__main__":
    main()
