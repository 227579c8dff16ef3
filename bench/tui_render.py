"""Client CPU while the TUI renders a stream of chunks, and keypress-to-screen latency under that load.

Run from the repository root: `.venv/bin/python bench/tui_render.py [--rate 2000] [--seconds 5]`.

The real application runs in-process with its production redraw settings, drawing VT100 output for a
120x40 terminal into /dev/null; events come through the controller's real path (event pump → task
view → invalidate) from an in-memory daemon. Three runs over the same chunk stream, same rate:
  baseline   the feeder appends each event to a list (what any client pays to receive the stream);
  state      events applied to the task view, nothing drawn;
  tui        the full-screen application drawing; a key is typed every 100 ms and the time until a
             render shows it is the latency.
CPU is process time over wall time; each render's own CPU time is printed too (its median). Figures and the
tui/baseline ratio are printed, not asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import sys
import time
from collections import deque
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from prompt_toolkit.data_structures import Size  # noqa: E402
from prompt_toolkit.input import create_pipe_input  # noqa: E402
from prompt_toolkit.output.vt100 import Vt100_Output  # noqa: E402

from tests.client.doubles import FakeBackend  # noqa: E402
from yagent.client.tui.app import TuiApp  # noqa: E402
from yagent.client.tui.controller import TuiController, TuiOptions  # noqa: E402
from yagent.client.tui.state import TaskView  # noqa: E402
from yagent.ipc.messages import Event  # noqa: E402

WORDS = ["stream ", "token ", "回答 ", "delta ", "chunk ", "文本 ", "value, ", "end.\n"]


def chunk(i: int) -> str:
    return WORDS[i % len(WORDS)]


async def feed(emit, rate: int, seconds: float) -> int:
    """Call emit(i) `rate` times a second for `seconds`, in 5 ms batches on a fixed schedule."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    sent = 0
    tick = 0.005
    while True:
        elapsed = loop.time() - start
        if elapsed >= seconds:
            return sent
        due = int(elapsed * rate)
        while sent < due:
            emit(sent)
            sent += 1
        await asyncio.sleep(tick)


def measure(fn):
    async def run():
        wall0, cpu0 = time.perf_counter(), time.process_time()
        extra = await fn()
        return time.perf_counter() - wall0, time.process_time() - cpu0, extra

    return asyncio.run(run())


async def baseline(rate: int, seconds: float) -> int:
    sink: list[Event] = []
    ts = time.time()
    return await feed(lambda i: sink.append(Event(i + 1, "t1", "r1", "director", "ai_chunk", ts, {"text": chunk(i)})),
                      rate, seconds)


async def state_only(rate: int, seconds: float) -> int:
    view = TaskView(project="/bench", task="t1")
    ts = time.time()
    view.apply(Event(0, "t1", "r1", "director", "turn_started", ts, {"turn": 1, "text": "go"}))
    return await feed(lambda i: view.apply(Event(i + 1, "t1", "r1", "director", "ai_chunk", ts,
                                                 {"text": chunk(i)})), rate, seconds)


async def tui(rate: int, seconds: float, columns: int, rows: int) -> tuple[int, int, list[float]]:
    backend = FakeBackend("/bench")
    backend.add_task("t1", state="running")
    backend.emit("t1", "turn_started", {"turn": 1, "text": "benchmark", "agent": "director"})
    controller = TuiController(backend, TuiOptions(project=Path("/bench")), liveness_interval=3600)
    devnull = open(os.devnull, "w")  # noqa: SIM115 - closed below, after the application
    output = Vt100_Output(devnull, lambda: Size(rows=rows, columns=columns), term="xterm-256color")
    latencies: list[float] = []
    render_times: list[float] = []
    renders = 0
    with create_pipe_input() as pipe:
        app = TuiApp(controller, input=pipe, output=output)  # production redraw settings
        pending: deque[tuple[int, float]] = deque()

        render_started = [0.0]

        def before_render(_app) -> None:
            render_started[0] = time.thread_time()  # CPU time: other processes on the machine do not inflate it

        def after_render(_app) -> None:
            nonlocal renders
            renders += 1
            now = time.perf_counter()
            render_times.append(time.thread_time() - render_started[0])
            typed = len(app.buffer.text)
            while pending and typed >= pending[0][0]:
                latencies.append(now - pending.popleft()[1])

        app.application.before_render += before_render
        app.application.after_render += after_render
        await controller.start("t1", latest=False)
        gc.freeze()  # as `run_tui` does once attached: what exists then is left out of later collections
        runner = asyncio.get_running_loop().create_task(app.application.run_async())
        await asyncio.sleep(0.2)

        async def typist() -> None:
            n = 0
            while True:
                await asyncio.sleep(0.1)
                n += 1
                pending.append((n, time.perf_counter()))
                pipe.send_text("x")

        typing = asyncio.get_running_loop().create_task(typist())
        sent = await feed(lambda i: backend.emit("t1", "ai_chunk", {"text": chunk(i)}), rate, seconds)
        typing.cancel()
        controller.detach()
        await runner
        await controller.aclose()
    devnull.close()
    return sent, renders, latencies, render_times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=2000, help="chunks per second")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--columns", type=int, default=120)
    parser.add_argument("--rows", type=int, default=40)
    args = parser.parse_args()
    print(f"stream: {args.rate} chunks/s for {args.seconds:.0f}s, terminal {args.columns}x{args.rows}")
    results = {}
    for name, fn in (("baseline", lambda: baseline(args.rate, args.seconds)),
                     ("state", lambda: state_only(args.rate, args.seconds)),
                     ("tui", lambda: tui(args.rate, args.seconds, args.columns, args.rows))):
        wall, cpu, extra = measure(fn)
        results[name] = (wall, cpu, extra)
        sent = extra[0] if isinstance(extra, tuple) else extra
        print(f"  {name:<9} {sent / wall:8.0f} chunks/s delivered   CPU {100 * cpu / wall:5.1f}% of one core")
    _wall, _cpu, (_sent, renders, latencies, render_times) = results["tui"]
    base_cpu = results["baseline"][1] / results["baseline"][0]
    tui_cpu = results["tui"][1] / results["tui"][0]
    print(f"  renders   {renders / results['tui'][0]:.1f} per second, "
          f"{1000 * statistics.median(render_times):.1f} ms CPU each (median)")
    if latencies:
        ms = sorted(1000 * x for x in latencies)
        p95 = ms[min(len(ms) - 1, int(0.95 * len(ms)))]
        print(f"  keypress→screen latency under load: p50 {statistics.median(ms):.1f} ms, p95 {p95:.1f} ms, "
              f"max {ms[-1]:.1f} ms ({len(ms)} keys)")
    print(f"  ratio tui/baseline CPU: {tui_cpu / base_cpu:.1f}x  (state/baseline: "
          f"{(results['state'][1] / results['state'][0]) / base_cpu:.1f}x)")


if __name__ == "__main__":
    main()
