"""Control commands, one module each: the request's validation and handling sit together.

A handler is `async def handler(daemon, msg) -> Message` registered with `@command(RequestType)` (with
`in_background=True` when it waits for processes: the control loop goes on meanwhile, the reply comes later);
it raises `CommandError(code, message)` for anything the user must fix. Adding a command means adding
its message to `yagent.ipc.messages` and one module here. `dispatch` turns every failure into an error
reply: no request can stop the daemon. It answers a peer only once its `hello` carried the client token
(`hello.py` checks it; `dispatch` marks the peer): everything else gets `unauthenticated`, saying what to do.
"""

from __future__ import annotations

import importlib
import logging
import pkgutil
import sqlite3
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from yagent.ipc.config import Settings
from yagent.ipc.messages import ErrorReply, Hello, HelloReply
from yagent.ipc.records import Message
from yagent.ipc.runtime_dir import RuntimePaths
from yagent.ipc.vocabulary import ErrorCode

from ..admission import WorkerSlots
from ..browser_manager import BrowserManager
from ..checkpoints import CheckpointService
from ..control_peers import ControlPeers
from ..event_hub import EventHub
from ..launcher import Launcher
from ..leases import LeaseManager
from ..mcp_manager import McpManager
from ..refused_peers import RefusedPeers
from ..registry import Registry, TaskRow
from ..registry_errors import is_trouble, running_failure
from ..spending import DailySpend
from ..turn import TurnController
from ..turn_keys import TurnKeySource

__all__ = ["CommandError", "DaemonView", "answered_in_background", "command", "dispatch", "resolve_task"]

log = logging.getLogger(__name__)


class DaemonView(Protocol):
    """What a command may use of the daemon (`arbiter.Daemon` is one): the arbiter imports the commands,
    never the reverse."""

    registry: Registry
    hub: EventHub | None
    tasks: Mapping[str, TurnController]  # tasks with anything alive
    slots: WorkerSlots
    leases: LeaseManager
    paths: RuntimePaths
    home: Path
    version: str
    started_at: float
    shutting_down: bool
    client_token: str  # what a hello must carry (`yagent.ipc.client_token`)
    peers: ControlPeers  # which control peers have authenticated
    refused_clients: RefusedPeers
    launcher: Launcher  # for the short processes a command starts (resume inspections)
    mcp: McpManager  # the MCP servers of every project
    browser: BrowserManager  # the browsers of every project
    turn_keys: TurnKeySource  # a turn's keys from its caller, and the zero-config provider

    @property
    def settings(self) -> Settings: ...

    @property
    def config_path(self) -> Path: ...  # the configuration file the daemon reads

    @property
    def runs_started(self) -> int: ...

    @property
    def checkpoints(self) -> CheckpointService | None: ...  # git checkpoints (None before the daemon serves)

    @property
    def landlock_abi(self) -> int: ...  # as probed at start (0: Landlock missing)

    def refresh_settings(self) -> None: ...

    @property
    def spend(self) -> DailySpend: ...

    def turn_for(self, row: TaskRow) -> TurnController: ...

    def request_shutdown(self) -> None: ...


Handler = Callable[[DaemonView, Any], Awaitable[Message]]
_HANDLERS: dict[type[Message], Handler] = {}
_IN_BACKGROUND: set[type[Message]] = set()


class CommandError(Exception):
    """Raised by a command handler; becomes an ErrorReply with this code and message."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def command(kind: type[Message], *, in_background: bool = False) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        _HANDLERS[kind] = fn
        if in_background:
            _IN_BACKGROUND.add(kind)
        return fn

    return register


def answered_in_background(msg: Message) -> bool:
    """Whether `msg`'s handler waits for other processes, so the control loop must not wait for its reply."""
    return type(msg) in _IN_BACKGROUND


