"""Tool declarations: the one place a tool's contract and capabilities are stated.

Every fact the runtime needs about a tool (may it run in parallel, does it need authorisation, which
arguments are paths, how hard may its output be cut) is read from its `ToolSpec`; nothing keys off
tool names.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .context import ToolContext
    from .result import ToolResult
    from .surface import Surface


class Effect(enum.Flag):
    """What a tool can do to the world. Profiles grant and deny these, never tool names."""

    NONE = 0
    FS_READ = enum.auto()  # reads files or directories
    FS_WRITE = enum.auto()  # creates, changes, moves or deletes files
    SHELL = enum.auto()  # runs arbitrary commands
    DELEGATE = enum.auto()  # starts another agent run
    INTERACT = enum.auto()  # asks the attached user and waits for the answer
    REFLECT = enum.auto()  # records the model's own reasoning; no effect beyond the transcript
    LLM = enum.auto()  # makes a side call to a language model (tokens and time)
    DRAFT = enum.auto()  # drafts work product (design, code) for an agent that will apply it
    CONTROL = enum.auto()  # steers the run itself: finish it, load a deferred tool
    EXTERNAL = enum.auto()  # calls a third-party tool server (MCP); only dynamic specs carry it
    CODE_INDEX = enum.auto()  # asks the project's code index (the built-in code server, through the daemon)
    ORCHESTRATE = enum.auto()  # manages the task's sub-agents: starts in the background, follow-ups, waits
    BROWSER = enum.auto()  # drives the project's browser (through the daemon): pages, forms, scripts in pages
    CHECKPOINT = enum.auto()  # makes, lists or restores git checkpoints of the project (through the daemon)
    BLUEPRINT = enum.auto()  # reads the repository blueprint (derived from the project, and its persisted prose)

    def names(self) -> list[str]:
        """The member names set in this flag, in declaration order."""
        return [m.name for m in self if m.name]


class Frequency(enum.Enum):
    """HOT tools are always offered; COLD ones sit in a deferred catalogue until `load_tool`."""

    HOT = "hot"
    COLD = "cold"


class AuthPolicy(enum.Enum):
    """When a call must be authorised by the user (see `WorkspaceGuard.authorize`)."""

    NEVER = "never"  # no prompt, ever
    OUTSIDE = "outside"  # only when a path it touches lies outside the project root
    DANGEROUS = "dangerous"  # outside paths, and also in-workspace calls unless the run is --yolo


class ResultPaths(enum.Enum):
    """How to recover the file paths a result shows from its text (context compression reads this)."""

    NONE = "none"
    JSON = "json"  # content is a JSON object; string values under path-like keys
    RG = "rg"  # lines of the form `path:line:text`
    BARE = "bare"  # every line not starting with `[` is a path (directories end with `/`)
    HEADER = "header"  # first line is `File: <path>` optionally followed by two spaces and `(`


class Truncation(enum.Enum):
    """How much of a result the model sees before it is cut (see `truncate_for_model`)."""

    NEVER = "never"  # short control results: cutting them would lose the answer
    LATE = "late"  # file contents, diffs, delegation reports: cut last
    EARLY = "early"  # listings, search hits, command output: cheap to re-query


Executor = Callable[["Invocation"], Awaitable["ToolResult"]]


@dataclass(frozen=True, kw_only=True)
class ToolSpec:
    """A tool's full declaration. Registered next to its executor, immutable afterwards."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    effects: Effect
    executor: Executor
    frequency: Frequency = Frequency.HOT
    mutates: bool = False
    serial: bool = False
    # None means "not decided": a mutating tool must decide (validation rule `auth-undecided`).
    auth: AuthPolicy | None = None
    # Arguments holding paths: resolved by the guard before the executor runs; absent ones mean the root.
    path_params: tuple[str, ...] = ()
    # Arguments holding shell command lines; their path tokens resolve against the `cwd` path param if any.
    command_params: tuple[str, ...] = ()
    # Name of a boolean argument by which the model marks one call dangerous (run_bash `is_dangerous`).
    danger_flag: str | None = None
    truncation: Truncation = Truncation.LATE
    result_paths: ResultPaths = ResultPaths.NONE
    # Agents allowed to hold this delegation tool; only delegation tools set it.
    audience: frozenset[str] = frozenset()
    # The agent a delegation tool starts (`repo`, `coding`, `custom:<name>`).
    delegate_target: str | None = None
    # One line for the deferred catalogue; defaults to the description's first sentence.
    brief: str = ""
    # Appended to the truncation marker so the model knows how to see the rest.
    page_hint: str = "narrow the request to see the rest"
    # Reserved to a run no other agent delegated (the one that talks to the user): never on a delegated run's
    # surface, and refused by the dispatcher if a delegated run calls it anyway — two independent lines.
    root_only: bool = False

    @property
    def is_read_only(self) -> bool:
        """No observable side effect and no ordering need: may run in parallel with its peers."""
        return not self.mutates and not self.serial

    @property
    def is_serial(self) -> bool:
        """Must run alone, in call order."""
        return not self.is_read_only

    @property
    def needs_auth(self) -> bool:
        """Some calls of this tool can require the user's authorisation."""
        return self.auth is not None and self.auth is not AuthPolicy.NEVER

    @property
    def is_cold(self) -> bool:
        return self.frequency is Frequency.COLD

    @property
    def is_interactive(self) -> bool:
        return Effect.INTERACT in self.effects

    @property
    def is_delegation(self) -> bool:
        return Effect.DELEGATE in self.effects

    @property
    def starts_agents(self) -> bool:
        """A delegation, or a tool that manages sub-agents: what the Director's reminders count as delegating."""
        return bool(self.effects & (Effect.DELEGATE | Effect.ORCHESTRATE))

    def catalogue_line(self) -> str:
        """One line naming the tool for the deferred catalogue."""
        text = self.brief or self.description.strip().splitlines()[0]
        return f"{self.name}: {text.split('. ', 1)[0].rstrip('.')}."

    def definition(self) -> dict[str, Any]:
        """The provider-neutral tool definition the agent loop converts for its LLM engine."""
        return {"name": self.name, "description": self.description, "parameters": _deep_copy(self.parameters)}


@dataclass(frozen=True)
class Invocation:
    """One validated call handed to an executor: arguments, resolved paths and the run's context."""

    spec: ToolSpec
    args: Mapping[str, Any]
    call_id: str
    ctx: ToolContext
    surface: Surface | None = None
    paths: Mapping[str, Path] = field(default_factory=dict)

    def path(self, param: str) -> Path:
        """The guard-resolved path given for `param` (symlinks and `..` already resolved)."""
        return self.paths[param]

    def display(self, path: Path) -> str:
        """How results name a path: relative to the project root when inside it."""
        return self.ctx.guard.display(path)


def _deep_copy(value: Any) -> Any:
    # Definitions leave the package; consumers must not be able to edit the registered schema.
    kind = type(value)  # the plain JSON types first: an ABC check per node costs several times the copy
    if kind is str or kind is bool or kind is int or kind is float or value is None:
        return value
    if kind is dict:
        return {k: _deep_copy(v) for k, v in value.items()}
    if kind is list:
        return [_deep_copy(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _deep_copy(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_deep_copy(v) for v in value]
    return value
