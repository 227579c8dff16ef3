"""The data each event type carries: one builder per type, the single description clients read.

Events travel as `[seq, run, agent, type, ts, data]`; `data` is a msgpack map whose keys are fixed
here. Agents build it with these functions (never by hand), clients read the keys named here.
`run` is the delegation coordinate: two parallel runs of the same agent stream into separate
slots keyed by run id, while labels keep the plain agent name.

Daemon-stamped events (turn_*, run_*, task_*, user_help_*) are built by the daemon with the same
key names:

    turn_started      {turn, text, agent, project}
    turn_finished     {turn, state, status, stop_reason, output, error, run}
    run_queued        {agent, parent, call_id, run}
    run_started       {agent, parent, call_id, pid, depth, input}
    run_finished      {status, stop_reason, error, output, parent, call_id, cpu_seconds}
    task_paused       {turn}
    task_resumed      {turn}
    user_help_needed  a Question: {request_id, kind, prompt, options, default, details, task, run, agent, asked_at}
    user_help_response {request_id, answer, by}
"""

from __future__ import annotations

from typing import Any

from .records import Record, record

__all__ = [
    "CallUsage",
    "LlmCallEnd",
    "WorkflowDecision",
    "ai_chunk",
    "ai_response",
    "ai_stream_end",
    "ai_stream_start",
    "context_compressed",
    "context_status",
    "conversation_error",
    "llm_call_end",
    "llm_call_start",
    "log",
    "model_routed",
    "thinking",
    "thinklink_entry",
    "tool_call_result",
    "tool_call_start",
    "usage_data",
    "workflow_decision",
]

# Tool arguments and results are clipped in events (the model still gets the whole result).
EVENT_TEXT_LIMIT = 4000


def _clip(text: str, limit: int = EVENT_TEXT_LIMIT) -> str:
    return text if len(text) <= limit else text[:limit] + f"… [{len(text) - limit} more chars]"


def usage_data(total_input_tokens: int, output_tokens: int, cached_input_tokens: int = 0,
               estimated: bool = False) -> dict[str, Any]:
    """Provider-normalised token counts: input includes cached input, on every provider."""
    return {"total_input_tokens": total_input_tokens, "output_tokens": output_tokens,
            "cached_input_tokens": cached_input_tokens, "estimated": estimated}


def ai_stream_start(step: int, model: str) -> dict[str, Any]:
    return {"step": step, "model": model}


def ai_chunk(text: str) -> dict[str, Any]:
    """A streamed fragment of the model's visible reply."""
    return {"text": text}


def thinking(text: str) -> dict[str, Any]:
    """A streamed fragment of the model's reasoning (reasoning_content / thinking blocks)."""
    return {"text": text}


def ai_stream_end(step: int, restarted: bool = False) -> dict[str, Any]:
    return {"step": step, "restarted": restarted}


def ai_response(step: int, text: str, tool_calls: int, repeats: bool = False) -> dict[str, Any]:
    """The complete visible reply of one step (after streaming). `repeats`: it says again, word for word, the
    reply a reminder went back to (the way out a reminder offers): clients show that answer once."""
    return {"step": step, "text": text, "tool_calls": tool_calls, "repeats": repeats}


def llm_call_start(step: int, provider: str, model: str) -> dict[str, Any]:
    return {"step": step, "provider": provider, "model": model}


@record
class CallUsage(Record):
    """Token counts of one model call, provider-normalised (`usage_data`'s keys)."""

    total_input_tokens: int = 0  # cached input included
    output_tokens: int = 0
    cached_input_tokens: int = 0
    estimated: bool = False


@record
class LlmCallEnd(Record):
    """`llm_call_end`, the one worker event the daemon reads itself: it sums usage and cost per run and task
    (`yagent ps`, the spending limits). Clients read it too."""

    step: int = 0
    provider: str = ""
    model: str = ""
    usage: CallUsage | None = None  # None: the call failed before the provider said what it used
    duration: float = 0.0
    stop_reason: str = ""
    error: str = ""
    cost_usd: float | None = None  # None: no price is known for this model; never a made-up 0
    tool: str = ""  # the tool that made the call (deepthinking, design…); "" for the agent's own step


