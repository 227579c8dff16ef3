"""Every message exchanged between client, daemon and worker, declared once.

Three conversations share this vocabulary:

* client ⇄ daemon over `control.sock` (DEALER → ROUTER): requests carry an `id`, the reply echoes it;
* daemon → clients over `events.sock` (PUB, topic = task id): `PublishedEvents`;
* worker ⇄ daemon over `workers.sock` (DEALER with a random identity → ROUTER), bound to its run by the
  first `WorkerHello` that proves the run's secret.

Errors are replies too (`ErrorReply`) with a machine-readable code and a message for people.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .errors import MalformedMessage
from .records import Message, Record, message, record
from .run_settings import RunSettings
from .vocabulary import (
    ChangeKind,
    CheckpointJobKind,
    CheckpointKind,
    McpState,
    QuestionKind,
    ReplayVerdict,
    RunStatus,
    StopReason,
    SubagentState,
    TurnEndChoice,
    Unconfined,
)

__all__ = [
    "BACKGROUND_OPTION",
    "FOLLOWUP_OPTION",
    "PROTOCOL_VERSION",
    "REPLAY_OPTION",
    "RESUME_OPTION",
    "Ack",
    "Answer",
    "ApprovedOperation",
    "ApprovedOperationResult",
    "AskUser",
    "BlueprintShown",
    "BlueprintViewSpec",
    "BrowserCall",
    "BrowserCallResult",
    "BrowserCancel",
    "BrowserHostCall",
    "BrowserHostCancel",
    "BrowserHostReady",
    "BrowserHostReply",
    "BrowserRelease",
    "ChangeSet",
    "CheckpointCreate",
    "CheckpointInfo",
    "CheckpointJob",
    "CheckpointJobResult",
    "CheckpointList",
    "CheckpointNote",
    "CheckpointReply",
    "CheckpointRollback",
    "CompactContext",
    "CompactNow",
    "DaemonStatus",
    "DelegateAccepted",
    "DelegateRequest",
    "DelegateResult",
    "ErrorReply",
    "Event",
    "EventBatch",
    "FileChange",
    "Heartbeat",
    "Hello",
    "HelloReply",
    "InterruptedChild",
    "LeaseGrant",
    "LeaseRecall",
    "LeaseRelease",
    "LeaseRequest",
    "ListResumeCandidates",
    "ListTasks",
    "McpApprove",
    "McpCall",
    "McpCallResult",
    "McpCancel",
    "McpRestart",
    "McpServerStatus",
    "McpStatusReply",
    "McpStatusRequest",
    "McpTool",
    "McpToolsChanged",
    "McpToolsReply",
    "McpToolsRequest",
    "Ping",
    "PublishedEvents",
    "Question",
    "Replay",
    "ReplayReply",
    "ResultAck",
    "ResumeCandidate",
    "ResumeCandidateList",
    "ResumeInspectionReport",
    "ResumeInspectionSpec",
    "RunControl",
    "RunOutcome",
    "RunResult",
    "RunSpec",
    "RunSummary",
    "ShowBlueprint",
    "Shutdown",
    "StartRun",
    "StatusRequest",
    "SubagentInfo",
    "SubagentsReply",
    "SubagentsRequest",
    "Submit",
    "Submitted",
    "SubtaskChanges",
    "TaskControl",
    "TaskDetail",
    "TaskDiff",
    "TaskDiffReply",
    "TaskInfo",
    "TaskList",
    "TaskSummary",
    "TaskUndo",
    "TaskUndoReply",
    "TurnSummary",
    "UserAnswer",
    "WorkerHello",
    "continued_run",
    "continues_a_run",
    "is_event_item",
]

# Bump on any incompatible change to a message below.
PROTOCOL_VERSION = 3  # 2: the client token in hello, bound worker connections (issue 12); the caller's key
# variables in Submit and TaskControl (`env`). 3: `PublishedEvents` carries run, agent and first seq once per batch
# (issue 20: a worker's batch is relayed as it came).

_NUMBERS = (int, float)


def is_event_item(item: Any) -> bool:
    """Whether `item` is an event as a worker sends it, `[type: str, ts: number, data: map]`: the one rule by which
    the daemon publishes an event and a client accepts it (a bool is no timestamp)."""
    return (type(item) is list and len(item) == 3 and type(item[0]) is str and type(item[1]) in _NUMBERS
            and type(item[2]) is dict)


# ---------------------------------------------------------------------------------------------------
# Shared records


@record
class Question(Record):
    """A question waiting for the user (ask_user_for_help or an authorisation prompt)."""

    request_id: str
    kind: QuestionKind
    prompt: str
    options: list[str] = field(default_factory=list)
    default: str | None = None
    details: dict = field(default_factory=dict)
    task: str = ""
    run: str = ""
    agent: str = ""
    asked_at: float = 0.0


@record
class RunSummary(Record):
    run: str
    agent: str
    status: str
    parent: str | None = None
    stop_reason: str = ""
    pid: int = 0
    created_at: float = 0.0
    started_at: float = 0.0
    ended_at: float = 0.0
    waiting: str = ""  # what a live run is waiting for, e.g. a model slot ([llm] max_in_flight_requests)
    requests: int = 0  # model calls
    input_tokens: int = 0  # cached input included
    cached_input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    cost_known: bool = True  # False: some call's model has no known price, cost_usd leaves it out
    slot_wait_seconds: float = 0.0  # time spent waiting for a model slot
    cpu_percent: float | None = None  # of one core, the run's process tree; live runs only
    rss_bytes: int = 0  # the run's process tree; live runs only
    uss_bytes: int = 0
    unconfined: str = ""  # an `Unconfined` reason when the kernel does not confine the run; live runs only


@record
class TurnSummary(Record):
    turn: int
    text: str
    state: str
    root_run: str = ""
    created_at: float = 0.0
    ended_at: float = 0.0
    output: str = ""


@record
class TaskSummary(Record):
    task: str
    project: str
    title: str
    state: str
    created_at: float
    updated_at: float
    runs: list[RunSummary] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)
    last_seq: int = 0
    requests: int = 0  # model calls of the listed runs
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0  # the listed runs' cost
    cost_known: bool = True
    cost_limit: float = 0.0  # [llm] max_cost_per_task as it applies to this task (raised by the user?); 0 = none


@record
class RunOutcome(Record):
    """How a run ended: the one shape from the agent's loop to its parent's tool result.

    The agent returns it, the worker reports it (`RunResult`), the daemon fills in `run` and `agent`, sets
    status and stop reason when it stopped the run itself (a timeout, a cancel, a crash), records it and
    hands it on unchanged: to the parent run (`DelegateResult`), to followers (`run_finished`), to the user
    (`turn_finished`).
    """

    status: RunStatus
    stop_reason: StopReason
    output: str = ""  # the run's full answer
    error: str = ""  # why it did not finish, for people
    handoff: dict | None = None  # a delegated agent's structured hand-off: conclusion, facts, open_questions, status
    run: str = ""
    agent: str = ""
    steps: int = 0
    usage: dict = field(default_factory=dict)  # token counts summed over the run's model calls
    cpu_seconds: float = 0.0  # the worker process's own CPU time
    data: dict = field(default_factory=dict)  # what one agent kind adds (agent_exit's arguments, a traceback)
    signature: str = ""  # a sub-agent's configuration signature (workers/agents/configuration_signature.py)
    continued: bool = False  # a follow-up that went on with its sub-agent's conversation (False: started anew)
    subagent: str = ""  # the sub-agent the run belongs to (set by the daemon; "" for a root run)

    @property
    def done(self) -> bool:
        return self.status == RunStatus.DONE


# `RunSpec.options` keys the daemon sets itself. RESUME_OPTION: this root run continues an interrupted turn,
# {"turn": N, "run": the interrupted root run}. REPLAY_OPTION: this child replays an interrupted delegation,
# {"call_id": the parent's call, "parent_run": the interrupted run that delegated it, "run": the interrupted
# run it continues ("" when the daemon has no record of one)}.
RESUME_OPTION = "resume_of"
REPLAY_OPTION = "replay_of"
# FOLLOWUP_OPTION: this child continues sub-agent {"subagent": id} from the conversation its newest run
# {"run": …} wrote, if its configuration signature is still the one that conversation was written with; when it
# is not, {"fresh_if_changed": True} starts it anew on its task (a workflow's node), else it reports why not.
# BACKGROUND_OPTION (a root run): {"finished": […], "running": […], "interrupted": […]}, `SubagentInfo` maps of
# the task's background sub-agents: results not yet offered to a turn, those still working, and those a stopped
# daemon interrupted (a resumed turn starts them again).
FOLLOWUP_OPTION = "followup_of"
BACKGROUND_OPTION = "background_work"


def continued_run(options: dict[str, Any]) -> str:
    """The stopped run a run's options say it continues: a resumed root's stopped root run, a replayed child's
    interrupted run; "" for a run that continues none (and so may not ask for replays of its own)."""
    for key in (RESUME_OPTION, REPLAY_OPTION):
        value = options.get(key)
        if isinstance(value, dict):
            run = value.get("run")
            return run if isinstance(run, str) else ""
    return ""


def continues_a_run(options: dict[str, Any]) -> bool:
    """Whether a run resumes a stopped turn or replays an interrupted delegation: only such a run's delegations
    may be replays."""
    return RESUME_OPTION in options or REPLAY_OPTION in options


@record
class RunSpec(Record):
    """Everything a worker needs to run; workers read nothing else from the daemon's world."""

    run: str
    task: str
    turn: int
    project: str  # project id
    project_root: str
    agent: str
    input: str
    home: str
    parent_run: str | None = None
    call_id: str | None = None  # the parent's tool call that asked for this delegation
    context: str = ""  # facts the delegating agent handed over with the task
    depth: int = 0
    subagent: str = ""  # the continuable sub-agent this run is (a delegated run), its id in the reuse table
    paused: bool = False
    yolo: str = "none"
    # What the user allowed for the task's session at its earlier prompts (approval keys, `ipc.approval_grants`).
    session_grants: list[str] = field(default_factory=list)
    settings: RunSettings = field(default_factory=RunSettings)  # what the run needs of config.toml, resolved
    options: dict = field(default_factory=dict)  # per-submit options (agent kinds may read them)
    heartbeat_interval: float = 1.0
    daemon_loss_timeout: float = 10.0


