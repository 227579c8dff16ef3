"""The configuration signature of a sub-agent: one digest of everything that shapes what it is.

A follow-up continues a sub-agent's conversation only while the signature it would run with now equals the
one its conversation was written with: a changed role prompt, provider, model, reasoning effort, tool list,
profile or prompt switch makes another agent, and continuing the old conversation under it would put words
in the mouth of an agent that never said them. What is rebuilt for every call or every run (the board's
index, the skills catalogue, MCP notes and tools, reminders) is left out: it changes without the agent
changing.

`configuration_signature` is pure: the same configuration gives the same digest in any process, and nothing
but its argument is read (`tests/agents_unit/test_configuration_signature.py` moves every input).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["SubagentConfiguration", "configuration_parts", "configuration_signature", "signed", "tool_entries"]

# Bumped when what the signature covers changes: an older sub-agent is then never continued by mistake.
_VERSION = 1


@dataclass(frozen=True)
class SubagentConfiguration:
    """What a sub-agent is made of. `tools` are the definitions the model is offered (MCP tools excepted: they
    come and go with their servers), each with whether it is deferred; `switches` are the prompt switches
    (language, yolo level, the board's switches)."""

    prompt: str
    provider: str
    model: str
    reasoning_effort: str
    tools: tuple[Mapping[str, Any], ...]
    profile: str
    switches: Mapping[str, str] = field(default_factory=dict)


def configuration_signature(config: SubagentConfiguration) -> str:
    """A hex digest of `config`; the order tools are listed in does not count, their content does."""
    return signed(config)[0]


def configuration_parts(config: SubagentConfiguration) -> dict[str, str]:
    """A short digest per input, recorded beside the signature so a refused follow-up can say what changed."""
    return signed(config)[1]


def signed(config: SubagentConfiguration) -> tuple[str, dict[str, str]]:
    """`configuration_signature` and `configuration_parts` at once: each tool is made canonical text once for both
    (a sub-agent's start pays for it before its first model request)."""
    tools = sorted(_canonical(t) for t in config.tools)
    body = {
        "v": _VERSION,
        "prompt": config.prompt,
        "provider": config.provider,
        "model": config.model,
        "reasoning_effort": config.reasoning_effort,
        "tools": tools,
        "profile": config.profile,
        "switches": {str(k): str(v) for k, v in sorted(config.switches.items())},
    }
    signature = hashlib.sha256(_canonical(body).encode("utf-8")).hexdigest()[:32]

    def short(value: Any) -> str:
        return hashlib.sha256(_canonical(value).encode("utf-8")).hexdigest()[:12]

    parts = {"role prompt": short(config.prompt), "provider": config.provider, "model": config.model,
             "reasoning effort": config.reasoning_effort, "tool list": short(tools), "profile": config.profile}
    parts.update({f"switch {k}": str(v) for k, v in sorted(config.switches.items())})
    return signature, parts


def tool_entries(definitions: Iterable[Mapping[str, Any]], deferred: Iterable[str]) -> tuple[dict[str, Any], ...]:
    """The tool part of a configuration: each definition, marked when it sits in the deferred catalogue."""
    cold = set(deferred)
    return tuple({**d, "deferred": d.get("name") in cold} for d in definitions)


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