def llm_call_end(step: int, provider: str, model: str, usage: dict[str, Any] | None, duration: float,
                 stop_reason: str = "", error: str = "", cost_usd: float | None = None,
                 tool: str = "") -> dict[str, Any]:
    data = LlmCallEnd(step=step, provider=provider, model=model, duration=duration, stop_reason=stop_reason,
                      error=error, cost_usd=cost_usd, tool=tool).to_wire()
    data["usage"] = usage or {}
    return data


def model_routed(tier: str, provider: str, model: str, reason: str) -> dict[str, Any]:
    return {"tier": tier, "provider": provider, "model": model, "reason": reason}


def tool_call_start(call_id: str, name: str, arguments: str, brief: str) -> dict[str, Any]:
    """`brief` is a one-line summary for compact display (e.g. the path a read_file reads)."""
    return {"call_id": call_id, "name": name, "arguments": _clip(arguments), "brief": _clip(brief, 200)}


def tool_call_result(call_id: str, name: str, content: str, is_error: bool, duration: float) -> dict[str, Any]:
    return {"call_id": call_id, "name": name, "content": _clip(content), "is_error": is_error,
            "duration": duration}


def thinklink_entry(agent: str, goal: str, step: str, reason: str, plan: list[tuple[str, str]],
                    problems: list[str] | None = None, parse_failures: int = 0) -> dict[str, Any]:
    """A parsed `<thought>` block; `plan` items are (status, text) with status done | doing | todo. `problems`:
    why the block is not as the contract says (never closed, no goal…); `parse_failures`: such blocks of the
    run so far."""
    return {"agent": agent, "goal": goal, "step": step, "reason": reason,
            "plan": [{"status": s, "text": t} for s, t in plan], "problems": list(problems or []),
            "parse_failures": parse_failures}


def context_compressed(tier: str, original_tokens: int, compressed_tokens: int, *, step: int = 0,
                       threshold: int = 0, requested: bool = False) -> dict[str, Any]:
    """One compaction (`tier`: rule | emergency | ultimate), in local-estimate tokens of the whole conversation;
    `requested`: the user asked for it (`/compact`) rather than the threshold."""
    return {"tier": tier, "original_tokens": original_tokens, "compressed_tokens": compressed_tokens,
            "saved_tokens": max(0, original_tokens - compressed_tokens), "step": step, "threshold": threshold,
            "requested": requested}


def context_status(step: int, used: int, threshold: int, *, source: str, window: int, measured: bool,
                   parts: dict[str, int]) -> dict[str, Any]:
    """How full the context is before a model call: `used` is what compression compares with `threshold` (the
    provider's count of the last request plus an estimate of what came after when `measured`, else a local
    estimate); `source` says where the threshold came from (env | config | catalog | default); `window` is the
    context window the gauge shows: the provider's configured `context_window`, else the catalog's (0 = unknown);
    `parts` the request part by part, in local-estimate tokens
    (system, instructions, history, tool_results, call_context, tools)."""
    return {"step": step, "used": used, "threshold": threshold, "source": source, "window": window,
            "measured": measured, "parts": dict(parts)}


def conversation_error(error: str) -> dict[str, Any]:
    return {"error": error}


def browser_page(action: str, url: str, *, artifact: str = "", is_error: bool = False) -> dict[str, Any]:
    """A browser tool ran (`action`, its name); `url`: the run's current page after it; `artifact`: a screenshot's
    file."""
    return {"action": action, "url": _clip(url, 500), "artifact": artifact, "is_error": is_error}


def log(level: str, message: str) -> dict[str, Any]:
    return {"level": level, "message": message}


@record
class WorkflowDecision(Record):
    """`workflow_decision`: a workflow's engine chose its next step — a role node and its task (`agent`), or no
    step (`situation`, and what the definition does then: `action`) — and why (`reason`). `progress` is the
    workflow's own short account of where it stands (e.g. "3 chapters written"), for `yagent workflow status`."""

    workflow: str = ""
    step: int = 0  # the engine's decisions so far in this run
    agent: str = ""  # the role node that runs next ("" for no step)
    task: str = ""  # the start of its task
    reason: str = ""
    situation: str = ""  # no deterministic step: the situation the facts are in
    action: str = ""  # what the definition does in it: finish, ask_user, or hand to a named planner
    progress: str = ""
    error: str = ""  # the facts could not be read or a step left what it should have made undone


def workflow_decision(**fields: Any) -> dict[str, Any]:
    data = WorkflowDecision(**fields)
    data.task = _clip(data.task, 400)
    return data.to_wire()
