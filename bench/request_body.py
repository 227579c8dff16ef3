"""A model request's body as a long conversation grows: encoded whole at every call, or with each message's text kept.

Run from the repository root: `python bench/request_body.py [--messages N] [--chars C]` (defaults 400 and 2000:
~0.8 MB of conversation, a long Coding session before compaction).

Figures (best of several runs, same process, the OpenAI wire format with a Director's tool list):
  baseline  json.dumps of the whole body, as every call did before `MessageTexts`
  kept      `encode_body` with the run's `ToolEntries` and `MessageTexts`, the conversation one message longer at
            every call (the wire dicts made anew, as at every call)
Both include making the wire dicts (`openai_messages`), which every call does. The bytes are checked equal, call by
call, before anything is timed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from best_time import best_of  # noqa: E402

from yagent.workers.llm import CallOptions, Message, ToolCall, ToolDefinition  # noqa: E402
from yagent.workers.llm._openai import openai_messages  # noqa: E402
from yagent.workers.llm._request_body import MessageTexts, ToolEntries, encode_body  # noqa: E402


def conversation(count: int, chars: int) -> list[Message]:
    messages = [Message.system("You are the yagent Coding agent. " * 40), Message.user("Fix the failing test.")]
    for i in range(count):
        if i % 2 == 0:
            messages.append(Message.assistant("", tool_calls=(ToolCall(f"c{i}", "read_file",
                                                                       json.dumps({"path": f"src/m{i}.py"})),)))
        else:
            messages.append(Message.tool(f"c{i - 1}", f"line {i} of the file « é »\n" * (chars // 28)))
    return messages


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=400)
    parser.add_argument("--chars", type=int, default=2000)
    args = parser.parse_args()
    tools = [ToolDefinition(f"tool_{i}", "A tool of the Director's surface. " * 6,
                            {"type": "object", "properties": {"path": {"type": "string"}}}) for i in range(30)]
    entries = ToolEntries(lambda t: {"type": "function", "function": {"name": t.name, "description": t.description,
                                                                      "parameters": dict(t.parameters)}})
    history = conversation(args.messages, args.chars)
    options = CallOptions()

    def body(messages: list[Message]) -> dict:
        made = {"model": "m", "messages": openai_messages(messages, {}), "stream": options.stream}
        made["tools"] = entries.entries(tools)
        return made

    calls = 20  # the conversation grows by one message per call, as a run's does
    first = len(history) - calls

    def session(kept: bool) -> list[bytes]:
        texts = MessageTexts()
        if kept:
            encode_body(body(history[:first - 1]), entries, texts)  # the call before the timed ones
        return [encode_body(body(history[:n]), entries, texts) if kept
                else json.dumps(body(history[:n]), ensure_ascii=False).encode() for n in range(first, len(history))]

    assert session(True) == session(False)  # the same bytes, call after call
    baseline = best_of(lambda: session(False), runs=5) / calls
    kept = best_of(lambda: session(True), runs=5) / calls  # includes the untimed-in-real-life first encoding
    print(f"conversation of {first}-{len(history)} messages, last body "
          f"{len(json.dumps(body(history), ensure_ascii=False).encode()) / 1e6:.2f} MB, {calls} calls")
    print(f"baseline  whole body encoded, per call    : {baseline * 1000:7.2f} ms")
    print(f"kept      messages' texts kept, per call  : {kept * 1000:7.2f} ms  ({kept / baseline:.2f}x the baseline; "
          f"the first call's whole encoding included)")

if __name__ == "__main__":
    main()