def resolve_task(daemon: DaemonView, ref: str) -> TaskRow:
    """A task id or a unique prefix of one."""
    ref = ref.strip()
    if not ref:
        raise CommandError(ErrorCode.BAD_REQUEST, "no task given; `yagent ps` lists tasks")
    try:
        return _registered_task(daemon, ref)
    except sqlite3.DatabaseError:
        # The registry cannot answer: a task this daemon is running is known without it (its questions
        # can be answered, its events replayed, it can be cancelled).
        live = [task for task_id, task in daemon.tasks.items() if task_id.startswith(ref)]
        if len(live) != 1:
            raise
        return live[0].row


def _registered_task(daemon: DaemonView, ref: str) -> TaskRow:
    row = daemon.registry.get_task(ref)
    if row is not None:
        return row
    matches = daemon.registry.find_tasks_by_prefix(ref)
    if not matches:
        raise CommandError(ErrorCode.UNKNOWN_TASK, f"no task {ref!r}; `yagent ps` lists tasks")
    if len(matches) > 1:
        raise CommandError(ErrorCode.AMBIGUOUS_TASK, f"{ref!r} matches several tasks ({', '.join(matches[:5])}); "
                                                     "type more of the id")
    row = daemon.registry.get_task(matches[0])
    assert row is not None
    return row


async def dispatch(daemon: DaemonView, msg: Message, peer: bytes) -> Message:
    """The reply to one control request from `peer`: the handler's, or an error reply saying what went wrong."""
    request_id = getattr(msg, "id", 0)
    if type(msg) is not Hello and not daemon.peers.authenticated(peer):
        daemon.refused_clients.first(peer, f"a {msg.kind} request before a hello with the client token")
        return ErrorReply(id=request_id, code=ErrorCode.UNAUTHENTICATED, message=(
            f"yagentd answers a connection only after its hello carries the client token from "
            f"{daemon.paths.token}: connect through `yagent` (or `yagent.ipc.DaemonClient`), which reads that file "
            "and says hello; a process that cannot read it (an agent's confined shell) cannot drive yagentd"))
    handler = _HANDLERS.get(type(msg))
    if handler is None:
        return ErrorReply(id=request_id, code=ErrorCode.NOT_A_REQUEST, message=f"{msg.kind!r} is not a control request")
    reply = await _handled(daemon, handler, msg, request_id)
    if isinstance(reply, ErrorReply) and reply.code == ErrorCode.UNAUTHENTICATED:  # a hello without the token
        daemon.refused_clients.first(peer, f"a hello with {'a wrong' if getattr(msg, 'token', '') else 'no'} token")
    elif isinstance(reply, HelloReply) and not daemon.peers.authenticate(peer):
        daemon.refused_clients.first(peer, "a hello from a connection whose identity can be guessed")
        return ErrorReply(id=request_id, code=ErrorCode.UNAUTHENTICATED, message=(
            f"this connection's ZeroMQ identity ({len(peer)} bytes) could be guessed, so another process could "
            "take its place once it leaves; connect with a random identity of at least 16 bytes, as "
            "`yagent.ipc.DaemonClient` does"))
    return reply


async def _handled(daemon: DaemonView, handler: Handler, msg: Message, request_id: int) -> Message:
    try:
        return await handler(daemon, msg)
    except CommandError as exc:
        return ErrorReply(id=request_id, code=exc.code, message=str(exc))
    except sqlite3.Error as exc:
        if not is_trouble(exc):  # yagent's own statement is wrong: a bug, not the file
            log.exception("control request %s failed", msg.kind)
            return ErrorReply(id=request_id, code=ErrorCode.INTERNAL,
                              message=f"yagentd failed to handle {msg.kind}: {exc}; see the daemon log")
        # Damaged, locked or full: this request fails with what to do; the daemon serves on.
        advice = running_failure(daemon.registry.path, exc)
        log.error("control request %s failed: %s", msg.kind, advice)
        return ErrorReply(id=request_id, code=ErrorCode.REGISTRY_UNAVAILABLE, message=advice)
    except Exception as exc:
        log.exception("control request %s failed", msg.kind)
        return ErrorReply(id=request_id, code=ErrorCode.INTERNAL,
                          message=f"yagentd failed to handle {msg.kind}: {exc}; see the daemon log")


for _mod in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_mod.name}")
