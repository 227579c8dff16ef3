"""Context compression's own cost, against the full re-count it replaced, in the same run.

Run from the repository root: `.venv/bin/python bench/context_compression.py [--results N] [--chars C]`.

Figures (best of several runs):
  tier 1      cutting tool results of a session of N large results until enough is saved (about half of
              them), the incremental way (the ledger recounts only the message each cut changed) and the old
              way (the whole conversation re-counted with tiktoken after each cut); target <= 50 ms
  per step    the over-threshold check of one step as the session grows (N/4, N/2, N, 2N results): the
              ledger's (flat) and a full estimate with tiktoken's memo (grows with the session)
  tier 2      rewriting the session to [system, one user] around a ready summary (thinklink absorb, digest,
              the compacted text, the ledger's before/after), the model call excluded
  tier 3      the rebuild from a thinklink of N plans, cut to a budget
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from best_time import best_of  # noqa: E402

from yagent.ipc.compression_settings import CompressionSettings  # noqa: E402
from yagent.workers.context import tokens as tokens_module  # noqa: E402
from yagent.workers.context.emergency import KEEP_LAST, compacted_text, plan_digest  # noqa: E402
from yagent.workers.context.measurement import Prefix, over_threshold  # noqa: E402
from yagent.workers.context.rule_truncation import CHEAP, cut_result, truncate_tool_results  # noqa: E402
from yagent.workers.context.thinklink import ThinkLink  # noqa: E402
from yagent.workers.context.token_ledger import TokenLedger  # noqa: E402
from yagent.workers.context.tokens import count_tokens_exact, estimate_messages_tokens  # noqa: E402
from yagent.workers.context.ultimate import rebuilt_text  # noqa: E402
from yagent.workers.llm import Message, ToolCall  # noqa: E402

KEEP = CompressionSettings().tool_result_keep_tokens


def session(results: int, chars: int) -> list[Message]:
    """A system prompt, a request, and `results` steps each with a thought block and a large tool result."""
    line = "src/module.py:42: def handler(request, response): return response.render(template, context)\n"
    messages = [Message.system("You are the yagent Coding agent. " * 60), Message.user("Refactor the handlers.")]
    for i in range(results):
        thought = (f"<thought>\ngoal: refactor the handlers\nstep: read part {i}\nreason: next part\nplan:\n"
                   f"- [x] part {i - 1}\n- [>] part {i}\n- [ ] part {i + 1}\n</thought>")
        messages.append(Message.assistant(thought, tool_calls=(ToolCall(f"c{i}", "grep", '{"pattern": "def"}'),)))
        body = f"result {i}\n" + line * (chars // len(line))
        messages.append(Message.tool(f"c{i}", body, name="grep"))
    return messages


def _exact(message: Message) -> int:
    return 4 + count_tokens_exact(message.content) + count_tokens_exact(message.reasoning) + sum(
        6 + count_tokens_exact(c.name) + count_tokens_exact(c.arguments) for c in message.tool_calls)


def tier_one(results: int, chars: int) -> None:
    base = session(results, chars)
    whole = sum(_exact(m) for m in base)
    needed = whole // 2

    def incremental() -> int:
        messages = list(base)
        ledger = TokenLedger()
        ledger.sync(messages)  # the loop counted each message once, when it was appended
        return truncate_tool_results(messages, ledger, priority_of=lambda _n: CHEAP, keep_tokens=KEEP,
                                     needed=needed).cut

    def full_recount() -> int:
        messages = list(base)
        cut = saved = 0
        total = sum(_exact(m) for m in messages)
        for index, message in enumerate(messages[:-KEEP_LAST]):
            if saved >= needed:
                break
            if message.role != "tool":
                continue
            messages[index] = cut_result(message, KEEP, _exact(message))
            after = sum(_exact(m) for m in messages)  # the whole conversation again, after each cut
            saved, cut = total - after, cut + 1
        return cut

    def warm_ledger() -> None:
        TokenLedger().sync(base)

    cuts = incremental()
    fast = best_of(incremental, 5)
    slow = best_of(full_recount, 1)
    first = best_of(lambda: (tokens_module._cache.clear(), warm_ledger()), 1)
    print(f"tier 1      {results} results of {chars:,} chars ({whole:,} tokens), {cuts} cut to save {needed:,}")
    print(f"              incremental {fast * 1000:8.1f} ms   full re-count {slow * 1000:8.1f} ms   "
          f"ratio {slow / fast:6.0f}x   (target <= 50 ms)")
    print(f"              counting the session once as it grew, cache cold: {first * 1000:.1f} ms in all")


def per_step(results: int, chars: int) -> None:
    print("per step    over-threshold check as the session grows (ledger | full estimate with the memo)")
    for size in (results // 4, results // 2, results, results * 2):
        messages = session(size, chars)
        ledger, prefix = TokenLedger(), Prefix()
        over_threshold(messages, prefix, ledger, 10**9)
        prefix.record(10**6, estimated=False, covers=len(messages) - 2)
        step = best_of(lambda messages=messages, ledger=ledger, prefix=prefix:
                       over_threshold(messages, prefix, ledger, 10**9), 20)
        estimate_messages_tokens(messages)
        full = best_of(lambda messages=messages: estimate_messages_tokens(messages), 5)
        print(f"              {size:5d} results: {step * 1e6:8.1f} µs | {full * 1e6:10.1f} µs")


def tiers_two_and_three(results: int, chars: int) -> None:
    base = session(results, chars)
    summary = "The handlers were read part by part; parts 0 to N were refactored. " * 40

    def tier_two() -> None:
        messages = list(base)
        ledger = TokenLedger()
        ledger.sync(messages)
        link = ThinkLink()
        link.absorb(messages[1:])
        before = ledger.total(messages)
        text = compacted_text(summary=summary, digest=plan_digest(link), instructions="", request_heading="Request",
                              request="Refactor the handlers.", tail=messages[-KEEP_LAST:])
        messages[:] = [messages[0], Message.user(text)]
        assert ledger.total(messages) < before

    link = ThinkLink()
    link.absorb(base[1:])

    def tier_three() -> None:
        rebuilt_text(link, keep_plans=0, instructions="", request_heading="Request",
                     request="Refactor the handlers.", budget_tokens=20_000)

    print(f"tier 2      rewrite around a ready summary, {results} results: {best_of(tier_two, 3) * 1000:8.1f} ms "
          "(the model call excluded)")
    rebuild = best_of(tier_three, 3)
    print(f"tier 3      rebuild from {len(link.plans())} plans to 20 000 tokens: {rebuild * 1000:8.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=int, default=200, help="large tool results in the session")
    parser.add_argument("--chars", type=int, default=20_000, help="characters per tool result")
    args = parser.parse_args()
    tier_one(args.results, args.chars)
    per_step(args.results, args.chars)
    tiers_two_and_three(args.results, args.chars)


if __name__ == "__main__":
    main()