@dataclass(slots=True)
class Event:
    """One event as clients see it. Travels as a compact list, not a map: it is the hot path."""

    seq: int
    task: str
    run: str
    agent: str
    type: str
    ts: float
    data: dict

    @classmethod
    def from_published(cls, task: str, item: Any) -> Event:
        """One event of a replay page: `[seq, run, agent, type, ts, data]`."""
        if not isinstance(item, list | tuple) or len(item) != 6:
            raise MalformedMessage("event must be a 6-item list")
        seq, run, agent, type_, ts, data = item
        if not (isinstance(seq, int) and isinstance(run, str) and isinstance(agent, str)):
            raise MalformedMessage("event seq/run/agent have wrong types")
        if not (isinstance(type_, str) and isinstance(ts, int | float) and isinstance(data, dict)):
            raise MalformedMessage("event type/ts/data have wrong types")
        return cls(seq, task, run, agent, type_, float(ts), data)

    @classmethod
    def from_batch(cls, batch: PublishedEvents) -> list[Event]:
        """The events of a live frame, seq stamped from the batch's first (the hot path: one check per event)."""
        task, run, agent, seq = batch.task, batch.run, batch.agent, batch.seq
        out = []
        for item in batch.events:
            # `is_event_item`, inline: a call per event is a tenth of the client's cost per event.
            if not (type(item) is list and len(item) == 3 and type(item[0]) is str and type(item[1]) in _NUMBERS
                    and type(item[2]) is dict):
                raise MalformedMessage("a published event must be a [type: str, ts: number, data: map] list")
            out.append(cls(seq, task, run, agent, item[0], float(item[1]), item[2]))
            seq += 1
        return out

    def to_published(self) -> list[Any]:
        return [self.seq, self.run, self.agent, self.type, self.ts, self.data]

    def to_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "task": self.task,
            "run": self.run,
            "agent": self.agent,
            "type": self.type,
            "ts": self.ts,
            "data": self.data,
        }


