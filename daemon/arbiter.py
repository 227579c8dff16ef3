"""The daemon loop: sockets in, runs out.

`Daemon` owns the three sockets, the clock, the timers and the order of things: it reads control requests
and hands them to `commands.dispatch`, reads worker frames and hands each to its run's `RunSupervisor`,
and starts and stops everything in one task group — a socket loop that dies ends the daemon (exit 1, no
more watchdog pings) instead of leaving a process that looks alive. A task's turns belong to its
`TurnController`; one run's process and requests to its `RunSupervisor`. Everything runs on one asyncio
loop; blocking work (scanning processes to kill a tree) goes to a thread and comes back.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sqlite3
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import zmq
import zmq.asyncio

from yagent.ipc.client_token import new_client_token, write_client_token
from yagent.ipc.config import ConfigError, Settings
from yagent.ipc.config_location import ConfigLocation
from yagent.ipc.confinement import landlock_abi, user_namespaces
from yagent.ipc.errors import MalformedMessage, MessageTooLarge
from yagent.ipc.mcp_settings import McpServerConfig
from yagent.ipc.messages import ErrorReply, McpToolsChanged, Ping
from yagent.ipc.records import Message, decode, encode
from yagent.ipc.runtime_dir import RuntimePaths
from yagent.ipc.sockets import bind_publisher, bind_router
from yagent.ipc.state_retention import prune_boards
from yagent.ipc.vocabulary import ErrorCode, StopReason, TaskState

from . import commands
from .admission import WorkerSlots
from .browser_manager import BrowserManager
from .checkpoints import CheckpointService
from .codeintel_server import code_server_config
from .control_peers import CONTROL_HWM, ControlPeers, PeerLimits
from .event_hub import EventHub
from .heap_trim import HeapTrim
from .launcher import Launcher
from .leases import LeaseManager
from .log_files import reopen_log_files
from .mcp_leftovers import kill_leftover_servers
from .mcp_manager import McpManager
from .recovery import kill_leftover_workers, mark_and_report_interrupted
from .refused_peers import RefusedPeers
from .registry import Registry, TaskRow
from .run_confinement import confinement_status
from .run_services import RunServices
from .run_table import RunTable
from .runtime_dir_watch import ControlSocketWatch
from .schedule import Scheduler, Timer
from .sd_notify import SystemdNotifier
from .settings_source import SettingsSource
from .spending import DailySpend, start_of_day
from .subscriber_auth import ZAP_DOMAIN, SubscriberAuth
from .task_scope import TaskScope
from .turn import RESUMABLE, TurnController
from .turn_keys import TurnKeySource
from .worker_gate import WorkerGate

__all__ = ["Daemon", "LoopEnded"]

log = logging.getLogger(__name__)

RUNTIME_DIR_CHECK = 1.0  # seconds between checks that control.sock is still ours, where inotify cannot say
RUNTIME_DIR_BACKSTOP = 60.0  # the same where it can: a renamed parent directory is noticed only by looking
EVENT_LOG_PRUNE_INTERVAL = 3600.0  # seconds between passes deleting event logs past their retention
WARM_TEND_INTERVAL = 30.0  # seconds between looks for warm workers no run has wanted for a while
# A task in these states may still be resumed (`continue`; a failed one when its root worker died) and need
# its board.
_MAY_RESUME = RESUMABLE | {TaskState.PAUSED, TaskState.FAILED}
STATUS_INTERVAL = 5.0  # seconds between status lines for systemd
SHUTDOWN_SLACK = 2.0  # seconds beyond two stop graces that runs get to exit at shutdown
_PING = Ping()  # one instance: a ping carries nothing


class LoopEnded(Exception):
    """A loop the daemon needs stopped while the daemon was not stopping."""


class Daemon:
    def __init__(
        self,
        settings: Settings,
        paths: RuntimePaths,
        home: Path,
        launcher: Launcher,
        *,
        clock: Callable[[], float] = time.monotonic,
        notifier: SystemdNotifier | None = None,
        version: str = "0",
        peer_limits: PeerLimits | None = None,
        landlock_probe: Callable[[], int] = landlock_abi,
        userns_probe: Callable[[], bool] = user_namespaces,
        config: ConfigLocation | None = None,
    ) -> None:
        self.config = SettingsSource(home, settings, config)
        self.paths = paths
        self.home = home
        self.launcher = launcher
        self.turn_keys = TurnKeySource()
        self.clock = clock
        self.notifier = notifier or SystemdNotifier()
        self.version = version
        self.started_at = time.time()
        self.registry = Registry(home / "state.db")
        self.leases = LeaseManager(settings.max_in_flight_requests)
        self.slots = WorkerSlots(settings.max_workers, self._all_live_runs_blocked)
        self.scheduler = Scheduler()
        self.scope = TaskScope("daemon")
        self.tasks: dict[str, TurnController] = {}  # tasks with anything alive, by id
        self.runs = RunTable()
        self.refused_clients = RefusedPeers("control.sock", clock)  # peers that showed no client token
        self.client_token = new_client_token()  # a new one at every start, written before control.sock is bound
        self.shutting_down = False
        self.exit_code = 0  # what `yagentd` exits with after `serve` returns
        self.hub: EventHub | None = None
        self.services: RunServices | None = None
        self.mcp = McpManager(self.registry, self.scheduler, lambda: self.settings.mcp,
                              on_tools_changed=self._mcp_tools_changed, builtin=self._builtin_servers)
        self.browser = BrowserManager(self.registry, self.scheduler, lambda: self.settings.browser, home)
        self._stop = asyncio.Event()
        self._shutdown_done = False
        self._loops_done = False  # set once the loops are meant to end
        self._control_watch: ControlSocketWatch | None = None
        self._registry_retry: Timer | None = None
        self._board_prune: asyncio.Task[None] | None = None
        self._checkpoint_prune: asyncio.Task[None] | None = None
        self._peer_limits = peer_limits
        self._landlock_probe = landlock_probe  # a seam: a test hands in a kernel without Landlock
        self._userns_probe = userns_probe  # a seam: a system without unprivileged user namespaces

    @property
    def settings(self) -> Settings:
        return self.config.current

    def _builtin_servers(self, project_id: str, root: Path) -> list[McpServerConfig]:
        """The MCP servers yagent runs itself for a project: the code server, unless `[codeseek]` turned it off."""
        config = code_server_config(self.settings, project_id=project_id, root=root, home=self.home,
                                    runtime_dir=self.paths.root, abi=self.landlock_abi, environ=os.environ)
        return [config] if config is not None else []

    @property
    def spend(self) -> DailySpend:
        return self.services.spend if self.services else DailySpend()

    @property
    def config_path(self) -> Path:
        return self.config.path

    @property
    def landlock_abi(self) -> int:
        return self.services.landlock_abi if self.services else 0

    @property
    def checkpoints(self) -> CheckpointService | None:
        return self.services.checkpoints if self.services else None

    @property
    def runs_started(self) -> int:
        return self.services.runs_started if self.services else 0

    def _providers_ahead(self) -> tuple[tuple[str, str], ...]:
        """The configured LLM providers' (api_format, api_base_url): a warm worker parses their addresses ahead."""
        providers = self.settings.run_settings.llm.providers.values()
        return tuple(dict.fromkeys((p.api_format, p.api_base_url) for p in providers))

    def refresh_settings(self) -> None:
        """Re-read config.toml if it changed (raises `ConfigError`, changing nothing, when it is broken)."""
        if not self.config.refresh():
            return
        self.leases.set_limit(self.settings.max_in_flight_requests)
        self.slots.set_limit(self.settings.max_workers)
        self.launcher.keep_warm(self.settings.warm_workers, self._providers_ahead())
        for task in self.tasks.values():
            task.rearm()

    # -- tasks ----------------------------------------------------------------------------------------

    def turn_for(self, row: TaskRow) -> TurnController:
        """The task's controller: the live one, or a new one for a task with nothing alive."""
        assert self.services is not None
        task = self.tasks.get(row.id)
        if task is None:
            task = TurnController(self.services, row, self.runs, self._forget_task)
            self.tasks[row.id] = task
        self.mcp.project_in_use(row.project_id, row.project_path)  # its MCP servers start now, in the background
        self.browser.project_in_use(row.project_id, row.project_path)  # its browser stays (it starts on first use)
        return task

    def _forget_task(self, task: TurnController) -> None:
        """Nothing of the task is alive any more: keep its last seq in the registry and close its log."""
        if self.tasks.pop(task.id, None) is not None and self.hub is not None:
            self.registry.set_task_last_seq(task.id, self.hub.last_seq(task.id))
            self.hub.close_task(task.id)
        if not any(t.project_id == task.project_id for t in self.tasks.values()):
            self.mcp.project_idle(task.project_id)  # its servers stop after [mcp] idle_ttl unless a turn comes
            self.browser.project_idle(task.project_id)  # and its browser after [browser] idle_ttl

    def _mcp_tools_changed(self, project_id: str, generation: int) -> None:
        """A server's tools changed: the project's runs ask again at their next step."""
        changed = McpToolsChanged(generation=generation)
        for run in self.runs:
            if run.project_id == project_id:
                run.send(changed)

    def _all_live_runs_blocked(self) -> bool:
        live = [run for run in self.runs if run.id in self.slots.live]
        return bool(live) and all(r.waiting_on_children for r in live)

    # -- lifecycle ------------------------------------------------------------------------------------

    async def serve(self) -> None:
        # Only who can read the runtime directory gets it: the user's clients, not an agent's confined shell.
        write_client_token(self.paths.token, self.client_token)
        self._ctx = zmq.asyncio.Context()
        self._control = bind_router(self._ctx, RuntimePaths.endpoint(self.paths.control), hwm=CONTROL_HWM)
        self.peers = ControlPeers(self._control, self.scheduler.after, self.clock, self._peer_limits)
        self.heap = HeapTrim(self.scheduler.after)  # told the bytes of events and replies that passed
        self._workers = bind_router(self._ctx, RuntimePaths.endpoint(self.paths.workers))
        self.worker_gate = WorkerGate(self._workers, self.runs, RefusedPeers("workers.sock", self.clock))
        self._subscriber_auth = SubscriberAuth(self._ctx, self.client_token, self.clock)  # before events.sock
        self._events = bind_publisher(self._ctx, RuntimePaths.endpoint(self.paths.events), self.settings.pub_hwm,
                                      zap_domain=ZAP_DOMAIN)
        self._control_watch = ControlSocketWatch(self.paths.control)
        # PUB never receives, so a synchronous shadow is safe for it (no future per frame on the hot path).
        # ROUTER sockets that also receive must send through the asyncio API: a send on a shadow consumes
        # the edge-triggered FD wake-up the asyncio reader waits for, and incoming frames then sit unread.
        events_tx = zmq.Socket.shadow(self._events.underlying)
        self.hub = EventHub(events_tx, self.home / "events", self.settings.event_ring, seq_floor=self._task_seq_floor,
                            log_max_bytes=self.settings.event_log_max_bytes, ring_bytes=self.settings.event_ring_bytes,
                            ring_total_bytes=self.settings.event_ring_total_bytes,
                            on_traffic=self.heap.passed)
        self.services = RunServices(
            config=self.config, clock=self.clock, registry=self.registry, hub=self.hub, leases=self.leases,
            slots=self.slots, launcher=self.launcher, scheduler=self.scheduler, scope=self.scope,
            workers_endpoint=RuntimePaths.endpoint(self.paths.workers), home=self.home,
            send_worker=self.worker_gate.send, is_shutting_down=lambda: self.shutting_down,
            spend=DailySpend(self.registry.spent_since(start_of_day(time.time()))),
            runtime_dir=self.paths.root, landlock_abi=self._landlock_probe(), user_namespaces=self._userns_probe(),
            mcp=self.mcp, browser=self.browser)
        self.services.checkpoints = CheckpointService(self.services)
        self._say_confinement()
        self.registry.deferred.on_deferred = self._retry_registry_later
        # Before any request is read or lease granted: a dead predecessor's workers must not race new runs.
        await asyncio.to_thread(kill_leftover_workers, self.registry.unfinished_runs())
        await self._kill_leftover_mcp_servers()
        interrupted = mark_and_report_interrupted(
            self.registry, self.hub, "yagentd stopped before this finished (it crashed or was killed)",
            is_live=lambda task: task in self.tasks)
        if interrupted:
            log.info("marked %d runs and %d turns left by a previous daemon as interrupted",
                     len(interrupted.runs), len(interrupted.turns))
        self._prune_event_logs()
        await self._prune_boards_now()
        self._prune_checkpoints()  # in the background: it waits behind any job of a project
        self._schedule_jobs()
        # Forked on the launcher's thread, off the loop.
        self.launcher.keep_warm(self.settings.warm_workers, self._providers_ahead())

        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.request_shutdown)
        loop.add_signal_handler(signal.SIGHUP, self._on_sighup)
        log.info("yagentd %s ready (pid %d, runtime dir %s)", self.version, os.getpid(), self.paths.root)
        self.notifier.ready(self._status_line())
        try:
            try:
                async with asyncio.TaskGroup() as group:
                    # The MCP manager first: its task group exists before the first request can start a server.
                    loops = [group.create_task(self._essential(name, coro), name=name) for name, coro in (
                        ("mcp", self.mcp.serve()), ("browser", self.browser.serve()),
                        ("control", self._control_loop()),
                        ("workers", self.worker_gate.serve()), ("events-auth", self._subscriber_auth.run()),
                        ("timers", self.scheduler.run()))]
                    await self._stop.wait()
                    await self._shutdown()
                    self._loops_done = True
                    for task in loops:
                        task.cancel()
            except* Exception as failed:  # a loop died: end the daemon rather than run on half-deaf
                for exc in failed.exceptions:
                    log.critical("a daemon loop failed; yagentd is stopping", exc_info=exc)
                self.exit_code = 1
                self.request_shutdown()
                await self._shutdown()
        finally:
            leftover = await self.scope.drain(2.0)
            if leftover:
                log.warning("background tasks still running at exit: %s", ", ".join(leftover))
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                loop.remove_signal_handler(sig)
            self.hub.close()
            if self._control_watch is not None:
                self._control_watch.close()
            for sock in (self._control, self._workers, self._events):
                sock.close(linger=0)
            self._subscriber_auth.close()
            self._ctx.term()
            self.registry.close()
            log.info("yagentd stopped")

    async def _essential(self, name: str, loop: Coroutine[Any, Any, None]) -> None:
        """Run one of the loops the daemon cannot live without; its end, unless asked for, is a failure."""
        try:
            await loop
        except asyncio.CancelledError:
            if self._loops_done:
                raise
            raise LoopEnded(f"the {name} loop was cancelled") from None
        if not self._loops_done:
            raise LoopEnded(f"the {name} loop returned")

    def _schedule_jobs(self) -> None:
        every = self.scheduler.every
        every("ping-workers", lambda: self.settings.heartbeat_interval, self._ping_workers, lag_probe=True,
              only_while=self.runs.occupied)
        watched = self._control_watch is not None and self._control_watch.watch(self._check_runtime_dir)
        every("runtime-dir", lambda: RUNTIME_DIR_BACKSTOP if watched else RUNTIME_DIR_CHECK, self._check_runtime_dir)
        every("prune-event-logs", lambda: EVENT_LOG_PRUNE_INTERVAL, self._prune_event_logs)
        every("prune-boards", lambda: EVENT_LOG_PRUNE_INTERVAL, self._prune_boards)
        every("prune-checkpoints", lambda: EVENT_LOG_PRUNE_INTERVAL, self._prune_checkpoints)
        every("warm-workers", lambda: WARM_TEND_INTERVAL, self.launcher.tend)
        interval = self.notifier.watchdog_interval
        if interval:
            every("systemd-watchdog", lambda: interval, self.notifier.watchdog)
        if self.notifier.enabled:
            every("systemd-status", lambda: STATUS_INTERVAL, lambda: self.notifier.status(self._status_line()))

    def request_shutdown(self) -> None:
        if not self.shutting_down:
            log.info("shutdown requested")
            self.shutting_down = True
            self.notifier.stopping()
            self._stop.set()

    async def _shutdown(self) -> None:
        if self._shutdown_done or self.services is None:
            return
        self._shutdown_done = True
        for run in self.runs:
            if run.parent is None:
                run.stop(StopReason.INTERRUPTED, "yagentd is shutting down")
        if self.runs:
            try:
                async with asyncio.timeout(2 * self.settings.stop_grace + SHUTDOWN_SLACK):
                    await self.runs.emptied.wait()
            except TimeoutError:
                pass
        for run in self.runs:
            await run.kill_now("killed at shutdown")
        await self.mcp.close()  # every MCP server, those still starting too
        await self.browser.close()  # every project's browser
        assert self.hub is not None
        try:
            leftover = mark_and_report_interrupted(self.registry, self.hub, "yagentd shut down before this finished",
                                                   is_live=lambda task: task in self.tasks)
        except sqlite3.Error as exc:  # the next start marks them instead
            log.error("cannot mark unfinished runs as interrupted in %s: %s", self.registry.path, exc)
        else:
            if leftover:
                log.info("marked %d runs left at shutdown as interrupted", len(leftover.runs))

    async def _kill_leftover_mcp_servers(self) -> None:
        """MCP servers a dead predecessor left (recorded in state.db) are killed before anything starts."""
        try:
            leftovers = self.registry.mcp_leftovers()
        except sqlite3.Error as exc:
            log.error("cannot read the MCP servers a previous yagentd recorded in %s: %s", self.registry.path, exc)
            return
        if not leftovers:
            return
        await asyncio.to_thread(kill_leftover_servers, leftovers)
        try:
            self.registry.forget_mcp_leftovers(leftovers)
        except sqlite3.Error as exc:
            log.error("cannot clear the MCP server records in %s: %s", self.registry.path, exc)

    def _task_seq_floor(self, task_id: str) -> int:
        return self.registry.task_seq_floor(task_id)  # never raises: publishing must not fail on state.db

    # -- periodic and timed work ------------------------------------------------------------------------

    def _ping_workers(self) -> None:
        for run in self.runs:
            run.send(_PING)

    def _retry_registry_later(self, delay: float) -> None:
        """Deferred registry writes are tried again after `delay`; one timer at a time."""
        if self._registry_retry is not None:
            return

        def retry() -> None:
            self._registry_retry = None
            self.registry.deferred.flush(force=True)  # fails again: schedules the next try

        self._registry_retry = self.scheduler.after(delay, retry, "registry-retry")

    def _prune_event_logs(self) -> None:
        retention = self.settings.event_log_retention
        if retention <= 0 or self.hub is None:
            return
        pruned = self.hub.prune(retention, busy=lambda task: task in self.tasks)
        if pruned:
            log.info("deleted the event logs of %d tasks idle for over %gs ([daemon] event_log_retention)",
                     len(pruned), retention)

    def _prune_boards(self) -> None:
        """The periodic pass, off the event loop: with many tasks it walks many files."""
        if self._board_prune is None or self._board_prune.done():
            self._board_prune = self.scope.spawn("prune-boards", self._prune_boards_now())

    async def _prune_boards_now(self) -> None:
        board = self.settings.run_settings.blackboard
        try:  # read on the loop, where the registry lives; a task that may still resume keeps its board
            may_resume = self.registry.task_ids_in_states(_MAY_RESUME)
        except sqlite3.Error as exc:
            log.warning("board prune skipped: the task registry cannot say which tasks may resume (%s)", exc)
            return
        live = self.tasks

        def keep(task: str) -> bool:  # a task started meanwhile is seen live: a dict lookup is safe across threads
            return task in may_resume or task in live

        pruned = await asyncio.to_thread(prune_boards, self.home, ttl=board.ttl,
                                         artifact_retention=board.artifact_retention, keep=keep)
        if pruned.boards or pruned.artifacts:
            log.info("removed %d boards and %d artifacts past their retention ([blackboard] ttl, "
                     "artifact_retention)", len(pruned.boards), pruned.artifacts)

    def _prune_checkpoints(self) -> None:
        """Checkpoint refs past `[git_checkpoint] retention` go (a process per repository, in its line)."""
        checkpoints = self.checkpoints
        if checkpoints is None or (self._checkpoint_prune is not None and not self._checkpoint_prune.done()):
            return

        def project_of(task_id: str) -> str | None:
            row = self.registry.get_task(task_id)
            return row.project_path if row is not None else None

        async def prune() -> None:
            try:
                removed = await checkpoints.prune(project_of)
            except sqlite3.Error as exc:
                log.warning("checkpoint prune skipped: the task registry cannot be read (%s)", exc)
                return
            if removed:
                log.info("removed %d git checkpoints past their retention ([git_checkpoint] retention)", removed)

        self._checkpoint_prune = self.scope.spawn("prune-checkpoints", prune())

    def _check_runtime_dir(self) -> None:
        """Shut down when clients can no longer reach this daemon; exiting 1 lets `Restart=on-failure` bring
        up a reachable one."""
        if self.shutting_down or self._control_watch is None:
            return
        problem = self._control_watch.problem()
        if problem is None:
            return
        log.error("the control socket %s %s while yagentd was running (systemd-logind removes /run/user/UID when "
                  "the user's last session ends); clients can no longer reach this daemon, so it is shutting down. "
                  "Start it again with `yagent daemon start`; `loginctl enable-linger` keeps the runtime "
                  "directory across logouts", self.paths.control, problem)
        self.exit_code = 1
        self.request_shutdown()

    def _on_sighup(self) -> None:
        """SIGHUP (a closed terminal, `systemctl reload`, logrotate) re-reads config.toml and reopens log files.

        Its default action would kill the daemon without the orderly shutdown its runs are owed.
        """
        reopen_log_files()
        try:
            self.refresh_settings()
        except ConfigError as exc:
            log.error("SIGHUP: %s; keeping the configuration in use", " / ".join(exc.lines()))
            return
        log.info("SIGHUP: log files reopened, configuration checked (%s)", self.config.path)

    def _say_confinement(self) -> None:
        assert self.services is not None
        note = confinement_status(self.settings, self.services.landlock_abi)
        (log.warning if self.services.landlock_abi < 1 and self.settings.sandbox.enabled else log.info)(
            "confinement: %s", note)

    def _status_line(self) -> str:
        running = sum(1 for t in self.tasks.values() if t.in_flight)
        return f"{running} tasks running, {len(self.slots.live)} workers, {self.leases.in_use} LLM requests in flight"

    # -- sockets ----------------------------------------------------------------------------------------

    async def _control_loop(self) -> None:
        while True:
            frames = await self._control.recv_multipart()
            try:
                await self._handle_control(frames)
            except Exception:  # nothing a client sends may stop the control loop
                log.exception("handling a control frame failed")
            # A frame already waiting completes the receive without yielding: a flood would starve pings.
            await asyncio.sleep(0)

    async def _handle_control(self, frames: list[bytes]) -> None:
        identity = frames[0]
        if self.peers.ignores(identity):  # dropped for not reading its replies
            return
        msg: Message | None = None
        if len(frames) != 2:
            reply: Message | None = ErrorReply(id=0, code=ErrorCode.MALFORMED,
                                               message="expected exactly one frame per message")
        else:
            try:
                msg, reply = decode(frames[1]), None
            except (MalformedMessage, MessageTooLarge) as exc:
                reply = ErrorReply(id=getattr(exc, "request_id", None) or 0, code=ErrorCode.MALFORMED,
                                   message=str(exc))
        request_id = getattr(msg if reply is None else reply, "id", 0)
        if not self.peers.admit(identity, request_id):  # over its limit: refused with `too_fast`
            return
        if reply is None and commands.answered_in_background(msg):  # it waits for processes: not on this loop
            self.scope.spawn(f"control-{msg.kind}", self._reply_later(identity, request_id, msg))
            return
        if reply is None:
            reply = await commands.dispatch(self, msg, identity)
        self._send_reply(identity, request_id, reply)

    async def _reply_later(self, identity: bytes, request_id: int, msg: Message) -> None:
        self._send_reply(identity, request_id, await commands.dispatch(self, msg, identity))

    def _send_reply(self, identity: bytes, request_id: int, reply: Message) -> None:
        frame = self._control_frame(reply)
        self.heap.passed(len(frame))
        self.peers.reply(identity, request_id, frame)

    @staticmethod
    def _control_frame(msg: Message) -> bytes:
        try:
            return encode(msg)
        except MessageTooLarge as exc:
            log.warning("a %s reply is too large to send: %s", msg.kind, exc)
            return encode(ErrorReply(id=getattr(msg, "id", 0), code=ErrorCode.TOO_LARGE,
                                     message=f"the {msg.kind} reply is too large for one message ({exc}); "
                                             "ask for less (a smaller range or limit)"))
