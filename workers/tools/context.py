"""What every executor receives: the run's facts and the narrow ports to the outside world.

The ports (`Authorizer`, `Asker`, `Delegator`, `TextLLM`) are protocols the worker's daemon channel and
LLM layer implement; unit tests hand in scripted ones. Each is optional: a tool whose port is missing
returns an error result saying so instead of crashing the run.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from yagent.ipc.messages import RunOutcome, SubagentsReply
from yagent.ipc.run_settings import DEFAULT_TOOL_HEARTBEAT_INTERVAL
from yagent.ipc.vocabulary import QuestionKind, TurnEndChoice

from .authorization import Authorizer, AuthRequest, YoloLevel
from .beneath import Resolution
from .browser_tools import BrowserPort
from .guard import WorkspaceGuard
from .ignored_writes import IgnoredWrites
from .mcp_tools import McpPort
from .processes import ProcessRegistry
from .read_log import ReadLog
from .result import ToolResult


@dataclass(frozen=True)
class AskRequest:
    """What `ask_user_for_help` puts to the user; the daemon's `Question` is built from it by the port."""

    kind: QuestionKind  # confirm, select or input: authorisation prompts go through the `Authorizer`
    prompt: str
    options: tuple[str, ...] = ()
    default: str | None = None


@dataclass(frozen=True)
class AskReply:
    """The user's reply: `yes`/`no` for confirm, the chosen option for select, the text for input."""

    value: str
    dismissed: bool = False  # the user closed the question without answering


@runtime_checkable
class Asker(Protocol):
    """Puts a question to the attached clients through the daemon and waits for the answer."""

    async def ask(self, request: AskRequest) -> AskReply: ...


@runtime_checkable
class Delegator(Protocol):
    """Runs `agent` on `task` as a child of this run and returns how the child ended.

    `call_id` is the parent's tool call (it links parent and child); `context` holds the facts the parent
    hands over with the task, empty for none; `replay` asks for the delegation `call_id` that was interrupted
    to be picked up where it stopped (a resumed turn), not started anew.
    """

    async def run_child(self, agent: str, task: str, call_id: str, context: str, *,
                        replay: bool = False) -> RunOutcome: ...


@runtime_checkable
class SubagentPort(Protocol):
    """The asking agent's continuable sub-agents, through the daemon. Every method raises `RemoteError` with the
    daemon's refusal (an unknown or busy sub-agent, a bound reached), which the tool hands the model as it is.

    `follow_up` continues sub-agent `subagent` with `message` and returns how that run ended; `start` begins one
    in the background (a new one on `agent`, or a follow-up to `subagent`) and returns (run, sub-agent) at once;
    `ask` reads where sub-agents stand, with `wait` once none of them works (or at `timeout` seconds);
    `started_here` is what this run started in the background (the turn's end asks), and `read(run)` is True
    the first time a run's result is handed to the model (it goes on the board once)."""

    async def follow_up(self, subagent: str, message: str, call_id: str, context: str) -> RunOutcome: ...

    async def start(self, agent: str, task: str, call_id: str, context: str, *, choice: TurnEndChoice,
                    subagent: str = "") -> tuple[str, str]: ...

    async def ask(self, subagents: list[str], *, wait: bool = False, timeout: float = 0.0,
                  cancel: bool = False) -> SubagentsReply: ...

    def started_here(self) -> dict[str, TurnEndChoice]: ...

    def read(self, run: str) -> bool: ...


@dataclass(frozen=True)
class DelegationRecord:
    """What the board kept of one delegation: `outcome` is the child's as its parent should read it (a
    deliverable stored as an artifact replaced by its summary and the way to read it back)."""

    outcome: RunOutcome
    note: str = ""  # the note's handle, "" when none was written
    artifact: str = ""  # the artifact's id, "" when the deliverable stayed inline


@runtime_checkable
class Board(Protocol):
    """The task's hand-off board (`yagent.workers.board.TaskBoard`). Lookups that find nothing raise
    `LookupError` with the message the model should read."""

    def record_delegation(self, outcome: RunOutcome, task: str) -> DelegationRecord: ...

    def delegation_task(self, task: str, refs: list[str]) -> tuple[str, str]: ...

    def read_note(self, ref: str, offset: int, limit: int) -> str: ...

    def list_notes(self) -> str: ...

    def read_artifact(self, artifact_id: str, offset: int, limit: int) -> str: ...


@runtime_checkable
class SkillShelfPort(Protocol):
    """The run's skills (`yagent.workers.skills.SkillShelf`): `use` gives a skill's text from `offset` (every skill
    listed for an empty name; `limit` None: its default page) or raises `LookupError` with what the model should
    read."""

    def use(self, name: str, offset: int = 0, limit: int | None = None) -> str: ...