# ---------------------------------------------------------------------------------------------------
# Generic replies


@message("error")
class ErrorReply(Message):
    id: int
    code: str
    message: str


@message("ack")
class Ack(Message):
    id: int
    task: str = ""
    state: str = ""
    detail: str = ""


# ---------------------------------------------------------------------------------------------------
# client ⇄ daemon


@message("hello")
class Hello(Message):
    id: int
    version: int
    role: str = "client"
    pid: int = 0
    token: str = ""  # the runtime directory's client token (`client_token`): nothing else is answered first


@message("hello_reply")
class HelloReply(Message):
    id: int
    version: int
    daemon_pid: int
    started_at: float
    runtime_dir: str
    home: str
    config: str = ""  # the configuration file the daemon reads: a client naming another one is refused
    env_provider: str = ""  # the zero-config provider yagentd's own environment offers ("" none), never a value


@message("submit")
class Submit(Message):
    """A user turn. `task` continues an existing task; otherwise the project's task is created."""

    id: int
    project: str  # absolute path of the project root
    text: str
    task: str | None = None
    agent: str = "director"
    yolo: str = "none"
    options: dict = field(default_factory=dict)
    # The caller's values of the variables the configuration names (api_key_env) and of the zero-config ones
    # (`caller_keys`): this turn's runs use them; yagentd keeps them in memory for the turn only.
    env: dict = field(default_factory=dict)


@message("submitted")
class Submitted(Message):
    id: int
    task: str
    turn: int
    run: str
    project: str
    notice: str = ""  # a provider picked without configuration (`zero_config`): what and from where, to say once


@message("list_tasks")
class ListTasks(Message):
    id: int
    project: str | None = None
    limit: int = 50


@message("task_list")
class TaskList(Message):
    id: int
    tasks: list[TaskSummary]


@message("task_info")
class TaskInfo(Message):
    id: int
    task: str


