"""yagent.workers.llm — how agents talk to models.

    engine = build_engine(settings.llm, agent="coding", gate=lease_gate)  # always a RoutingEngine
    decision = await engine.route(task_text)                                   # optional tier choice
    async with engine.complete(messages, tools) as stream:
        async for delta in stream:            # TextDelta | ReasoningDelta | ToolCallDelta | StreamRestart
            forward_to_ui(delta)
        response = await stream.final()       # text, reasoning, tool_calls, finish_reason, usage
    messages.append(response.message())

Engines speak the OpenAI-compatible Chat Completions format or the Anthropic Messages format over
httpx with streaming, repair tool-call pairing before every request, retry with backoff inside the
`[llm] timeout` budget, and hold one in-flight lease per logical request. Errors are the `LLMError`
tree in `_errors.py`.
"""

from ._anthropic import ANTHROPIC_VERSION, DEFAULT_MAX_TOKENS, THINKING_BUDGETS, AnthropicEngine
from ._build import (
    EngineFactory,
    build_engine,
    engine_for_provider,
    make_client_ahead,
    parse_ahead,
    shared_ssl_context,
)
from ._catalog import ModelCatalog, ModelInfo, default_catalog, lookup_model, normalise_model_name
from ._engine import Engine, HTTPEngine
from ._errors import (
    LLMAuthError,
    LLMBadRequestError,
    LLMError,
    LLMNetworkError,
    LLMRateLimitError,
    LLMServerError,
    LLMTimeoutError,
)
from ._fallback import FallbackEngine
from ._gate import UNLIMITED_GATE, InFlightGate, SemaphoreGate, UnlimitedGate
from ._messages import Message, Role, ThinkingBlock, ToolCall, ToolDefinition, new_call_id
from ._openai import OpenAIEngine
from ._pairing import MISSING_TOOL_RESULT, repair_tool_pairing, with_unique_call_ids
from ._pricing import call_cost, price_for
from ._response import (
    CallOptions,
    Delta,
    FinishReason,
    ReasoningDelta,
    Response,
    ResponseStream,
    StreamRestart,
    TextDelta,
    ToolCallDelta,
    Usage,
)
from ._retry import RetryPolicy, parse_retry_after
from ._router import CLASSIFY_TIMEOUT, RouteDecision, RoutingEngine, assign_tiers

__all__ = [
    "ANTHROPIC_VERSION",
    "CLASSIFY_TIMEOUT",
    "DEFAULT_MAX_TOKENS",
    "MISSING_TOOL_RESULT",
    "THINKING_BUDGETS",
    "UNLIMITED_GATE",
    "AnthropicEngine",
    "CallOptions",
    "Delta",
    "Engine",
    "EngineFactory",
    "FallbackEngine",
    "FinishReason",
    "HTTPEngine",
    "InFlightGate",
    "LLMAuthError",
    "LLMBadRequestError",
    "LLMError",
    "LLMNetworkError",
    "LLMRateLimitError",
    "LLMServerError",
    "LLMTimeoutError",
    "Message",
    "ModelCatalog",
    "ModelInfo",
    "OpenAIEngine",
    "ReasoningDelta",
    "Response",
    "ResponseStream",
    "RetryPolicy",
    "Role",
    "RouteDecision",
    "RoutingEngine",
    "SemaphoreGate",
    "StreamRestart",
    "TextDelta",
    "ThinkingBlock",
    "ToolCall",
    "ToolCallDelta",
    "ToolDefinition",
    "UnlimitedGate",
    "Usage",
    "assign_tiers",
    "build_engine",
    "call_cost",
    "default_catalog",
    "engine_for_provider",
    "lookup_model",
    "make_client_ahead",
    "new_call_id",
    "normalise_model_name",
    "parse_ahead",
    "parse_retry_after",
    "price_for",
    "repair_tool_pairing",
    "shared_ssl_context",
    "with_unique_call_ids",
]
