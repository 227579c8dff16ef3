"""The shipped model catalog and token counting."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest

import yagent.workers.llm as llm_package
from yagent.workers.context import (
    EXACT_LIMIT,
    count_tokens,
    count_tokens_exact,
    estimate_message_tokens,
    estimate_messages_tokens,
)
from yagent.workers.llm import Message, ModelCatalog, ToolCall, default_catalog, lookup_model, normalise_model_name


@pytest.mark.parametrize(("name", "expected"), [
    ("claude-sonnet-4-5", "claude-sonnet-4-5"),
    ("anthropic/claude-sonnet-4.5", "claude-sonnet-4-5"),           # OpenRouter spelling
    ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),            # dated snapshot
    ("claude-sonnet-4@20250514", "claude-sonnet-4"),                # Vertex spelling
    ("gpt-4o-2024-08-06", "gpt-4o"),
    ("gpt-4o-mini", "gpt-4o-mini"),                                 # not swallowed by gpt-4o
    ("GPT-4.1-mini", "gpt-4-1-mini"),
    ("qwen3-coder-480b-a35b-instruct", "qwen3-coder"),              # longest known prefix
    ("qwen2.5-coder:32b", "qwen2-5-coder"),                         # Ollama tag
    ("deepseek-chat", "deepseek-chat"),
    ("deepseek-v3.1", "deepseek-chat"),                             # alias
    ("kimi-k2-0905-preview", "kimi-k2-0905"),
    ("deepseek/deepseek-chat", "deepseek-chat"),
    ("openai/gpt-4o-2024-08-06", "gpt-4o"),
    ("claude-3-5-sonnet-latest", "claude-3-5-sonnet"),
    # Bedrock model ids (behind an OpenAI-compatible gateway): dotted vendor and region prefixes.
    ("anthropic.claude-3-5-sonnet-20241022-v2:0", "claude-3-5-sonnet"),
    ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5"),
    ("bedrock/us.anthropic.claude-opus-4-1-20250805-v1:0", "claude-opus-4-1"),
    ("qwen.qwen3-coder-480b-a35b-v1:0", "qwen3-coder"),
])
def test_lookup_normalises_names(name: str, expected: str) -> None:
    info = lookup_model(name)
    assert info is not None and normalise_model_name(info.name) == expected


@pytest.mark.parametrize("name", ["", "my-local-finetune", "gpt", "claude", "llama-2-7b", "anthropic.", "us.mimo"])
def test_unknown_models_fall_back_cleanly(name: str) -> None:
    assert lookup_model(name) is None


def test_shipped_catalog_is_well_formed() -> None:
    raw = json.loads(resources.files(llm_package).joinpath("model_catalog.json").read_text(encoding="utf-8"))
    catalog = default_catalog()
    assert len(catalog) == len(raw["models"]) >= 40
    for name in catalog.names():
        info = catalog.lookup(name)
        assert info is not None and info.context_window >= 8192 and 0 < info.score <= 100
        assert 0 < info.max_output <= info.context_window


def test_catalog_rejects_aliases_to_unknown_models(tmp_path: Path) -> None:
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps({"models": {"a": {"context_window": 1000, "score": 1}}, "aliases": {"b": "c"}}))
    with pytest.raises(ValueError, match="unknown models"):
        ModelCatalog.load(path)


def _source_text(limit: int) -> str:
    root = Path(__import__("httpx").__file__).parent
    text = ""
    for path in sorted(root.rglob("*.py")):
        text += path.read_text(encoding="utf-8")
        if len(text) > limit:
            break
    return text[:limit]


def test_small_texts_are_counted_exactly() -> None:
    text = _source_text(20_000)
    assert count_tokens(text) == count_tokens_exact(text) > 3000
    assert count_tokens("hello world") == 2
    assert count_tokens("") == 0
    assert count_tokens("<|endoftext|>") == count_tokens_exact("<|endoftext|>") > 1  # special text is ordinary


def test_large_texts_take_the_sampled_path_within_two_percent() -> None:
    text = _source_text(600_000)
    assert len(text) > EXACT_LIMIT  # precondition: this exercises the fast path
    exact = count_tokens_exact(text)
    sampled = count_tokens(text)
    assert sampled != exact or exact == 0  # the sampled path really ran
    assert abs(sampled - exact) / exact < 0.02


def test_message_estimates_include_reasoning_and_tool_calls() -> None:
    plain = Message.assistant("The answer is 42.")
    thinking = Message.assistant("The answer is 42.", reasoning="Let me multiply six by seven carefully first.")
    calling = Message.assistant("The answer is 42.", tool_calls=(ToolCall("c1", "read_file", '{"path": "a.py"}'),))
    assert estimate_message_tokens(thinking) - estimate_message_tokens(plain) == count_tokens(thinking.reasoning)
    assert estimate_message_tokens(calling) > estimate_message_tokens(plain) + count_tokens('{"path": "a.py"}')
    assert estimate_messages_tokens([plain, thinking]) == estimate_message_tokens(plain) + estimate_message_tokens(
        thinking)
    assert estimate_message_tokens(thinking.to_dict()) == estimate_message_tokens(thinking)  # persisted dicts too


def _mixed_documents() -> dict[str, str]:
    """English with one dense section (CJK prose, a base64 blob) at several offsets, plus uniform texts.

    A dense section is what a tool result holding a translated README or an embedded image looks like;
    a few large sample windows either land in it or miss it, which is where a sampled count goes wrong.
    """
    import base64
    import random

    rnd = random.Random(7)
    words = ["the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "while", "engineers", "write",
             "careful", "documentation", "about", "tokenizers", "and", "budgets"]
    prose = " ".join(rnd.choice(words) for _ in range(170_000))[:600_000]
    cjk = "".join(chr(rnd.randint(0x4E00, 0x9FFF)) for _ in range(60_000))
    blob = base64.b64encode(rnd.randbytes(45_000)).decode()
    docs = {f"{kind}@{offset}": prose[:offset] + dense + prose[offset:]
            for kind, dense in (("cjk", cjk), ("base64", blob))
            for offset in range(0, 600_000, 75_000)}
    docs["code"] = _source_text(600_000)
    docs["no spaces"] = base64.b64encode(rnd.randbytes(300_000)).decode()
    docs["cjk only"] = cjk * 4
    return docs


def test_sampled_counts_stay_within_three_percent_on_mixed_documents() -> None:
    errors = {}
    for name, text in _mixed_documents().items():
        assert len(text) > EXACT_LIMIT  # precondition: the fast path runs
        exact = count_tokens_exact(text)
        errors[name] = round(100 * (count_tokens(text) - exact) / exact, 2)
    assert all(abs(e) < 3 for e in errors.values()), errors