@message("task_detail")
class TaskDetail(Message):
    id: int
    task: TaskSummary
    turns: list[TurnSummary] = field(default_factory=list)


@message("control")
class TaskControl(Message):
    id: int
    task: str
    action: str  # a ControlAction
    env: dict = field(default_factory=dict)  # as in Submit: a `continue` that resumes a turn starts runs


@message("compact")
class CompactContext(Message):
    """Ask the task's running turn to compact its context now (`/compact`): the root run does it before its next
    model call. A task with no live turn is answered `not_running`."""

    id: int
    task: str


@message("replay")
class Replay(Message):
    """Ask for the task's events with seq > after_seq (at most `limit`)."""

    id: int
    task: str
    after_seq: int = 0
    limit: int = 2000


@message("replay_reply")
class ReplayReply(Message):
    id: int
    task: str
    events: list  # published-event lists, ascending seq
    last_seq: int  # newest seq the daemon has stamped for this task
    first_available: int  # oldest seq still replayable; older ones are gone
    dropped: int  # how many requested events are no longer available
    more: bool = False  # the page hit `limit`; ask again after the last returned seq


@record
class InterruptedChild(Record):
    """One interrupted delegation of a stopped turn, as an inspection run found it: what `continue` will do."""

    call_id: str
    agent: str
    verdict: ReplayVerdict
    reason: str  # a sentence for the user
    step: int = 0  # a replayable one goes on from this step
    depth: int = 1  # 1: a call of the stopped root run; 2: a call of that child's replay; and so on
    parent: str = ""  # the call id of the delegation this call was made in ("" at depth 1)


@record
class ResumeCandidate(Record):
    """A task whose last turn did not finish: one `continue` resumes, with what its inspection reported (paused
    tasks need none), or one it does not (`resumable` false: it failed in a way that is not picked up)."""

    task: TaskSummary
    resumable: bool = True
    children: list[InterruptedChild] = field(default_factory=list)
    problem: str = ""  # the inspection could not read the stopped turn's history: the Director uses its memory
    uninspected: str = ""  # why no inspection reported ("" when one did, or none was needed)
    unconfined: str = ""  # an `Unconfined` reason when the kernel did not confine the inspection


@message("list_resume_candidates")
class ListResumeCandidates(Message):
    """The tasks of every project that `continue` resumes, each stopped one inspected by a short worker run."""

    id: int
    limit: int = 50


@message("resume_candidate_list")
class ResumeCandidateList(Message):
    id: int
    candidates: list[ResumeCandidate]


@message("answer")
class Answer(Message):
    id: int
    task: str
    request_id: str
    answer: dict  # {"value": ..., "scope": ...} or {"cancelled": True}
    by: str = ""  # who answers, for the other clients: "yagent on pts/3"


@message("status")
class StatusRequest(Message):
    id: int


@message("status_reply")
class DaemonStatus(Message):
    id: int
    pid: int
    version: str
    started_at: float
    runtime_dir: str
    home: str
    live_workers: int
    max_workers: int
    tasks_running: int
    # limit, in_use (held: a slot lent with a start or a result counts until it comes back), peak, waiting,
    # granted_total (slots model calls used), handed_total (of those, ones handed over ahead)
    leases: dict
    runs_started: int = 0
    warm_workers: int = 0  # worker processes forked ahead of demand, ready for a run now
    shutting_down: bool = False
    spent_today: float = 0.0  # US dollars over every task since midnight
    daily_limit: float = 0.0  # [llm] max_cost_per_day as it applies today; 0 = none
    confinement: str = ""  # how runs are confined (Landlock ABI, or why not), one line
    confined: bool = False  # runs are confined by default (Landlock present and [sandbox] mode = "on")
    config: str = ""  # the configuration file the daemon reads
    config_warnings: list[str] = field(default_factory=list)  # what in it nothing reads, a line each
    browser: list[str] = field(default_factory=list)  # the Browser agent's Chromium: what it runs, or why it cannot


@message("shutdown")
class Shutdown(Message):
    id: int


@message("published")
class PublishedEvents(Message):
    """Events of one run of `task`, oldest first, each `[type, ts, data]` as its worker sent it (the daemon relays
    a valid batch's bytes as they came); the i-th has seq `seq + i`. `Event.from_batch` reads them."""

    task: str
    run: str
    agent: str
    seq: int
    events: list


# ---------------------------------------------------------------------------------------------------
# worker ⇄ daemon


