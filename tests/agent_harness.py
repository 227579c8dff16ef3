"""Fixtures for end-to-end agent tests: a real daemon whose workers talk to the fake provider.

Only the model is scripted. Agents are recognised by the first line of their system prompt.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.daemon_harness import DaemonProcess, arun, collect_turn, submit
from tests.fake_provider import FakeProvider
from yagent.ipc.messages import Event

MARKERS = {
    "director": "You are the yagent Director",
    "coding": "You are the yagent Coding agent",
    "repo": "You are the yagent Repo agent",
    "chat": "You are the yagent Chat agent",
    "devops": "You are the yagent DevOps agent",
    "meta": "You are the yagent Meta agent",
    "custom": "You are a yagent custom agent",
}

# What a scripted Meta agent designs: a custom agent that counts the lines of notes.txt with read_file.
LINE_COUNTER_DESIGN = {"name": "line_counter", "description": "Counts lines in text files.",
                       "system_prompt": "Count the lines of the files you are given and report the numbers.",
                       "tools": ["read_file"], "task": "Count the lines in notes.txt."}


def _toml_value(value: Any) -> str:
    return json.dumps(value) if isinstance(value, str | bool | int | float) else str(value)


def llm_config(fake: FakeProvider, api_format: str = "openai", extra: str = "") -> str:
    table = fake.provider_table(api_format)
    lines = ["[global.llm]", 'use_provider = "fake"', "", "[global.llm.providers.fake]"]
    lines += [f"{k} = {_toml_value(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n" + extra


def run_turn(daemon: DaemonProcess, project: Path, text: str, *, task: str | None = None, turn: int | None = None,
             yolo: str = "none", on_event: Any = None, timeout: float = 90) -> tuple[str, list[Event]]:
    async def go() -> tuple[str, list[Event]]:
        async with daemon.client() as c:
            sub = await submit(c, project, text, agent="director", task=task, yolo=yolo)
            events = await collect_turn(c, sub.task, turn=sub.turn, on_event=on_event)
            return sub.task, events

    return arun(go(), timeout)


def tool_messages(request: Any) -> list[dict[str, Any]]:
    """The tool-result messages of a recorded OpenAI-format request."""
    return [m for m in request.body.get("messages", []) if m.get("role") == "tool"]
