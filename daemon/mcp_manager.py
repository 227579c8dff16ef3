"""The MCP servers the daemon owns: one instance per (project, server), shared by every run of the project.

A project's servers start when a turn of it starts (never blocking it: spawn at once, initialize and list in
the background) and stop `[mcp] idle_ttl` after its last task went idle; a server disabled or removed from the
configuration stops at the next turn, one whose configuration changed starts again with the new one. A
project's `.mcp.json` servers start only once the user approved them (`yagent mcp approve`), as the file has
them: an approval names the server's fingerprint, so an edited entry needs approving again.

`serve` is the owner of every server's `McpServer.run` (one task group); `close` stops them all, including one
still starting, and the daemon's start kills what a dead predecessor left (`mcp_leftovers`). Every process is
recorded in state.db before anything is asked of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sqlite3
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from yagent.ipc.codeintel_settings import CODE_SERVER_SOURCE
from yagent.ipc.mcp_settings import McpServerConfig, McpSettings, read_project_servers
from yagent.ipc.mcp_status import render_status_lines
from yagent.ipc.messages import McpServerStatus, McpTool
from yagent.ipc.vocabulary import McpState

from .mcp_errors import McpUnavailable
from .registry import Registry
from .schedule import Scheduler, Timer

if TYPE_CHECKING:  # the SDK behind them loads with the first server (`_start`), not with the daemon
    from .mcp_process import StdioServer
    from .mcp_server import McpServer, ServerHooks

__all__ = ["CLOSE_GRACE", "McpManager", "McpUnavailable", "ProjectTools"]

log = logging.getLogger(__name__)

CLOSE_GRACE = 3.0  # at daemon exit: what servers get to end before their groups are killed outright
STARTING_CALL_WAIT = 60.0  # a call to a server still starting waits this long at most for it to be up


@dataclass(slots=True)
class ProjectTools:
    generation: int
    tools: list[McpTool]
    servers: list[McpServerStatus]


@dataclass(slots=True)
class _Project:
    id: str
    root: Path
    in_use: bool = False
    idle_timer: Timer | None = None
    generation: int = 0
    unapproved: list[McpServerConfig] = field(default_factory=list)  # .mcp.json servers waiting for approval
    problems: list[str] = field(default_factory=list)  # what could not be read of its .mcp.json


class McpManager:
    def __init__(self, registry: Registry, scheduler: Scheduler, settings: Callable[[], McpSettings], *,
                 environ: Mapping[str, str] | None = None, clock: Callable[[], float] = time.monotonic,
                 on_tools_changed: Callable[[str, int], None] | None = None,
                 builtin: Callable[[str, Path], list[McpServerConfig]] | None = None) -> None:
        self._registry = registry
        # The servers yagent itself runs for a project (the code server): started like any, whatever [mcp] says;
        # their tools reach runs as static tools, never in a listing (`tools_for`).
        self._builtin = builtin
        self._scheduler = scheduler
        self._settings = settings
        self._environ = os.environ if environ is None else environ
        self._clock = clock
        self.on_tools_changed = on_tools_changed  # (project id, generation): the daemon tells the project's runs
        self.servers: dict[tuple[str, str], McpServer] = {}
        self._alive: dict[asyncio.Task[None], McpServer] = {}  # every server's life, stopping ones included
        self._projects: dict[str, _Project] = {}
        self._group: asyncio.TaskGroup | None = None
        self._closed = asyncio.Event()
        self._hooks: ServerHooks | None = None  # made with the first server: it brings the SDK in

    # -- the owner of every server's life -------------------------------------------------------------

    async def serve(self) -> None:
        """Hold the task group every server runs in; after `close`, wait to be cancelled with the daemon's other
        loops (a loop of the daemon never returns on its own)."""
        async with asyncio.TaskGroup() as group:
            self._group = group
            await self._closed.wait()
        self._group = None
        await asyncio.get_running_loop().create_future()

    async def close(self) -> None:
        """Stop every server (the daemon is stopping): asked to end, then killed outright after CLOSE_GRACE."""
        for server in self._alive.values():
            server.stop("yagentd is stopping")
        tasks = [t for t in self._alive if not t.done()]
        if tasks:
            _done, pending = await asyncio.wait(tasks, timeout=CLOSE_GRACE)
            for task in pending:
                task.cancel()  # its connection's finally kills the group without waiting
            if pending:
                await asyncio.wait(pending, timeout=CLOSE_GRACE)
        for server in list(self._alive.values()):
            server.kill_now()
        for project in self._projects.values():
            if project.idle_timer is not None:
                project.idle_timer.cancel()
        self._closed.set()

    # -- projects -------------------------------------------------------------------------------------

    def project_in_use(self, project_id: str, root: str) -> None:
        """A turn of the project is starting: its servers run (started now if they were not), no idle TTL."""
        project = self._project(project_id, root)
        project.in_use = True
        if project.idle_timer is not None:
            project.idle_timer.cancel()
            project.idle_timer = None
        self._reconcile(project)

    def project_idle(self, project_id: str) -> None:
        """The project's last task went idle: its servers stop after `[mcp] idle_ttl` unless a turn comes."""
        project = self._projects.get(project_id)
        if project is None or not project.in_use:
            return
        project.in_use = False
        if project.idle_timer is not None:
            project.idle_timer.cancel()
        ttl = self._settings().idle_ttl
        project.idle_timer = self._scheduler.after(ttl, lambda: self._idle_expired(project), f"mcp-ttl-{project_id}")

    def _idle_expired(self, project: _Project) -> None:
        project.idle_timer = None
        if project.in_use:
            return
        stopped = [s.name for key, s in self.servers.items() if key[0] == project.id]
        for name in stopped:
            self._stop(project.id, name, "stopped: its project was idle past [mcp] idle_ttl; the next turn starts it")
        if stopped:
            log.info("stopped MCP servers %s of %s: the project was idle past [mcp] idle_ttl", ", ".join(stopped),
                     project.root)

    def _project(self, project_id: str, root: str | Path) -> _Project:
        project = self._projects.get(project_id)
        if project is None:
            project = _Project(project_id, Path(root))
            self._projects[project_id] = project
        return project

    def wanted(self, project: _Project) -> list[McpServerConfig]:
        """The servers the project runs now: the built-in ones, config.toml's for it and its approved .mcp.json
        ones."""
        settings = self._settings()
        builtin: list[McpServerConfig] = []
        project.unapproved, project.problems = [], []
        if self._builtin is not None:
            try:
                builtin = self._builtin(project.id, project.root)
            except OSError as exc:
                project.problems.append(f"the built-in code server cannot start: {exc}")
        if not settings.enabled:
            return builtin
        servers = builtin + settings.for_project(str(project.root))
        if settings.project_files:
            declared, project.problems = read_project_servers(project.root, settings)
            taken = {s.name for s in servers}
            try:
                approved = self._registry.mcp_approvals(project.id)
            except sqlite3.Error as exc:
                project.problems.append(f"cannot read which .mcp.json servers were approved ({exc})")
                approved = {}
            for server in declared:
                if server.name in taken:
                    project.problems.append(f"{project.root}/.mcp.json: server {server.name!r} is also in "
                                            "config.toml, which wins")
                elif approved.get(server.name) == server.fingerprint():
                    servers.append(server)
                else:
                    project.unapproved.append(server)
        return servers

    def _reconcile(self, project: _Project) -> None:
        wanted = {s.name: s for s in self.wanted(project)}
        for key, server in list(self.servers.items()):
            if key[0] != project.id:
                continue
            config = wanted.get(key[1])
            if config is None or not config.enabled:
                self._stop(project.id, key[1], "disabled in the configuration" if config else
                           "removed from the configuration")
            elif config != server.config:
                log.info("MCP server %s of %s: its configuration changed; starting it again", key[1], project.root)
                self._stop(project.id, key[1], "its configuration changed")
        for name, config in wanted.items():
            if config.enabled and (project.id, name) not in self.servers:
                self._start(project, config)

    def _start(self, project: _Project, config: McpServerConfig) -> None:
        if self._group is None:
            log.error("MCP server %s of %s not started: the MCP manager is not serving", config.name, project.root)
            return
        from .mcp_server import McpServer, ServerHooks

        if self._hooks is None:
            self._hooks = ServerHooks(started=self._started, gone=self._gone, tools_changed=self._tools_changed)
        server = McpServer(project.id, project.root, config, environ=self._environ, hooks=self._hooks,
                           marker=uuid.uuid4().hex, clock=self._clock)
        key = (project.id, config.name)
        self.servers[key] = server
        task = self._group.create_task(self._run(key, server), name=f"mcp:{config.name}")
        self._alive[task] = server
        task.add_done_callback(self._alive.pop)

    async def _run(self, key: tuple[str, str], server: McpServer) -> None:
        try:
            await server.run()
        finally:
            if self.servers.get(key) is server:
                del self.servers[key]
                if server.tools:
                    self._tools_changed(server)

    def _stop(self, project_id: str, name: str, why: str) -> None:
        server = self.servers.get((project_id, name))
        if server is not None:
            server.stop(why)
            # Gone from the table at once: a new instance may start while this one ends.
            del self.servers[(project_id, name)]
            if server.tools:
                self._bump(project_id)

    # -- what servers tell ----------------------------------------------------------------------------

    def _started(self, server: McpServer, proc: StdioServer) -> None:
        try:
            self._registry.mcp_server_started(server.project_id, server.name, proc.pid, proc.started_at,
                                              server.marker)
        except sqlite3.Error as exc:  # the record is retried by the registry's deferred writes
            log.error("cannot record MCP server %s (pid %d) in %s: %s", server.name, proc.pid, self._registry.path,
                      exc)

    def _gone(self, server: McpServer, proc: StdioServer) -> None:
        pid = proc.pid
        if pid:
            try:
                self._registry.mcp_server_gone(server.project_id, server.name, pid)
            except sqlite3.Error as exc:
                log.error("cannot record the end of MCP server %s in %s: %s", server.name, self._registry.path, exc)
        lines = render_status_lines([server.status()])
        log.info("MCP %s", lines[0] if lines else server.name)

    def _tools_changed(self, server: McpServer) -> None:
        if self.servers.get((server.project_id, server.name)) is server or not server.tools:
            self._bump(server.project_id)

    def _bump(self, project_id: str) -> None:
        project = self._projects.get(project_id)
        if project is None:
            return
        project.generation += 1
        if self.on_tools_changed is not None:
            self.on_tools_changed(project_id, project.generation)

    # -- what runs ask --------------------------------------------------------------------------------

    def generation(self, project_id: str) -> int:
        project = self._projects.get(project_id)
        return project.generation if project is not None else 0

    async def tools_for(self, project_id: str, wait_for: list[str]) -> ProjectTools:
        """The ready servers' tools of the project; first waits for its required servers (and `wait_for`) to
        settle, each at most its startup_timeout: a required one that does not come up is `McpUnavailable`."""
        mine = {key[1]: s for key, s in self.servers.items() if key[0] == project_id}
        waited = [s for s in mine.values() if s.config.required or s.name in wait_for]
        for server in waited:
            if not server.settled.is_set():
                try:
                    async with asyncio.timeout(server.config.startup_timeout):
                        await server.settled.wait()
                except TimeoutError:
                    pass
        failed = [s for s in waited if s.config.required and s.state is not McpState.READY]
        if failed:
            raise McpUnavailable("required MCP server(s) did not come up: " + "; ".join(
                render_status_lines([s.status() for s in failed], project_names=False)))
        listed = [s for s in mine.values() if s.config.source != CODE_SERVER_SOURCE]  # built-in tools are static
        tools = [t for s in listed if s.state is McpState.READY for t in s.tools]
        statuses = [s.status() for s in listed]
        return ProjectTools(self.generation(project_id), tools, statuses)

    async def call(self, project_id: str, server: str, tool: str, arguments: dict, *,
                   timeout: float) -> tuple[str, bool]:
        instance = self.servers.get((project_id, server))
        if instance is None:
            raise McpUnavailable(f"this project has no MCP server {server!r} running (`yagent mcp` lists them)")
        if not instance.settled.is_set():
            # A built-in server's tools are static: a run may call one before the server is up. Wait for it to
            # settle, within its startup budget and the caller's deadline.
            wait = min(instance.config.startup_timeout, timeout if timeout > 0 else STARTING_CALL_WAIT,
                       STARTING_CALL_WAIT)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await instance.settled.wait()
        return await instance.call(tool, arguments, timeout=timeout)

    # -- what the user asks ---------------------------------------------------------------------------

    def statuses(self, project_id: str = "", root: str = "") -> tuple[list[McpServerStatus], list[str]]:
        """Every live server of every project; for the project `root` too what it would start (configured but
        not running, disabled, waiting for approval) and the problems of its .mcp.json."""
        found = [s.status() for s in self.servers.values()]
        problems: list[str] = []
        if root:
            project = self._projects.get(project_id) or _Project(project_id, Path(root))
            running = {key[1] for key in self.servers if key[0] == project_id}
            settings = self._settings()
            for config in self.wanted(project):
                if config.name not in running:
                    found.append(self._idle_status(project, config))
            for config in settings.for_project(root) if settings.enabled else []:
                if not config.enabled:
                    found.append(self._idle_status(project, config))
            for config in project.unapproved:
                found.append(McpServerStatus(
                    project=root, server=config.name, state=McpState.DISABLED, source=config.source,
                    transport=config.transport, target=config.target(),
                    last_error="declared in the project's .mcp.json, not approved",
                    fix=f"check what it runs, then `yagent mcp approve {config.name}` in the project"))
            problems = list(project.problems)
            if not settings.enabled:
                problems.append("[mcp] enabled = false: no MCP server starts")
        return found, problems

    def _idle_status(self, project: _Project, config: McpServerConfig) -> McpServerStatus:
        disabled = not config.enabled
        return McpServerStatus(
            project=str(project.root), server=config.name,
            state=McpState.DISABLED if disabled else McpState.OFFLINE, source=config.source,
            transport=config.transport, target=config.target(), required=config.required,
            fix="enabled = false in its configuration" if disabled else "not running: the project's next turn starts "
                f"it (or `yagent mcp restart {config.name}`)")

    def restart(self, name: str, project_id: str = "", root: str = "") -> list[str]:
        """Restart `name` where it runs (in `project_id` only, when given); a configured server of that project
        that is not running is started. Returns the project roots it was restarted in."""
        done = []
        for key, server in list(self.servers.items()):
            if key[1] == name and (not project_id or key[0] == project_id):
                server.restart()
                done.append(str(server.project_root))
        if not done and project_id and root:
            project = self._project(project_id, root)
            config = next((c for c in self.wanted(project) if c.name == name and c.enabled), None)
            if config is not None:
                self._start(project, config)
                done.append(root)
                if not project.in_use and project.idle_timer is None:
                    project.in_use = True
                    self.project_idle(project_id)  # nothing uses it: it stops after the TTL like any
        return done

    def approve(self, project_id: str, root: str, names: list[str], approve: bool) -> list[str]:
        """Approve (or withdraw) the project's .mcp.json servers `names` (all when empty) as the file has them
        now; returns the names changed. An approved server starts at once if the project is in use."""
        project = self._project(project_id, root)
        declared, project.problems = read_project_servers(project.root, self._settings())
        chosen = [s for s in declared if not names or s.name in names]
        unknown = sorted(set(names) - {s.name for s in declared})
        if unknown:
            raise KeyError(", ".join(unknown))
        for server in chosen:
            self._registry.set_mcp_approval(project_id, server.name, server.fingerprint() if approve else None)
        if project.in_use:
            self._reconcile(project)
        elif not approve:
            for server in chosen:
                self._stop(project_id, server.name, "its approval was withdrawn")
        return [s.name for s in chosen]