@message("worker_hello")
class WorkerHello(Message):
    version: int
    run: str
    pid: int
    proof: bytes = b""  # `run_secret.hello_proof` of the run's secret for this connection's identity
    prefaulted: int = 0  # pages a warm worker copied before its assignment (`yagent.workers.page_warmth`)
    rules_ahead: int = 0  # Landlock rules a warm worker added to its ruleset before its assignment
    spec_in_hand: bool = False  # its assignment carried the run's spec: the start message need not
    # Its run's agent works in model steps (`agent_kind(model_loop=True)`): a slot may come with its start and with
    # a child's result. Known only with the spec in hand.
    model_loop: bool = False


@message("start")
class StartRun(Message):
    """The run may start. `spec`: None for a worker that has it already (its hello said so); `paused`: whether the
    run starts paused (also in the spec when it is sent); `lease`: a model slot already granted for its first call
    (its id, given back with `LeaseRelease` as any other), 0 for none."""

    spec: RunSpec | None = None
    paused: bool = False
    lease: int = 0


@message("events")
class EventBatch(Message):
    """Events of one run, oldest first, each `[type, ts, data]`; the daemon stamps the rest."""

    events: list


@message("heartbeat")
class Heartbeat(Message):
    """Progress without an event (a long tool still producing output): resets the idle clock."""


@message("ping")
class Ping(Message):
    """Daemon liveness, sent to every worker periodically; a worker that hears nothing exits."""


@message("lease_request")
class LeaseRequest(Message):
    id: int


@message("lease_grant")
class LeaseGrant(Message):
    id: int


@message("lease_recall")
class LeaseRecall(Message):
    """A slot handed over ahead is wanted by a run that would wait: give it back (`unused`) unless a call took it."""

    id: int


@message("lease_release")
class LeaseRelease(Message):
    """`unused`: a slot handed over ahead (`StartRun.lease`, `DelegateResult.lease`) that no model call took."""

    id: int
    unused: bool = False


@message("delegate")
class DelegateRequest(Message):
    id: int
    agent: str
    task: str
    call_id: str = ""
    context: str = ""  # facts already established that the child should build on
    # A resumed parent re-asking for the delegation `call_id` that was interrupted: the child picks up from
    # what the interrupted child wrote (replay), or reports what it had done (a degraded report).
    replay: bool = False
    subagent: str = ""  # a follow-up: continue this sub-agent of the asking agent ("" starts a new one)
    reuse_key: str = ""  # a workflow's node: continue the sub-agent kept under this key, or start one for it
    # Start it in the background: `DelegateAccepted` answers at once, and this says what becomes of it if it is
    # still working when the turn ends. None: the reply is the child's `DelegateResult` once it has ended.
    background: TurnEndChoice | None = None


@message("delegate_result")
class DelegateResult(Message):
    """`lease`: a model slot already granted for the parent's next call, as in `StartRun`; 0 for none."""

    id: int
    outcome: RunOutcome
    lease: int = 0


@message("delegate_accepted")
class DelegateAccepted(Message):
    """A background delegation was admitted: its run and sub-agent; its end is asked for with `SubagentsRequest`."""

    id: int
    run: str
    subagent: str


@record
class SubagentInfo(Record):
    """One continuable sub-agent as the daemon's reuse table has it (what agent_status and wait_agents show)."""

    subagent: str
    agent: str
    state: SubagentState
    run: str = ""  # its newest run
    task: str = ""  # the start of the first task it was given
    conclusion: str = ""  # its newest hand-off's conclusion, else the start of its answer
    background: TurnEndChoice | None = None  # its newest run works in the background, and what ends it
    outcome: RunOutcome | None = None  # how its newest run ended (output and error cut to a budget)
    reuse_key: str = ""
    updated_at: float = 0.0


@message("subagents")
class SubagentsRequest(Message):
    """The asking agent's sub-agents (`subagents` empty: all of them). With `wait`, answered once none of those
    named (empty: those working in the background) is working, or at `timeout` seconds (0: none of its own;
    finite and at most `MAX_WAIT_SECONDS`). With `cancel`, those named that work are stopped first (one that has
    ended already is no failure); answered at once."""

    id: int
    subagents: list[str] = field(default_factory=list)
    wait: bool = False
    timeout: float = 0.0
    cancel: bool = False


@message("subagents_reply")
class SubagentsReply(Message):
    id: int
    subagents: list[SubagentInfo] = field(default_factory=list)
    timed_out: bool = False  # a wait whose deadline came first: some of them are still working


@message("ask_user")
class AskUser(Message):
    id: int
    question: Question


@message("user_answer")
class UserAnswer(Message):
    id: int
    answer: dict


@message("run_control")
class RunControl(Message):
    action: str  # a ControlAction
    reason: str = ""


@message("compact_now")
class CompactNow(Message):
    """daemon → worker: the user asked for a compaction (`CompactContext`); done before the next model call."""


