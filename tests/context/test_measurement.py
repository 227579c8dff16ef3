"""Measuring the context: the threshold's sources, the provider's count plus an estimate of what came after
(invalidated by rewrites), and a ledger that recounts only the message that changed."""

from __future__ import annotations

import pytest

from yagent.ipc.compression_settings import CompressionSettings
from yagent.workers.context.measurement import Prefix, measure, over_threshold
from yagent.workers.context.threshold import DEFAULT_THRESHOLD, resolve_threshold
from yagent.workers.context.token_ledger import TokenLedger
from yagent.workers.context.tokens import estimate_message_tokens, estimate_messages_tokens
from yagent.workers.llm import Message, lookup_model


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
