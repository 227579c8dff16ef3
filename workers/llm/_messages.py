"""The provider-neutral conversation model: messages, tool calls, tool definitions.

Plain dataclasses that round-trip through JSON-compatible dicts, because conversation memory is
persisted as JSONL by another module and must read back byte-for-byte the same shapes.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["Message", "Role", "ThinkingBlock", "ToolCall", "ToolDefinition"]

Role = Literal["system", "user", "assistant", "tool"]
_ROLES = ("system", "user", "assistant", "tool")


def new_call_id() -> str:
    """A fresh tool-call id, for calls the server sent without one or with one already used.

    Unique across the whole conversation: a positional `call_{index}` would repeat on every step
    (each step's first call would be `call_0`), and results would pair with the wrong call.
    """
    return f"call_{uuid.uuid4().hex}"


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool invocation requested by the model; `arguments` is the raw JSON text exactly as streamed."""

    id: str
    name: str
    arguments: str = "{}"

    def parsed_arguments(self) -> dict[str, Any]:
        """The arguments as an object; raises ValueError when the model produced invalid JSON."""
        value = json.loads(self.arguments or "{}")
        if not isinstance(value, dict):
            raise ValueError(f"arguments of tool call {self.id} ({self.name}) are JSON but not an object")
        return value

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolCall:
        return cls(id=str(data["id"]), name=str(data["name"]), arguments=str(data.get("arguments", "{}")))


@dataclass(frozen=True, slots=True)
class ThinkingBlock:
    """One Anthropic thinking block exactly as received, to be sent back verbatim in a tool-use loop.

    Either `text` with the `signature` the API issued for it (`thinking`), or, for a block the API
    encrypted (`redacted_thinking`), its opaque `redacted_data` and nothing else.
    """

    text: str = ""
    signature: str = ""
    redacted_data: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The Messages API block itself (the persisted shape and the wire shape are the same)."""
        if self.redacted_data:
            return {"type": "redacted_thinking", "data": self.redacted_data}
        return {"type": "thinking", "thinking": self.text, "signature": self.signature}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ThinkingBlock:
        if data.get("type") == "redacted_thinking":
            return cls(redacted_data=str(data.get("data") or ""))
        return cls(text=str(data.get("thinking") or ""), signature=str(data.get("signature") or ""))


@dataclass(frozen=True, slots=True)
class Message:
    """One conversation turn.

    - system / user: `content`.
    - assistant: `content` (may be empty), optional `reasoning` (the joined thinking text, for display,
      token estimates and OpenAI-compatible servers), `thinking_blocks` (Anthropic's thinking and
      redacted_thinking blocks in their original order, each with its signature or opaque data, which
      the API requires back unchanged), `tool_calls`. `reasoning_signature` is the older single-block
      form (one signature for all of `reasoning`), still read from conversations saved before
      `thinking_blocks` existed.
    - tool: `tool_call_id` and `content` (the tool's result text), and `images`: paths of image files the result
      carries (a screenshot), sent as images to a model that accepts them (`_images.py`).
    """

    role: Role
    content: str = ""
    reasoning: str = ""
    reasoning_signature: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str = ""
    name: str = ""
    thinking_blocks: tuple[ThinkingBlock, ...] = ()
    images: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.role not in _ROLES:
            raise ValueError(f"message role must be one of {_ROLES}, got {self.role!r}")
        if self.role == "tool" and not self.tool_call_id:
            raise ValueError("a tool message needs the tool_call_id of the call it answers")
        if not isinstance(self.tool_calls, tuple):
            object.__setattr__(self, "tool_calls", tuple(self.tool_calls))
        if not isinstance(self.thinking_blocks, tuple):
            object.__setattr__(self, "thinking_blocks", tuple(self.thinking_blocks))
        if not isinstance(self.images, tuple):
            object.__setattr__(self, "images", tuple(self.images))

    @classmethod
    def system(cls, content: str) -> Message:
        return cls("system", content)

    @classmethod
    def user(cls, content: str) -> Message:
        return cls("user", content)

    @classmethod
    def assistant(cls, content: str = "", *, reasoning: str = "", tool_calls: tuple[ToolCall, ...] = (),
                  reasoning_signature: str = "", thinking_blocks: tuple[ThinkingBlock, ...] = ()) -> Message:
        return cls("assistant", content, reasoning=reasoning, tool_calls=tuple(tool_calls),
                   reasoning_signature=reasoning_signature, thinking_blocks=tuple(thinking_blocks))

    @classmethod
    def tool(cls, tool_call_id: str, content: str, name: str = "", images: tuple[str, ...] = ()) -> Message:
        return cls("tool", content, tool_call_id=tool_call_id, name=name, images=tuple(images))

    def to_dict(self) -> dict[str, Any]:
        """Only non-empty fields, so persisted lines stay small and stable."""
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.reasoning:
            out["reasoning"] = self.reasoning
        if self.reasoning_signature:
            out["reasoning_signature"] = self.reasoning_signature
        if self.tool_calls:
            out["tool_calls"] = [c.to_dict() for c in self.tool_calls]
        if self.tool_call_id:
            out["tool_call_id"] = self.tool_call_id
        if self.name:
            out["name"] = self.name
        if self.thinking_blocks:
            out["thinking_blocks"] = [b.to_dict() for b in self.thinking_blocks]
        if self.images:
            out["images"] = list(self.images)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Message:
        return cls(
            role=data["role"],
            content=data.get("content") or "",
            reasoning=data.get("reasoning") or "",
            reasoning_signature=data.get("reasoning_signature") or "",
            tool_calls=tuple(ToolCall.from_dict(c) for c in data.get("tool_calls") or ()),
            tool_call_id=data.get("tool_call_id") or "",
            name=data.get("name") or "",
            thinking_blocks=tuple(ThinkingBlock.from_dict(b) for b in data.get("thinking_blocks") or ()),
            images=tuple(str(p) for p in data.get("images") or () if isinstance(p, str)),
        )


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    """A tool the model may call: `parameters` is a JSON Schema object."""

    name: str
    description: str = ""
    parameters: Mapping[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "parameters": dict(self.parameters)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolDefinition:
        return cls(name=str(data["name"]), description=str(data.get("description", "")),
                   parameters=dict(data.get("parameters") or {"type": "object", "properties": {}}))