@message("result")
class RunResult(Message):
    outcome: RunOutcome
    # Asked of a few warm workers (`assignment` learn flag): the pages the run made its own, `[first page, count]`
    # stretches (`yagent.ipc.page_runs`), and the pid of the forkserver whose memory they are pages of.
    page_runs: list = field(default_factory=list)
    page_parent: int = 0


@message("result_ack")
class ResultAck(Message):
    pass


@record
class ResumeInspectionSpec(Record):
    """What a resume inspection process reads (`workers/resume_inspection.py`): handed at launch, no secret in it
    (`settings` travels with an empty provider table)."""

    task: str
    home: str
    project_root: str
    stopped_run: str  # the stopped turn's root run
    agent: str  # its agent kind
    yolo: str
    settings: RunSettings = field(default_factory=RunSettings)


@message("resume_inspection_report")
class ResumeInspectionReport(Message):
    """A resume inspection's one reply, over its pipe to the daemon."""

    children: list[InterruptedChild] = field(default_factory=list)
    problem: str = ""
    unconfined: Unconfined | None = None


@message("approved_operation")
class ApprovedOperation(Message):
    """A confined worker asks the daemon to carry out one tool call the user approved at the prompt `ask` (the
    id of its `AskUser`), in a process of its own with the approved paths added to the run's rules."""

    id: int
    ask: int
    tool: str
    args: dict
    call_id: str = ""


@message("approved_operation_result")
class ApprovedOperationResult(Message):
    """What the approved operation's process returned: the tool result the model reads."""

    id: int
    content: str
    is_error: bool = False
    data: dict = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------------
# MCP servers (the daemon owns them; workers list and call their tools through it)


@record
class McpServerStatus(Record):
    """One MCP server of one project as the daemon sees it; `ipc.mcp_status.render_status_lines` says it."""

    project: str  # the project root
    server: str
    state: McpState
    source: str = ""  # config.toml, or .mcp.json
    transport: str = ""  # stdio or http
    target: str = ""  # the command line or the URL (never a header or a token)
    pid: int = 0
    tools: int = 0  # tools that reach agents
    uptime: float = 0.0  # seconds since it became ready (0: not ready)
    restarts: int = 0
    last_error: str = ""
    stderr_tail: list[str] = field(default_factory=list)  # its last lines on stderr (stdio servers)
    fix: str = ""  # what the user can do about its state
    required: bool = False
    withheld: list[str] = field(default_factory=list)  # tools not offered, each with why


@record
class McpTool(Record):
    """One tool of a ready server, as agents may get it (`write`: not known to be read-only — allowed only where
    the server has `allow_write`; such a tool needs the user's authorisation like any write)."""

    server: str
    name: str  # the server's own name for it
    description: str = ""
    input_schema: dict = field(default_factory=dict)
    write: bool = True


@message("mcp_tools")
class McpToolsRequest(Message):
    """A run asks for the MCP tools of its project (its project is the run's, never named by the worker).
    `wait_for`: servers to wait for until ready or given up (a resumed turn's, besides the required ones)."""

    id: int
    wait_for: list[str] = field(default_factory=list)


@message("mcp_tools_reply")
class McpToolsReply(Message):
    id: int
    generation: int  # grows whenever any server of the project lists other tools
    tools: list[McpTool] = field(default_factory=list)
    servers: list[McpServerStatus] = field(default_factory=list)


@message("mcp_tools_changed")
class McpToolsChanged(Message):
    """Daemon → the runs of a project: a server's tools changed; ask again at the next step."""

    generation: int


@message("mcp_call")
class McpCall(Message):
    """A run calls one tool of one of its project's servers; `timeout`: the most the caller waits (its own
    deadline), 0 for none beyond the server's progress watchdog."""

    id: int
    server: str
    tool: str
    arguments: dict = field(default_factory=dict)
    timeout: float = 0.0
    call_id: str = ""


@message("mcp_call_result")
class McpCallResult(Message):
    id: int
    content: str
    is_error: bool = False


@message("mcp_cancel")
class McpCancel(Message):
    """The run no longer waits for its call `call`: the daemon cancels it at the server."""

    call: int


@message("mcp_status")
class McpStatusRequest(Message):
    """Every MCP server of every project the daemon runs, plus those `project` (a root) would start."""

    id: int
    project: str = ""


@message("mcp_status_reply")
class McpStatusReply(Message):
    id: int
    servers: list[McpServerStatus] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # a project's .mcp.json that cannot be read, and the like


@message("mcp_restart")
class McpRestart(Message):
    """Restart server `server` (a name) in `project` (a root), or in every project that runs it when empty."""

    id: int
    server: str
    project: str = ""


@message("mcp_approve")
class McpApprove(Message):
    """Approve (or withdraw approval of) the servers a project's .mcp.json declares, as the file has them now;
    `servers` empty: all of them."""

    id: int
    project: str
    servers: list[str] = field(default_factory=list)
    approve: bool = True


