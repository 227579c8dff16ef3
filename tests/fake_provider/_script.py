"""What the fake provider replays: scripts of steps, keyed by agent identity."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

__all__ = ["Failure", "Script", "Step", "ThinkingSpec", "ToolCallSpec", "UsageSpec"]

FailureKind = Literal["http", "truncate", "stall", "malformed_event", "error_event"]


@dataclass
class ToolCallSpec:
    """A tool call the model makes. `arguments` may be a dict (sent as JSON) or a raw string (sent as is,
    so malformed JSON can be scripted). `id` defaults to a generated one."""

    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    id: str = ""

    def arguments_text(self) -> str:
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments)


@dataclass
class ThinkingSpec:
    """One Anthropic thinking block: `text` signed with `signature`, or, with `redacted_data`, a
    `redacted_thinking` block carrying that opaque data (and no text)."""

    text: str = ""
    signature: str = "fake-thinking-signature"
    redacted_data: str = ""


@dataclass
class UsageSpec:
    """Usage in normalised terms: `input_tokens` includes `cached_tokens`; the server converts it to each
    wire's convention (Anthropic's `input_tokens` excludes cache reads)."""

    input_tokens: int
    output_tokens: int
    cached_tokens: int = 0


@dataclass
class Failure:
    """A failure injected into one step.

    - http: answer with `status` (and `Retry-After: retry_after` when set, plus `headers`) and an error body.
    - truncate: send `after_chunks` events, then half an event, then drop the connection.
    - stall: send `after_chunks` events, then send nothing until the client disconnects.
    - malformed_event: send `after_chunks` events, then a `data:` line that is not JSON.
    - error_event: send `after_chunks` events, then the format's in-stream error event.
    """

    kind: FailureKind
    status: int = 500
    retry_after: float | None = None
    after_chunks: int = 0
    message: str = "injected failure"
    error_type: str = ""
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def http(cls, status: int, *, retry_after: float | None = None, message: str = "injected failure",
             error_type: str = "", headers: dict[str, str] | None = None) -> Failure:
        """`headers` go on the response as they are (a `location` for a 3xx, say)."""
        return cls("http", status=status, retry_after=retry_after, message=message, error_type=error_type,
                   headers=dict(headers or {}))

    @classmethod
    def truncate(cls, after_chunks: int = 2) -> Failure:
        return cls("truncate", after_chunks=after_chunks)

    @classmethod
    def stall(cls, after_chunks: int = 2) -> Failure:
        return cls("stall", after_chunks=after_chunks)

    @classmethod
    def malformed_event(cls, after_chunks: int = 2) -> Failure:
        return cls("malformed_event", after_chunks=after_chunks)

    @classmethod
    def error_event(cls, after_chunks: int = 1, *, error_type: str = "overloaded_error",
                    message: str = "Overloaded", status: int = 0) -> Failure:
        """`status` becomes the OpenAI-style error `code` (0 sends none)."""
        return cls("error_event", status=status, after_chunks=after_chunks, error_type=error_type,
                   message=message)


@dataclass
class Step:
    """One model response (one request consumes one step).

    `chunk_size` is how many characters of text, reasoning or tool arguments go into one streamed
    fragment; `latency` is the pause before each event. `send_usage=False` behaves like servers that
    ignore `include_usage` (llama.cpp). `stop_reason` overrides the wire value. `raw` bypasses rendering:
    the exact response body (a list sends each element as its own HTTP chunk); bytes are sent as they
    are, so invalid UTF-8 can be scripted (in-process only: bytes do not survive `to_dict`).
    `thinking` scripts several Anthropic thinking / redacted_thinking blocks in order (it replaces
    `reasoning` + `signature`, which make one block; OpenAI gets the joined text as reasoning).
    `end_latency` is the pause between the last event (the format's end marker) and the end of the body,
    during which the request stays open on the server whatever the client does, as with a server that
    finishes its own work before it closes the response.
    """

    text: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCallSpec] = field(default_factory=list)
    usage: UsageSpec | None = None
    send_usage: bool = True
    chunk_size: int = 8
    latency: float = 0.0
    failure: Failure | None = None
    stop_reason: str | None = None
    signature: str = "fake-thinking-signature"
    raw: str | bytes | list[str] | list[bytes] | None = None
    raw_content_type: str = "text/event-stream"
    thinking: list[ThinkingSpec] = field(default_factory=list)
    end_latency: float = 0.0
    # In-process only: the step to send is this function of the request's body (a reply that names what the
    # request holds, e.g. an id the daemon made up); its other fields are then unused.
    respond: Callable[[dict[str, Any]], Step] | None = None
    # In-process only: nothing is sent until the test sets this event, so a step is in flight for exactly as long
    # as the test needs (a pause or an attach landing mid-step), however fast or slow the machine; a client that
    # hangs up meanwhile ends the request.
    gate: threading.Event | None = None

    def thinking_blocks(self) -> list[ThinkingSpec]:
        """The thinking blocks to send: `thinking`, else one block of `reasoning` signed with `signature`."""
        if self.thinking:
            return list(self.thinking)
        return [ThinkingSpec(self.reasoning, self.signature)] if self.reasoning else []

    def reasoning_text(self) -> str:
        return self.reasoning or "".join(t.text for t in self.thinking)

    def to_dict(self) -> dict[str, Any]:
        if self.respond is not None or self.gate is not None:
            raise ValueError("a step with `respond` or a `gate` lives in the test's process: it cannot be sent as data")
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Step:
        values = dict(data)
        values["tool_calls"] = [ToolCallSpec(**c) for c in values.get("tool_calls") or ()]
        values["thinking"] = [ThinkingSpec(**t) for t in values.get("thinking") or ()]
        if values.get("usage"):
            values["usage"] = UsageSpec(**values["usage"])
        if values.get("failure"):
            values["failure"] = Failure(**values["failure"])
        return cls(**values)


@dataclass
class Script:
    """Steps replayed, in order, to requests whose system prompt matches `marker`.

    `marker` is a substring of the system prompt (a regular expression when `regex`); `user_contains`
    additionally requires a substring of the first user message, so two runs of the same agent can be
    told apart.
    """

    identity: str
    marker: str
    steps: list[Step]
    user_contains: str | None = None
    regex: bool = False
    consumed: int = 0

    def matches(self, system: str, first_user: str) -> bool:
        hit = re.search(self.marker, system) is not None if self.regex else self.marker in system
        return hit and (self.user_contains is None or self.user_contains in first_user)

    @property
    def exhausted(self) -> bool:
        return self.consumed >= len(self.steps)

    def to_dict(self) -> dict[str, Any]:
        return {"identity": self.identity, "marker": self.marker, "user_contains": self.user_contains,
                "regex": self.regex, "steps": [s.to_dict() for s in self.steps]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Script:
        return cls(identity=data["identity"], marker=data["marker"],
                   steps=[Step.from_dict(s) for s in data.get("steps") or ()],
                   user_contains=data.get("user_contains"), regex=bool(data.get("regex", False)))
