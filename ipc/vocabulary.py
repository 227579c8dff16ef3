"""Shared vocabularies: run and task states, stop reasons, event types, control actions, question kinds,
hand-off statuses and error codes.

One definition each, imported by daemon, workers and clients alike; nothing else spells these words.
`tests/ipc/test_vocabulary_golden.py` pins the wire spelling of every value, and
`tests/test_vocabulary_ratchet.py` fails on a distinctive one typed as a plain string in client, daemon
or test code.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = [
    "AUTHORIZE_ANSWERS",
    "WRITABLE_HANDOFF_STATUSES",
    "ChangeKind",
    "CheckpointJobKind",
    "CheckpointKind",
    "ControlAction",
    "ErrorCode",
    "EventType",
    "HandoffStatus",
    "McpState",
    "QuestionKind",
    "ReplayVerdict",
    "RunStatus",
    "StopReason",
    "SubagentState",
    "TaskState",
    "TurnEndChoice",
    "Unconfined",
    "YoloLevel",
]


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
    BACKGROUND = "background"  # the turn finished; sub-agents it kept run on (idle again when they end)


class SubagentState(StrEnum):
    """Where one continuable sub-agent of a task stands (the daemon's reuse table)."""

    WORKING = "working"  # its newest run is queued or running
    IDLE = "idle"  # its newest run finished: a follow-up continues its conversation
    STOPPED = "stopped"  # its newest run failed, was cancelled or interrupted: a follow-up still continues it
    RETIRED = "retired"  # its configuration changed, or the table let it go: it is never continued again


class TurnEndChoice(StrEnum):
    """What becomes of a background sub-agent that is still working when the turn that started it ends."""

    WAIT = "wait"  # the turn waits for it: its agent reads the result before it answers
    KEEP = "keep"  # it works on after the turn (the task shows background work); the next turn gets its result
    CANCEL = "cancel"  # it is cancelled with the turn


class ControlAction(StrEnum):
    PAUSE = "pause"
    CONTINUE = "continue"
    CANCEL = "cancel"


class YoloLevel(StrEnum):
    NONE = "none"
    YOLO = "yolo"  # skip authorisation prompts for in-workspace operations
    FULL = "full"  # also outside the workspace; ask_user_for_help is removed


class Unconfined(StrEnum):
    """Why a run is not confined by the kernel (Landlock); a confined run has none."""

    SANDBOX_OFF = "sandbox_off"  # [sandbox] mode = "off"
    FULL_YOLO = "full_yolo"  # the turn was sent with --full-yolo
    LANDLOCK_MISSING = "landlock_missing"  # the kernel has no Landlock (too old, or disabled)


class ReplayVerdict(StrEnum):
    """Whether an interrupted delegation is picked up where it stopped (`replayable`) or reported on, and why:
    the first unsafe reason `workers.memory.replay.assess_replay` finds, as `continue` and `yagent resume` say."""

    REPLAYABLE = "replayable"
    RESUME_DISABLED = "resume_disabled"
    NO_CHILD_ROLLOUT = "no_child_rollout"
    UNREADABLE = "unreadable"
    NO_CHECKPOINT = "no_checkpoint"
    DIGEST_MISMATCH = "digest_mismatch"
    MESSAGE_COUNT_MISMATCH = "message_count_mismatch"
    OVER_BUDGET = "over_budget"
    WORKSPACE_MOVED = "workspace_moved"
    BROWSER_DELEGATION = "browser_delegation"
    MAX_STEPS_REACHED = "max_steps_reached"
    TIMED_OUT = "timed_out"
    NOT_RESUMABLE_STOP = "not_resumable_stop"
    STARTS_OVER = "starts_over"  # an agent kind that does not pick up replays (meta): it runs its task again


class CheckpointKind(StrEnum):
    """Why a git checkpoint of a task was made."""

    BEFORE = "before"  # by the daemon, before a Coding sub-task's first write
    AFTER = "after"  # by the daemon, once that sub-task has ended
    AGENT = "agent"  # asked for by the agent (git_checkpoint_create)
    SAFETY = "safety"  # how things were just before a rollback or an undo, so it can be taken back


class CheckpointJobKind(StrEnum):
    """The git work one checkpoint process does."""

    CREATE = "create"
    DIFF = "diff"
    RESTORE = "restore"
    SQUASH = "squash"
    PRUNE = "prune"
    NOTE = "note"  # the prior content of files an agent is about to write, added to its checkpoints


class ChangeKind(StrEnum):
    """How a file differs between two checkpoints."""

    ADDED = "added"
    MODIFIED = "modified"
    DELETED = "deleted"
    TYPE = "type"  # a file became a link, or the other way round


class McpState(StrEnum):
    """Where an MCP server the daemon owns stands; one line per server says it (`ipc.mcp_status`)."""

    STARTING = "starting"  # spawned or connecting; initialize and the tool list are on their way
    READY = "ready"  # initialized and its tool list read: its tools reach agents
    DEGRADED = "degraded"  # alive but without a tool list (the listing failed or is over its budget)
    OFFLINE = "offline"  # not running: exited, crashed, could not start, or not started yet
    DISABLED = "disabled"  # off by configuration, or a project's .mcp.json server not approved yet


class QuestionKind(StrEnum):
    """What a question waiting for the user asks for."""

    CONFIRM = "confirm"  # yes / no (or the two options given)
    SELECT = "select"  # one of the options
    INPUT = "input"  # free text
    AUTHORIZE = "authorize"  # an authorisation prompt: one of AUTHORIZE_ANSWERS


class HandoffStatus(StrEnum):
    """How a delegated agent judges its own work (`handoff.status`), and how its parent reads the result."""

    OK = "ok"
    PARTIAL = "partial"
    ERROR = "error"
    STOPPED = "stopped"  # the child did not finish (timeout, cancel, crash); never written by an agent
    INTERRUPTED = "interrupted"  # the daemon stopped while the child ran: not a failure, resumed with the task
    DEGRADED = "degraded"  # an interrupted child that could not be replayed: yagent's report of its record


# The statuses an agent may write into its hand-off.
WRITABLE_HANDOFF_STATUSES = (HandoffStatus.OK, HandoffStatus.PARTIAL, HandoffStatus.ERROR)


class ErrorCode(StrEnum):
    """The machine-readable code of an error reply; its message says what to do."""

    # anything the daemon cannot read or answer
    MALFORMED = "malformed"  # not msgpack, not a map, unknown kind, a field of the wrong type
    NOT_A_REQUEST = "not_a_request"  # a valid message that is not a request on this socket
    PROTOCOL_MISMATCH = "protocol_mismatch"
    TOO_LARGE = "too_large"  # the reply would not fit one frame
    INTERNAL = "internal"  # a daemon bug; the daemon log has the traceback
    REGISTRY_UNAVAILABLE = "registry_unavailable"  # state.db locked by another program, or the disk full
    TOO_FAST = "too_fast"  # the client sends requests faster than it reads the replies
    UNAUTHENTICATED = "unauthenticated"  # no hello with the client token (or a worker's proof) on this connection
    # requests the user must change
    BAD_REQUEST = "bad_request"
    BAD_CONFIG = "bad_config"
    BAD_PROJECT = "bad_project"
    UNKNOWN_TASK = "unknown_task"
    AMBIGUOUS_TASK = "ambiguous_task"
    # the state of a task or of the daemon
    SHUTTING_DOWN = "shutting_down"
    BUSY = "busy"  # the task already has a turn in flight
    NOT_RUNNING = "not_running"  # the task has no turn in flight
    NO_QUESTION = "no_question"  # the question was answered already, or its run ended
    # worker requests
    UNKNOWN_RUN = "unknown_run"
    TOO_DEEP = "too_deep"  # a delegation past the depth limit
    STOPPING = "stopping"  # the run asking is being stopped
    NOT_APPROVED = "not_approved"  # an approved operation with no answered prompt of the run behind it
    MCP_UNAVAILABLE = "mcp_unavailable"  # a required MCP server did not come up, or a call found no server
    UNKNOWN_SUBAGENT = "unknown_subagent"  # no sub-agent of this id belongs to the asking agent in its task
    SUBAGENT_BUSY = "subagent_busy"  # a follow-up to a sub-agent that is still working
    TOO_MANY = "too_many"  # past a bound: background sub-agents of one run, waits in flight


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
    CONTEXT_STATUS = "context_status"  # before each model call: how full the context is, part by part
    THINKLINK_ENTRY = "thinklink_entry"
    CONVERSATION_ERROR = "conversation_error"
    CONVERSATION_RESULT = "conversation_result"
    LOG = "log"
    BROWSER_PAGE = "browser_page"  # a browser tool ran: which, where the run's page is now, a screenshot's path
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
    BACKGROUND_WORK = "background_work"  # the sub-agents a finished turn kept working, or that they all ended
    # emitted by a workflow's engine
    WORKFLOW_DECISION = "workflow_decision"  # the router's choice of the next step (or of none), with its reason
