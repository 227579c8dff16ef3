"""Streaming overhead of the engines per SSE chunk, against a bare httpx loop over the same bytes.

Run from the repository root: `.venv/bin/python bench/llm_streaming.py [--chunks N] [--rounds R]`.

The fake provider runs in a subprocess (so it does not share our GIL) and serves one pre-rendered
stream in large HTTP chunks, so the client side dominates. Per format, three readers consume the same
bytes, interleaved round by round:
  bare-lines  httpx `aiter_lines()` only (the floor: what any client pays to get lines);
  bare-json   `aiter_lines()` + `json.loads` of each data line (the least any real client must do);
  engine      the full engine: SSE parsing, deltas, tool-call assembly, usage, retry/lease wrappers.
The ratio engine / bare-json is the figure the issue targets (<= 1.5x). Not asserted anywhere.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.fake_provider import Script, Step  # noqa: E402
from tests.fake_provider._wire import render_anthropic, render_openai  # noqa: E402
from tests.fake_provider.provider_process import start_provider_process  # noqa: E402
from yagent.ipc.provider_config import LLMSettings, ProviderConfig  # noqa: E402
from yagent.workers.llm import Message, engine_for_provider  # noqa: E402

MARKER = "You are the streaming benchmark."


def raw_stream(api_format: str, chunks: int) -> list[str]:
    """One response with about `chunks` text events, split into 64 KiB HTTP chunks."""
    step = Step(text="word " * chunks, chunk_size=5)
    body = {"model": "bench-model", "stream": True, "stream_options": {"include_usage": True}}
    render = render_anthropic if api_format == "anthropic" else render_openai
    text = "".join(render(step, body, 1, 1000).events)
    return [text[i:i + 65536] for i in range(0, len(text), 65536)]


def request(api_format: str) -> tuple[str, dict[str, object]]:
    if api_format == "anthropic":
        return "/v1/messages", {"model": "bench-model", "max_tokens": 8192, "system": MARKER,
                                "messages": [{"role": "user", "content": "go"}], "stream": True}
    return "/v1/chat/completions", {"model": "bench-model", "stream": True,
                                    "stream_options": {"include_usage": True},
                                    "messages": [{"role": "system", "content": MARKER},
                                                 {"role": "user", "content": "go"}]}


async def bare(client: httpx.AsyncClient, base: str, api_format: str, parse: bool) -> int:
    path, body = request(api_format)
    events = 0
    loads = json.loads
    async with client.stream("POST", base + path, json=body) as response:
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                events += 1
                if parse and line != "data: [DONE]":
                    loads(line[6:])
    return events


async def run(api_format: str, chunks: int, rounds: int) -> None:
    proc, base = start_provider_process()
    try:
        payload = raw_stream(api_format, chunks)
        scripts = [Script("bench", MARKER, [Step(raw=payload) for _ in range(rounds * 3 + 3)]).to_dict()]
        async with httpx.AsyncClient(timeout=60) as client:
            (await client.post(base + "/_fake/scripts", json=scripts)).raise_for_status()
            url = base + "/v1" if api_format == "openai" else base
            provider = ProviderConfig(name="bench", model="bench-model", api_base_url=url, api_key="k",
                                      api_format=api_format)
            engine = engine_for_provider(provider, settings=LLMSettings(timeout=120), client=client)
            messages = [Message.system(MARKER), Message.user("go")]

            async def via_engine() -> int:
                count = 0
                async with engine.complete(messages) as stream:
                    async for _ in stream:
                        count += 1
                    await stream.final()
                return count

            events = await bare(client, base, api_format, parse=True)  # warm-up: connection, imports
            await via_engine()
            await bare(client, base, api_format, parse=False)
            times: dict[str, list[float]] = {"bare-lines": [], "bare-json": [], "engine": []}
            for _ in range(rounds):
                for name, reader in (("bare-lines", lambda: bare(client, base, api_format, False)),
                                     ("bare-json", lambda: bare(client, base, api_format, True)),
                                     ("engine", via_engine)):
                    started = time.perf_counter()
                    await reader()
                    times[name].append(time.perf_counter() - started)
    finally:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.close()
        proc.wait(10)
        proc.stdout.close()
    best = {name: min(values) for name, values in times.items()}
    median = {name: statistics.median(values) for name, values in times.items()}
    print(f"[{api_format}] {events} SSE events per response, {rounds} rounds (best / median per event)")
    for name in times:
        print(f"  {name:<11} {best[name] / events * 1e6:7.2f} us  {median[name] / events * 1e6:7.2f} us")
    print(f"  ratio engine / bare-json  : {best['engine'] / best['bare-json']:.2f}x best, "
          f"{median['engine'] / median['bare-json']:.2f}x median (target <= 1.5x)")
    print(f"  ratio engine / bare-lines : {best['engine'] / best['bare-lines']:.2f}x best")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    for api_format in ("openai", "anthropic"):
        asyncio.run(run(api_format, args.chunks, args.rounds))


if __name__ == "__main__":
    main()