# ---------------------------------------------------------------------------------------------------
# The browser (the daemon owns one Chromium per project; a run's browser_* tools reach it through the daemon)


@message("browser_call")
class BrowserCall(Message):
    """A run calls one browser tool on its project's browser (the project is the run's, never named by the
    worker); `timeout`: the most the caller waits, 0 for none beyond `[browser] command_timeout`."""

    id: int
    tool: str
    arguments: dict = field(default_factory=dict)
    timeout: float = 0.0
    call_id: str = ""


@message("browser_call_result")
class BrowserCallResult(Message):
    """What the tool did: the text the model reads, a screenshot's PNG when it took one, and where the run's
    page is after it (for the attached client)."""

    id: int
    content: str
    is_error: bool = False
    image: bytes = b""
    url: str = ""


@message("browser_cancel")
class BrowserCancel(Message):
    """The run no longer waits for its browser call `call`: the daemon withdraws it at the browser."""

    call: int


@message("browser_host_call")
class BrowserHostCall(Message):
    """Daemon → a project's browser host (over its stdin): one tool call of run `session`, whose pages and element
    references are its own; downloads go to `downloads` (the run's scratch directory)."""

    id: int
    session: str
    tool: str
    arguments: dict = field(default_factory=dict)
    downloads: str = ""
    timeout: float = 0.0


@message("browser_host_cancel")
class BrowserHostCancel(Message):
    id: int


@message("browser_host_reply")
class BrowserHostReply(Message):
    """`gone`: Chromium went away under the call; the host is ending and takes no more calls."""

    id: int
    content: str
    is_error: bool = False
    image: bytes = b""
    url: str = ""
    gone: bool = False


@message("browser_release")
class BrowserRelease(Message):
    """Daemon → browser host: run `session` ended; its pages close."""

    session: str


@message("browser_host_ready")
class BrowserHostReady(Message):
    """Browser host → daemon, once: the browser it started (its pid, which the daemon records with the process's
    start time so a later daemon can kill a leftover), or `problem` when it could not start one."""

    browser_pid: int = 0
    version: str = ""
    sandbox: str = ""  # how Chromium's own sandbox runs ("on", or why it is off)
    problem: str = ""


# ---------------------------------------------------------------------------------------------------
# Git checkpoints (the daemon keeps their record and starts a process for the git work: `daemon/checkpoints.py`,
# `workers/checkpoints/`)


@record
class FileChange(Record):
    """One file a change set touches, and how."""

    path: str
    change: ChangeKind
    binary: bool = False
    added: int = 0  # lines
    removed: int = 0
    patch: str = ""  # the unified diff of the file, when asked for (cut at a budget)


@record
class ChangeSet(Record):
    """The files that differ between two checkpoints (or a checkpoint and the project now)."""

    files: list[FileChange] = field(default_factory=list)
    note: str = ""  # e.g. that patches were cut


@record
class CheckpointInfo(Record):
    """One checkpoint of a task as agents and users see it; `number` counts from 1 within the task."""

    number: int
    kind: CheckpointKind
    run: str = ""
    agent: str = ""
    label: str = ""
    created_at: float = 0.0
    head: str = ""  # where HEAD was then: "on main", "detached at …", "…, merge in progress"
    skipped: list[str] = field(default_factory=list)  # files not read into it, each "path (why)"


@record
class SubtaskChanges(Record):
    """What one Coding sub-task changed: the files that differ between its before and after checkpoints."""

    run: str
    agent: str
    task: str  # the sub-task as it was delegated, cut
    before: int
    after: int = 0  # 0: it has no after-checkpoint (still running, or the daemon stopped meanwhile)
    files: list[FileChange] = field(default_factory=list)
    note: str = ""


@message("checkpoint_create")
class CheckpointCreate(Message):
    """A Coding run asks for a checkpoint of its project now (`git_checkpoint_create`)."""

    id: int
    label: str = ""


@message("checkpoint_list")
class CheckpointList(Message):
    """A run asks for its task's checkpoints (`git_checkpoint_list`)."""

    id: int


@message("checkpoint_rollback")
class CheckpointRollback(Message):
    """A Coding run asks for its project to be put back to checkpoint `number` of its own task
    (`git_checkpoint_rollback`); the state before is kept as a checkpoint first."""

    id: int
    number: int


@message("checkpoint_note")
class CheckpointNote(Message):
    """A Coding run is about to write these files (project-relative), which lie in a directory git ignores: their
    content now goes into its checkpoints first, so an undo puts them back (or removes those it makes)."""

    id: int
    paths: list[str] = field(default_factory=list)


@message("checkpoint_reply")
class CheckpointReply(Message):
    """The daemon's answer to a run's checkpoint request: what the model reads, and the task's checkpoints."""

    id: int
    content: str
    is_error: bool = False
    checkpoints: list[CheckpointInfo] = field(default_factory=list)