@runtime_checkable
class ApprovedOperations(Protocol):
    """Carries out a call the user allowed at a prompt but the run's sandbox refuses, in a process the daemon
    starts for it (a confined worker never widens its own rules). None: no prompt of this run allowed exactly
    this call (an earlier session or project grant covered it), so there is nothing to carry out."""

    async def carry_out(self, request: AuthRequest, tool: str, args: Mapping[str, Any], call_id: str
                        ) -> ToolResult | None: ...


@runtime_checkable
class CheckpointPort(Protocol):
    """The task's git checkpoints, kept by the daemon (the worker's channel): each returns (the text the model
    reads, whether it is an error). A worker never writes `.git`: the daemon's own process does the git work."""

    async def checkpoint_create(self, label: str) -> tuple[str, bool]: ...

    async def checkpoint_list(self) -> tuple[str, bool]: ...

    async def checkpoint_rollback(self, number: int) -> tuple[str, bool]: ...

    async def checkpoint_note(self, paths: list[str]) -> tuple[str, bool]:
        """Before a write: keep the prior content of these project-relative files inside ignored directories."""
        ...


@runtime_checkable
class BlueprintPort(Protocol):
    """The repository blueprint of the run's project (`yagent.workers.blueprint.BlueprintReader`): its answer to
    `read_blueprint`, narrowed by section, module, field and state, paged by entry."""

    def read(self, *, section: str, module: str, field: str, state: str, offset: int, limit: int) -> str: ...


@runtime_checkable
class TextLLM(Protocol):
    """One plain completion, routed by tool name (`[tools.llm.<tool>]`); used by the reasoning tools."""

    async def complete_text(self, system: str, prompt: str, *, tool: str) -> str: ...


EventEmitter = Callable[[str, Mapping[str, Any]], None]
Heartbeat = Callable[[], None]


def _no_event(_type: str, _data: Mapping[str, Any]) -> None:
    return None


def _no_heartbeat() -> None:
    return None


@dataclass
class ToolContext:
    """Per-run state shared by every tool call of the run. The guard is derived from the fields."""

    project_root: Path
    run_id: str = "run"
    yolo: YoloLevel = YoloLevel.NONE
    authorizer: Authorizer | None = None
    asker: Asker | None = None
    delegator: Delegator | None = None
    llm: TextLLM | None = None
    approved: ApprovedOperations | None = None
    board: Board | None = None  # the task's notes and artifacts; None = no board (tools say so)
    skills: SkillShelfPort | None = None  # the user's skills (use_skill); None = none in this run (it says so)
    mcp: McpPort | None = None  # the project's MCP servers, through the daemon; None = no external tools
    code_index: McpPort | None = None  # the built-in code server, through the daemon; None = no code tools
    browser: BrowserPort | None = None  # the project's browser, through the daemon; None = no browser tools
    checkpoints: CheckpointPort | None = None  # the task's git checkpoints, through the daemon; None = none
    blueprint: BlueprintPort | None = None  # the repository blueprint (read_blueprint); None = it is off
    reads: ReadLog | None = None  # the project files its tools read (a Repo run's blueprint evidence); None = not kept
    emit: EventEmitter = _no_event
    heartbeat: Heartbeat = _no_heartbeat
    scratch_dir: Path | None = None  # default: a per-run directory under the system temp dir
    settings_path: Path | None = None  # the project approvals file (the daemon writes it); None: none are read
    # Session approvals earlier runs of the same task were given (the daemon keeps them: `RunSpec.session_grants`).
    session_grants: frozenset[str] = frozenset()
    processes: ProcessRegistry = field(default_factory=ProcessRegistry)
    heartbeat_interval: float = DEFAULT_TOOL_HEARTBEAT_INTERVAL  # seconds between beats of long-running tools
    resolution: Resolution | None = None  # how file tools resolve beneath the root; None: openat2 where it exists
    delegated: bool = False  # another agent delegated this run: the dispatcher refuses tools reserved to the root
    subagents: SubagentPort | None = None  # the task's sub-agents, through the daemon (root runs); None: none
    ignored_writes: IgnoredWrites | None = None  # with checkpoints: files in ignored directories named before writes
    guard: WorkspaceGuard = field(init=False)

    def __post_init__(self) -> None:
        if self.scratch_dir is None:
            self.scratch_dir = Path(tempfile.gettempdir()) / f"yagent-scratch-{self.run_id}"
        self.guard = WorkspaceGuard(
            self.project_root,
            settings_path=self.settings_path,
            session_grants=self.session_grants,
            safe_dirs=(self.scratch_dir,),
            resolution=self.resolution,
        )
        self.project_root = self.guard.root

    @property
    def scratch(self) -> Path:
        """The run's scratch directory, created on first use."""
        assert self.scratch_dir is not None
        self.scratch_dir.mkdir(parents=True, exist_ok=True)
        return self.scratch_dir

    async def authorize(self, request: AuthRequest | None) -> str | None:
        """None when the call may proceed; otherwise the refusal the model should read."""
        return await self.guard.authorize(request, yolo=self.yolo, authorizer=self.authorizer)
