"""Measuring the context: the threshold's sources, the provider's count plus an estimate of what came after
(invalidated by rewrites), and a ledger that recounts only the message that changed."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from yagent.ipc.compression_settings import CompressionSettings
from yagent.workers.context.measurement import Prefix, measure, over_threshold, surely_under
from yagent.workers.context.threshold import DEFAULT_THRESHOLD, resolve_threshold
from yagent.workers.context.token_ledger import TokenLedger
from yagent.workers.context.tokens import (
    EXACT_LIMIT,
    count_tokens,
    estimate_message_tokens,
    estimate_messages_tokens,
    message_token_bound,
    text_token_bound,
)
from yagent.workers.llm import Message, ToolCall, lookup_model


def _windows(model: str) -> int | None:
    return {"big": 200_000, "small": 8_000}.get(model)


@pytest.mark.parametrize(("model", "settings", "expected"), [
    ("big", CompressionSettings(), (150_000, "catalog")),  # window x 0.75
    ("big", CompressionSettings(threshold=50_000), (50_000, "config")),  # the smaller cap wins
    ("small", CompressionSettings(threshold=50_000), (6_000, "catalog")),
    ("unknown", CompressionSettings(threshold=50_000), (50_000, "config")),  # either source optional
    ("unknown", CompressionSettings(), (DEFAULT_THRESHOLD, "default")),  # neither: 120 000
    ("big", CompressionSettings(threshold=50_000, threshold_override=777), (777, "env")),  # the override wins
])
def test_the_threshold_is_the_smaller_cap_each_optional(model: str, settings: CompressionSettings,
                                                         expected: tuple[int, str]) -> None:
    found = resolve_threshold(model, settings, _windows)
    assert (found.tokens, found.source) == expected


def test_the_shipped_catalog_is_what_the_threshold_reads() -> None:
    info = lookup_model("claude-sonnet-4-5")
    assert info is not None
    found = resolve_threshold("claude-sonnet-4-5", CompressionSettings(), lambda m: lookup_model(m).context_window)
    assert found.tokens == int(info.context_window * 0.75) and found.window == info.context_window


def test_estimates_count_reasoning() -> None:
    plain = Message.assistant("answer")
    thoughtful = Message.assistant("answer", reasoning="a long chain of thought " * 50)
    assert estimate_message_tokens(thoughtful) > estimate_message_tokens(plain) + 200


def _conversation(n: int) -> list[Message]:
    return [Message.system("system prompt"), *(Message.user(f"message {i} " * 40) for i in range(n))]


def test_the_measure_is_the_providers_count_plus_an_estimate_of_what_came_after() -> None:
    messages = _conversation(4)
    ledger, prefix = TokenLedger(), Prefix()
    assert measure(messages, prefix, ledger) == estimate_messages_tokens(messages)  # no report yet: all local
    prefix.record(50_000, estimated=False, covers=len(messages))
    messages += [Message.assistant("reply " * 30), Message.tool("c1", "result " * 100)]
    assert measure(messages, prefix, ledger) == 50_000 + estimate_messages_tokens(messages[5:])
    assert over_threshold(messages, prefix, ledger, 50_000) and not over_threshold(messages, prefix, ledger, 60_000)
    prefix.deduct(1_000)  # the first tier shortened a covered message
    assert measure(messages, prefix, ledger) == 49_000 + estimate_messages_tokens(messages[5:])


def test_a_count_the_engine_estimated_or_a_rewrite_falls_back_to_the_whole_local_estimate() -> None:
    messages = _conversation(3)
    ledger, prefix = TokenLedger(), Prefix()
    prefix.record(90_000, estimated=True, covers=4)  # the server sent no usage
    assert measure(messages, prefix, ledger) == estimate_messages_tokens(messages)
    prefix.record(90_000, estimated=False, covers=4)
    messages[:] = [messages[0], Message.user("compacted")]  # a tier rewrote the list: shorter than the count covered
    assert measure(messages, prefix, ledger) == estimate_messages_tokens(messages)
    prefix.record(90_000, estimated=False, covers=2)
    prefix.invalidate()
    assert measure(messages, prefix, ledger) == estimate_messages_tokens(messages)


def test_the_ledger_recounts_only_messages_new_at_their_place() -> None:
    messages = _conversation(200)
    ledger = TokenLedger()
    assert ledger.total(messages) == estimate_messages_tokens(messages) and ledger.recounts == 201
    for _ in range(5):
        ledger.total(messages)
    assert ledger.recounts == 201  # nothing changed: nothing counted
    messages.append(Message.assistant("new"))
    saved = ledger.replace(messages, 7, Message.user("short"))
    assert ledger.total(messages) == estimate_messages_tokens(messages) and ledger.recounts == 203
    assert saved == estimate_message_tokens(_conversation(7)[7]) - estimate_message_tokens(Message.user("short"))
    del messages[50:]
    assert ledger.total(messages) == estimate_messages_tokens(messages) and ledger.recounts == 203
    messages[9] = Message.user("changed behind the ledger's back")  # a message put in place by someone else
    messages[10] = Message.user(messages[10].content)  # another object saying the same: the same count
    assert ledger.total(messages) == estimate_messages_tokens(messages) and ledger.recounts in (204, 205)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=())), st.integers(min_value=0, max_value=3))
def test_the_byte_bound_is_never_below_the_count(text: str, images: int) -> None:
    # Any code point, lone surrogates included (the tokenizer sees U+FFFD for those).
    message = Message.assistant(text, reasoning=text[::-1], tool_calls=[ToolCall(id="c", name="x" + text[:3],
                                                                                 arguments=text)])
    message = dataclasses.replace(message, images=("shot.png",) * images) if images else message
    assert text_token_bound(text) >= count_tokens(text)
    assert message_token_bound(message) >= estimate_message_tokens(message)


def test_the_byte_bound_holds_for_sampled_texts_dense_or_not() -> None:
    dense = "".join(chr(0x4E00 + (i * 7919) % 20_000) for i in range(EXACT_LIMIT + 5_000))  # CJK: sampled
    mixed = ("plain words " * 20_000) + dense[:30_000] + "\udc80" * 100
    for text in (dense, mixed):
        assert len(text) > EXACT_LIMIT and text_token_bound(text) >= count_tokens(text)


def test_surely_under_counts_nothing_and_is_never_wrong() -> None:
    messages = _conversation(30)
    exact = estimate_messages_tokens(messages)
    ledger, prefix = TokenLedger(), Prefix()
    assert surely_under(messages, prefix, ledger, exact * 5) and ledger.recounts == 0  # far under: no tokenizer
    assert not surely_under(messages, prefix, ledger, exact - 1)  # over: it cannot say "under"
    ledger.total(messages)
    prefix.record(10_000, estimated=False, covers=len(messages))
    messages.append(Message.tool("c1", "é" * 3_000))
    near = measure(messages, prefix, ledger)
    fresh = TokenLedger()
    for threshold in (near - 1, near, near + 10, near + 6_000, near * 2):
        under = surely_under(messages, prefix, fresh, threshold)
        assert not under or not over_threshold(messages, prefix, ledger, threshold)
    assert surely_under(messages, prefix, ledger, near + 6_001)  # the counted part exactly, the new one by bytes
    # A ledger with an estimate of its own has no bound: it always measures.
    assert not surely_under(_conversation(2), Prefix(), TokenLedger(lambda _m: 1), 10**9)
