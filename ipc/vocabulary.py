"""Shared vocabularies: run and task states, stop reasons, event types, control actions.

One definition each, imported by daemon, workers and clients alike.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["AUTHORIZE_ANSWERS", "ControlAction", "EventType", "RunStatus", "StopReason", "TaskState", "YoloLevel"]


class StopReason(StrEnum):
    """Why a run stopped. The order matters nowhere; the set is closed."""

    PAUSED = "paused"
    CANCELLED = "cancelled"
    IDLE_TIMEOUT = "idle_timeout"
    TOTAL_TIMEOUT = "total_timeout"
    MAX_STEPS = "max_steps"
    LLM_ERROR = "llm_error"
    CIRCUIT_BREAKER_OPEN = "circuit_breaker_open"
    PANIC = "panic"  # the worker crashed or raised without reporting a result
    PLAIN_TEXT = "plain_text"
    AGENT_EXIT = "agent_exit"
    UNACCOUNTED = "unaccounted"
    INTERRUPTED = "interrupted"  # the daemon went away while the run was live


class RunStatus(StrEnum):
    QUEUED = "queued"  # waiting for a delegation-pool slot or the live-worker cap
    STARTING = "starting"  # process launched, no hello yet
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"

    @property
    def finished(self) -> bool:
        return self in _FINISHED_RUN


_FINISHED_RUN = {RunStatus.DONE, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.INTERRUPTED}


class TaskState(StrEnum):
    IDLE = "idle"  # no turn in flight; ready for the next user message
    RUNNING = "running"
    PAUSED = "paused"
    WAITING = "waiting"  # a question waits for the user
    DONE = "done"  # last turn finished normally (same as idle for submitting more turns)
    FAILED = "failed"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"


class ControlAction(StrEnum):
    PAUSE = "pause"
    CONTINUE = "continue"
    CANCEL = "cancel"


class YoloLevel(StrEnum):
    NONE = "none"
    YOLO = "yolo"  # skip authorisation prompts for in-workspace operations
    FULL = "full"  # also outside the workspace; ask_user_for_help is removed


# The answers an authorisation question takes, in the order clients offer them (the worker maps them to
# decisions; anything else is a refusal).
AUTHORIZE_ANSWERS = ("once", "session", "project", "deny")


class EventType(StrEnum):
    # emitted by agents inside workers
    AI_STREAM_START = "ai_stream_start"
    AI_CHUNK = "ai_chunk"
    AI_STREAM_END = "ai_stream_end"
    AI_RESPONSE = "ai_response"
    THINKING = "thinking"
    LLM_CALL_START = "llm_call_start"
    LLM_CALL_END = "llm_call_end"
    MODEL_INFO = "model_info"
    MODEL_ROUTED = "model_routed"
    TOOL_CALL_START = "tool_call_start"
    TOOL_CALL_RESULT = "tool_call_result"
    CONTEXT_LOADED = "context_loaded"
    CONTEXT_COMPRESSED = "context_compressed"
    CONTEXT_EMERGENCY_COMPRESSED = "context_emergency_compressed"
    CONTEXT_ULTIMATE_COMPRESSED = "context_ultimate_compressed"
    THINKLINK_ENTRY = "thinklink_entry"
    CONVERSATION_ERROR = "conversation_error"
    CONVERSATION_RESULT = "conversation_result"
    LOG = "log"
    # stamped by the daemon
    USER_HELP_NEEDED = "user_help_needed"
    USER_HELP_RESPONSE = "user_help_response"
    TASK_PAUSED = "task_paused"
    TASK_RESUMED = "task_resumed"
    TURN_STARTED = "turn_started"
    TURN_FINISHED = "turn_finished"
    RUN_QUEUED = "run_queued"
    RUN_STARTED = "run_started"
    RUN_FINISHED = "run_finished"
    LLM_SLOT_WAIT = "llm_slot_wait"  # {"waiting": bool, "limit": int}: a run queues for an in-flight request slot