@message("task_diff")
class TaskDiff(Message):
    """What the task's agents changed, per sub-task and file (`yagent diff`, `/diff`)."""

    id: int
    task: str
    patches: bool = True


@message("task_diff_reply")
class TaskDiffReply(Message):
    id: int
    task: str
    subtasks: list[SubtaskChanges] = field(default_factory=list)
    checkpoints: list[CheckpointInfo] = field(default_factory=list)
    note: str = ""  # why there is nothing to show (checkpoints off, not a repository, no Coding sub-task yet)


@message("task_undo")
class TaskUndo(Message):
    """Put the project back: the last sub-task's changes (`to` 0) or everything since checkpoint `to`. Without
    `apply`, only what would change is answered; `force` goes on over files the user changed since."""

    id: int
    task: str
    to: int = 0
    apply: bool = False
    force: bool = False


@message("task_undo_reply")
class TaskUndoReply(Message):
    id: int
    task: str
    target: int  # the checkpoint whose content the files get
    what: str  # what is undone, for people
    files: list[FileChange] = field(default_factory=list)  # the files it changes, from now to the target
    changed_since: list[str] = field(default_factory=list)  # files the user changed since, which it would overwrite
    applied: bool = False
    safety: int = 0  # the checkpoint of how things were before the undo (`yagent undo --to N` goes back to it)
    left: list[str] = field(default_factory=list)  # files it does not touch, each "path (why)"


@record
class CheckpointJob(Record):
    """One piece of git work the daemon hands a checkpoint process (`workers/checkpoints/process.py`); the fields
    each kind reads are named in `workers/checkpoints/jobs.py`."""

    kind: CheckpointJobKind
    project_root: str
    scratch_dir: str
    home: str
    expected_common_dir: str = ""  # the repository the task's first job found: any other is refused
    ref: str = ""  # create: the new checkpoint's ref; squash: the agent branch
    message: str = ""
    pairs: list = field(default_factory=list)  # diff: [[from commit, to commit], ...]
    patches: bool = False
    target: str = ""  # restore: the commit whose content files get; squash: the last sub-task's after commit
    scope_from: str = ""  # restore: only files that differ between this commit and the target ("": all)
    expected: str = ""  # restore: the commit files must still match (else they are the user's changes)
    untouchable: list[str] = field(default_factory=list)  # restore: files never written or removed
    apply: bool = False
    force: bool = False
    safety_ref: str = ""  # restore: where the state before it is kept
    base: str = ""  # squash: the before commit of the turn's first sub-task
    merge: bool = False  # squash: fast-forward the user's branch when that is safe
    delete_branch: bool = False  # squash: and delete the agent branch once merged
    delete_refs: list[str] = field(default_factory=list)  # prune
    amend: list = field(default_factory=list)  # note: [[checkpoint ref, its commit], ...] to add the files to
    extra_paths: list[str] = field(default_factory=list)  # files agents wrote in ignored directories (project-relative)
    noted_later: list[str] = field(default_factory=list)  # restore: those of them noted after the target was made


@message("checkpoint_job_result")
class CheckpointJobResult(Message):
    """A checkpoint process's one reply, over its pipe to the daemon (read as msgpack, never unpickled)."""

    ok: bool
    problem: str = ""  # why the job failed, for people
    unsupported: str = ""  # checkpoints cannot be made in this project at all, and why
    common_dir: str = ""
    head: str = ""  # where HEAD was
    commit: str = ""
    tree: str = ""
    skipped: dict = field(default_factory=dict)  # path -> why it was not read
    changes: list[ChangeSet] = field(default_factory=list)  # diff: one per pair
    files: list[FileChange] = field(default_factory=list)  # restore: what it changes (or changed)
    changed_since: list[str] = field(default_factory=list)
    left: list[str] = field(default_factory=list)
    applied: bool = False
    safety_commit: str = ""
    detail: str = ""  # squash: what was done
    amended: list = field(default_factory=list)  # note: [[ref, its commit now], ...]


# ---------------------------------------------------------------------------------------------------
# The repository blueprint (`yagent blueprint`: read by a short process the daemon starts, `workers/blueprint/`)


@message("show_blueprint")
class ShowBlueprint(Message):
    """The blueprint of the project at `project` (a root): its structure derived now and its notes."""

    id: int
    project: str
    module: str = ""  # only this module


@message("blueprint_shown")
class BlueprintShown(Message):
    id: int
    project: str
    text: str
    problem: str = ""  # why it could not be shown


@record
class BlueprintViewSpec(Record):
    """What the blueprint's view process reads: handed at launch."""

    project_root: str
    blueprint_dir: str
    module: str = ""
