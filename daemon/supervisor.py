"""The daemon loop: sockets in, runs out.

`Daemon` owns the three sockets, the registry, the launcher, the limits (leases, delegation pools,
the live-worker cap), the watchdog and the event hub. Control requests are handled by the modules in
`commands/`; worker messages by the `_on_*` methods below. Everything runs on one asyncio loop, so
state is never shared across threads; blocking work (scanning processes to kill a tree) goes to a
thread and comes back.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import signal
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import zmq
import zmq.asyncio

from yagent.ipc.config import ConfigError, Settings, load_settings
from yagent.ipc.errors import MalformedMessage, MessageTooLarge
from yagent.ipc.home import config_path
from yagent.ipc.messages import (
    PROTOCOL_VERSION,
    AskUser,
    DelegateRequest,
    DelegateResult,
    ErrorReply,
    EventBatch,
    Heartbeat,
    LeaseGrant,
    LeaseRelease,
    LeaseRequest,
    Ping,
    ResultAck,
    RunControl,
    RunOutcome,
    RunResult,
    RunSpec,
    StartRun,
    UserAnswer,
    WorkerHello,
)
from yagent.ipc.records import Message, decode, encode
from yagent.ipc.runtime_dir import RuntimePaths
from yagent.ipc.sockets import bind_publisher, bind_router
from yagent.ipc.vocabulary import ControlAction, EventType, RunStatus, StopReason, TaskState

from .admission import DelegationPool, WorkerSlots
from .event_hub import EventHub
from .launcher import Launcher, kill_run_tree
from .leases import LeaseManager
from .live import LiveRun, LiveTask, PendingQuestion
from .registry import Interrupted, Registry, TaskRow, new_run_id
from .run_clock import RunClock
from .sd_notify import SystemdNotifier
from .task_scope import TaskScope

__all__ = ["Daemon"]

log = logging.getLogger(__name__)

MAX_DELEGATION_DEPTH = 4
HELLO_DEADLINE = 30.0
TICK = 0.1
RUNTIME_DIR_CHECK = 1.0  # seconds between checks that control.sock is still ours
EVENT_LOG_PRUNE_INTERVAL = 3600.0  # seconds between passes deleting event logs past their retention
# Submit options that hold for the whole turn, so delegations carry them too (a /model choice, say).
INHERITED_OPTIONS = ("model_override",)
_FINISHED_STATUSES = {RunStatus.DONE, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.INTERRUPTED}


class CommandError(Exception):
    """Raised by a command handler; becomes an ErrorReply with this code and message."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


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
    ) -> None:
        self.settings = settings
        self.paths = paths
        self.home = home
        self._config_stamp = _file_stamp(config_path(home))
        self.launcher = launcher
        self.clock = clock
        self.notifier = notifier or SystemdNotifier()
        self.version = version
        self.started_at = time.time()
        self.registry = Registry(home / "state.db")
        self.leases = LeaseManager(settings.max_in_flight_requests)
        self.slots = WorkerSlots(settings.max_workers, self._all_live_runs_blocked)
        self.tasks: dict[str, LiveTask] = {}
        self.runs: dict[str, LiveRun] = {}
        self.scope = TaskScope("daemon")
        self.shutting_down = False
        self.exit_code = 0  # what `yagentd` exits with after `serve` returns
        self.runs_started = 0
        self._control_stamp: tuple[int, int] | None = None
        self._stop = asyncio.Event()
        self._ctx: zmq.asyncio.Context | None = None
        self.hub: EventHub | None = None

    def refresh_settings(self) -> None:
        """Re-read config.toml when it changed since it was last read, so `yagent setup` needs no restart.

        Called when a turn is submitted: the turn's runs get the new provider tables, timeouts and limits.
        Sockets, ring and log sizes stay as the daemon started with them. A broken file raises
        `ConfigError` and changes nothing; the next submission tries again.
        """
        path = config_path(self.home)
        stamp = _file_stamp(path)
        if stamp == self._config_stamp:
            return
        fresh = load_settings(path)
        old = self.settings
        self.settings = dataclasses.replace(fresh, pub_hwm=old.pub_hwm, event_ring=old.event_ring,
                                            event_log_max_bytes=old.event_log_max_bytes)
        self._config_stamp = stamp
        self.leases.set_limit(self.settings.max_in_flight_requests)
        self.slots.set_limit(self.settings.max_workers)
        log.info("configuration reloaded from %s", path)
        for warning in self.settings.warnings:
            log.warning("%s: %s", path, warning)

    # ------------------------------------------------------------------------------------------------
    # lifecycle

    async def serve(self) -> None:
        self._ctx = zmq.asyncio.Context()
        self._control = bind_router(self._ctx, RuntimePaths.endpoint(self.paths.control))
        self._workers = bind_router(self._ctx, RuntimePaths.endpoint(self.paths.workers))
        self._events = bind_publisher(self._ctx, RuntimePaths.endpoint(self.paths.events), self.settings.pub_hwm)
        # PUB never receives, so a synchronous shadow is safe for it (no future per frame on the hot path).
        # ROUTER sockets that also receive must send through the asyncio API: a send on a shadow consumes
        # the edge-triggered FD wake-up the asyncio reader waits for, and incoming frames then sit unread.
        self._control_stamp = _path_stamp(self.paths.control)
        events_tx = zmq.Socket.shadow(self._events.underlying)
        self.hub = EventHub(events_tx, self.home / "events", self.settings.event_ring, seq_floor=self._task_seq_floor,
                            log_max_bytes=self.settings.event_log_max_bytes)
        interrupted = self.registry.mark_interrupted()
        if interrupted:
            log.info("marked %d runs and %d turns left by a previous daemon as interrupted",
                     len(interrupted.runs), len(interrupted.turns))
            self._report_interrupted(interrupted, "yagentd stopped before this finished (it crashed or was killed)")
        self._prune_event_logs()

        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.request_shutdown)
        loop.add_signal_handler(signal.SIGHUP, self._on_sighup)
        loops = TaskScope("loops")
        loops.spawn("control", self._control_loop())
        loops.spawn("workers", self._worker_loop())
        loops.spawn("ticker", self._tick_loop())
        log.info("yagentd %s ready (pid %d, runtime dir %s)", self.version, os.getpid(), self.paths.root)
        self.notifier.ready(self._status_line())
        try:
            await self._stop.wait()
            await self._shutdown()
        finally:
            leftover = await loops.drain(2.0) + await self.scope.drain(2.0)
            if leftover:
                log.warning("background tasks still running at exit: %s", ", ".join(leftover))
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                loop.remove_signal_handler(sig)
            self.hub.close()
            for sock in (self._control, self._workers, self._events):
                sock.close(linger=0)
            self._ctx.term()
            self.registry.close()
            log.info("yagentd stopped")

    def _on_sighup(self) -> None:
        """SIGHUP (a closed terminal, `systemctl reload`, logrotate) re-reads config.toml and reopens log files.

        Its default action would kill the daemon without the orderly shutdown its runs are owed.
        """
        for handler in logging.getLogger().handlers:
            if isinstance(handler, logging.FileHandler):
                with handler.lock:  # type: ignore[union-attr]
                    if handler.stream is not None:
                        handler.stream.close()
                        handler.stream = None  # type: ignore[assignment]  # reopened by the next record
        try:
            self.refresh_settings()
        except ConfigError as exc:
            log.error("SIGHUP: %s; keeping the configuration in use", " / ".join(exc.lines()))
            return
        log.info("SIGHUP: log files reopened, configuration checked (%s)", config_path(self.home))

    def _check_runtime_dir(self) -> None:
        """Shut down when control.sock is gone or is no longer ours: no client can reach this daemon any more.

        systemd-logind removes /run/user/UID when the user's last session ends; `rm -rf` does the same.
        Without this the daemon would keep running unreachable, and a second one could start beside it on
        the same state home. Exiting non-zero lets `Restart=on-failure` bring up a reachable one.
        """
        if self.shutting_down or self._control_stamp is None:
            return
        stamp = _path_stamp(self.paths.control)
        if stamp == self._control_stamp:
            return
        what = "was removed" if stamp is None else "was replaced by another process"
        log.error("the control socket %s %s while yagentd was running (systemd-logind removes /run/user/UID when "
                  "the user's last session ends); clients can no longer reach this daemon, so it is shutting down. "
                  "Start it again with `yagent daemon start`; `loginctl enable-linger` keeps the runtime "
                  "directory across logouts", self.paths.control, what)
        self.exit_code = 1
        self.request_shutdown()

    def request_shutdown(self) -> None:
        if not self.shutting_down:
            log.info("shutdown requested")
            self.shutting_down = True
            self.notifier.stopping()
            self._stop.set()

    async def _shutdown(self) -> None:
        for run in list(self.runs.values()):
            if run.parent is None:
                self.stop_run(run, StopReason.INTERRUPTED, "yagentd is shutting down")
        deadline = self.clock() + 2 * self.settings.stop_grace + 2.0
        while self.runs and self.clock() < deadline:
            await asyncio.sleep(TICK)
        for run in list(self.runs.values()):
            log.warning("run %s did not exit in time; killing it", run.id)
            await asyncio.to_thread(kill_run_tree, run.id, run.pid or None, signal.SIGKILL)
            if not run.finished:
                self.finalize(run, self._outcome(run, None, exit_note="killed at shutdown"))
        try:
            leftover = self.registry.mark_interrupted()
        except sqlite3.Error as exc:  # the next start marks them instead
            log.error("cannot mark unfinished runs as interrupted in %s: %s", self.registry.path, exc)
        else:
            if leftover:
                self._report_interrupted(leftover, "yagentd shut down before this finished")

    def _task_seq_floor(self, task_id: str) -> int:
        row = self.registry.get_task(task_id)
        return row.last_seq if row else 0

    def _report_interrupted(self, interrupted: Interrupted, why: str) -> None:
        """Tell followers of runs and turns a previous daemon left in flight that they ended."""
        assert self.hub is not None
        touched: set[str] = set()
        for r in interrupted.runs:
            touched.add(r.task_id)
            self.hub.publish(r.task_id, r.id, r.agent, EventType.RUN_FINISHED.value, {
                "status": RunStatus.INTERRUPTED, "stop_reason": StopReason.INTERRUPTED, "error": why,
                "output": "", "parent": r.parent_run, "call_id": r.call_id, "cpu_seconds": 0.0})
        for t in interrupted.turns:
            touched.add(t.task_id)
            self.hub.publish(t.task_id, t.root_run, "", EventType.TURN_FINISHED.value, {
                "turn": t.turn, "state": TaskState.INTERRUPTED, "status": RunStatus.INTERRUPTED,
                "stop_reason": StopReason.INTERRUPTED, "output": "", "error": why, "run": t.root_run})
        for task_id in touched:
            if task_id not in self.tasks:
                self.registry.set_task_last_seq(task_id, self.hub.last_seq(task_id))
                self.hub.close_task(task_id)

    # ------------------------------------------------------------------------------------------------
    # sockets

    async def _control_loop(self) -> None:
        from .commands import dispatch  # late: commands import this module

        while True:
            frames = await self._control.recv_multipart()
            try:
                await self._handle_control(frames, dispatch)
            except Exception:  # nothing a client sends may stop the control loop
                log.exception("handling a control frame failed")

    async def _handle_control(self, frames: list[bytes], dispatch: Callable[..., Any]) -> None:
        if len(frames) != 2:
            if frames:
                self._send_control(frames[0], ErrorReply(
                    id=0, code="malformed", message="expected exactly one frame per message"))
            return
        identity, payload = frames
        try:
            msg = decode(payload)
        except (MalformedMessage, MessageTooLarge) as exc:
            self._send_control(identity, ErrorReply(id=0, code="malformed", message=str(exc)))
            return
        try:
            reply = await dispatch(self, msg)
        except CommandError as exc:
            reply = ErrorReply(id=getattr(msg, "id", 0), code=exc.code, message=str(exc))
        except sqlite3.OperationalError as exc:
            log.error("control request %s failed: the task registry %s: %s", msg.kind, self.registry.path, exc)
            reply = ErrorReply(id=getattr(msg, "id", 0), code="registry_unavailable",
                               message=f"yagentd cannot write its task registry {self.registry.path} ({exc}); "
                                       "close any program holding it open (an `sqlite3` shell, a backup) or free "
                                       "disk space, then try again")
        except Exception as exc:
            log.exception("control request %s failed", msg.kind)
            reply = ErrorReply(id=getattr(msg, "id", 0), code="internal",
                               message=f"yagentd failed to handle {msg.kind}: {exc}; see the daemon log")
        self._send_control(identity, reply)

    def _send_control(self, identity: bytes, msg: Message) -> None:
        try:
            frame = encode(msg)
        except MessageTooLarge as exc:
            log.warning("a %s reply is too large to send: %s", msg.kind, exc)
            frame = encode(ErrorReply(id=getattr(msg, "id", 0), code="too_large",
                                      message=f"the {msg.kind} reply is too large for one message ({exc}); "
                                              "ask for less (a smaller range or limit)"))
        sent = self._control.send_multipart([identity, frame])
        # A client that left (EHOSTUNREACH) simply misses its reply; its request times out on its side.
        sent.add_done_callback(_ignore_send_error)

    async def _worker_loop(self) -> None:
        while True:
            frames = await self._workers.recv_multipart()
            if len(frames) != 2:
                continue
            identity, payload = frames
            try:
                run_id = identity.decode()
                msg = decode(payload)
            except (UnicodeDecodeError, MalformedMessage, MessageTooLarge) as exc:
                log.debug("dropping a bad frame on workers.sock: %s", exc)
                continue
            run = self.runs.get(run_id)
            if run is None:
                if isinstance(msg, WorkerHello):
                    self._send_raw_worker(identity, ErrorReply(
                        id=0, code="unknown_run", message=f"no live run {run_id!r}; exiting is the right thing"))
                continue
            try:
                self._on_worker_message(run, msg)
            except Exception:
                log.exception("handling %s from run %s failed", msg.kind, run.id)

    def _send_raw_worker(self, identity: bytes, msg: Message) -> None:
        sent = self._workers.send_multipart([identity, encode(msg)])

        def check(fut: asyncio.Future[Any]) -> None:
            if not fut.cancelled() and fut.exception() is not None:
                log.warning("cannot send %s to worker %s: %s", msg.kind, identity.decode(errors="replace"),
                            fut.exception())

        sent.add_done_callback(check)

    def send_worker(self, run: LiveRun, msg: Message) -> None:
        if run.connected:
            self._send_raw_worker(run.id.encode(), msg)

    # ------------------------------------------------------------------------------------------------
    # tasks and runs

    def live_task(self, row: TaskRow) -> LiveTask:
        live = self.tasks.get(row.id)
        if live is None:
            live = LiveTask(row=row)
            self.tasks[row.id] = live
        return live

    def publish(self, task: LiveTask | str, type_: EventType, data: dict[str, Any], run: LiveRun | None = None) -> int:
        assert self.hub is not None
        task_id = task if isinstance(task, str) else task.id
        return self.hub.publish(task_id, run.id if run else "", run.agent if run else "", type_.value, data)

    def create_run(self, task: LiveTask, turn: int, agent: str, text: str, *, parent: LiveRun | None = None,
                   call_id: str = "", yolo: str = "none", options: dict[str, Any] | None = None,
                   context: str = "") -> LiveRun:
        run_id = new_run_id()
        spec = RunSpec(
            run=run_id, task=task.id, turn=turn, project=task.row.project_id, project_root=task.row.project_path,
            agent=agent, input=text, home=str(self.home), parent_run=parent.id if parent else None,
            call_id=call_id or None, context=context, depth=(parent.spec.depth + 1) if parent else 0,
            yolo=parent.spec.yolo if parent else yolo, settings=self.settings.run_settings,
            options=options or {}, heartbeat_interval=self.settings.heartbeat_interval,
            daemon_loss_timeout=self.settings.daemon_loss_timeout,
        )
        run = LiveRun(id=run_id, task=task, turn=turn, agent=agent, spec=spec, parent=parent, call_id=call_id,
                      pool=DelegationPool(self.settings.max_parallel_delegations))
        self.registry.add_run(run_id, task.id, turn, parent.id if parent else None, agent, call_id, text)
        self.runs[run_id] = run
        task.runs[run_id] = run
        if parent is not None:
            parent.children[run_id] = run
        return run

    def admit(self, run: LiveRun) -> None:
        """Queue the run for a delegation-pool slot (delegations) and a live-worker slot."""
        def take_worker_slot() -> None:
            self.slots.acquire(run.id, lambda: self._spawn(run), delegation=run.is_delegation)

        if run.parent is not None:
            run.parent.pool.submit(run.id, take_worker_slot)
        else:
            take_worker_slot()

    def _all_live_runs_blocked(self) -> bool:
        live = [self.runs[r] for r in self.slots.live if r in self.runs]
        return bool(live) and all(r.waiting_on_children for r in live)

    def _spawn(self, run: LiveRun) -> None:
        if run.finished:
            self.slots.release(run.id)
            return
        run.spec.paused = run.task.paused
        try:
            handle = self.launcher.launch(run.id, run.agent, RuntimePaths.endpoint(self.paths.workers))
        except Exception as exc:
            log.exception("launching a worker for run %s failed", run.id)
            self.finalize(run, RunOutcome(run=run.id, agent=run.agent, status=RunStatus.FAILED,
                                          stop_reason=StopReason.PANIC,
                                          error=f"could not start a worker process: {exc}"))
            return
        self.runs_started += 1
        run.handle = handle
        run.pid = handle.pid
        run.status = RunStatus.STARTING
        run.launched_at = self.clock()
        self.registry.run_started(run.id, handle.pid)
        asyncio.get_running_loop().add_reader(handle.sentinel, self._on_process_exit, run)

    def _on_process_exit(self, run: LiveRun) -> None:
        assert run.handle is not None
        loop = asyncio.get_running_loop()
        loop.remove_reader(run.handle.sentinel)
        code = run.handle.exitcode()
        run.handle.close()
        run.exited.set()
        self.slots.release(run.id)
        self.leases.drop_run(run.id)
        self.runs.pop(run.id, None)
        if not run.finished:
            note = f"worker process exited with code {code}" if code is None or code >= 0 else (
                f"worker process was killed by signal {-code} ({_signal_name(-code)})")
            self.finalize(run, self._outcome(run, None, exit_note=note))
        # Tool processes that left the worker's group (setsid, a daemonising command) outlive even a clean
        # exit; they still carry the run id in their environment, so sweep for them after every run.
        self.scope.spawn(f"reap-{run.id}", asyncio.to_thread(kill_run_tree, run.id, None, signal.SIGKILL))
        self._maybe_forget_task(run.task)

    def _maybe_forget_task(self, task: LiveTask) -> None:
        if not task.in_flight and not any(not r.exited.is_set() for r in task.runs.values()):
            self.tasks.pop(task.id, None)
            if self.hub is not None:
                self.registry.set_task_last_seq(task.id, self.hub.last_seq(task.id))
                self.hub.close_task(task.id)

    # ------------------------------------------------------------------------------------------------
    # worker messages

    def _on_worker_message(self, run: LiveRun, msg: Message) -> None:
        clock = run.clock
        if isinstance(msg, EventBatch):
            if clock is not None:
                clock.touch(self.clock())
            assert self.hub is not None
            self.hub.publish_batch(run.task.id, run.id, run.agent, msg.events)
        elif isinstance(msg, Heartbeat):
            if clock is not None:
                clock.touch(self.clock())
        elif isinstance(msg, WorkerHello):
            self._on_hello(run, msg)
        elif not run.connected or clock is None:
            log.debug("run %s sent %s before hello; ignored", run.id, msg.kind)
        elif isinstance(msg, LeaseRequest):
            self._on_lease_request(run, msg)
        elif isinstance(msg, LeaseRelease):
            self.leases.release(run.id, msg.id)
            if msg.id in run.queued_leases:  # withdrawn while queued: the run is no longer waiting on it
                run.queued_leases.discard(msg.id)
                clock.unfreeze("lease", self.clock())
                if not run.queued_leases:
                    self._publish_slot_wait(run, waiting=False)
        elif isinstance(msg, DelegateRequest):
            self._on_delegate(run, msg)
        elif isinstance(msg, AskUser):
            self._on_ask_user(run, msg)
        elif isinstance(msg, RunResult):
            self._on_result(run, msg)
        else:
            log.debug("run %s sent unexpected %s", run.id, msg.kind)

    def _on_hello(self, run: LiveRun, msg: WorkerHello) -> None:
        if msg.version != PROTOCOL_VERSION:
            self._send_raw_worker(run.id.encode(), ErrorReply(
                id=0, code="protocol_mismatch",
                message=f"worker speaks protocol {msg.version}, daemon {PROTOCOL_VERSION}; restart yagentd"))
            return
        if run.connected or run.status != RunStatus.STARTING:
            return
        run.connected = True
        run.status = RunStatus.RUNNING
        now = self.clock()
        run.clock = RunClock(now)
        if run.task.paused:
            run.clock.freeze("paused", now)
        run.spec.paused = run.task.paused
        self.send_worker(run, StartRun(spec=run.spec))
        if run.stopping and run.forced_stop is not None:
            self.send_worker(run, RunControl(action=ControlAction.CANCEL, reason=run.forced_stop.value))
        self.registry.run_running(run.id)
        self.publish(run.task, EventType.RUN_STARTED, {
            "agent": run.agent, "parent": run.parent.id if run.parent else None, "call_id": run.call_id,
            "pid": run.pid, "depth": run.spec.depth, "input": run.spec.input[:2000],
        }, run)

    def _on_lease_request(self, run: LiveRun, msg: LeaseRequest) -> None:
        assert run.clock is not None
        lease_id = msg.id
        now = self.clock()
        run.clock.freeze("lease", now)

        def grant() -> None:
            if run.clock is not None:
                run.clock.unfreeze("lease", self.clock())
            self.send_worker(run, LeaseGrant(id=lease_id))
            if lease_id in run.queued_leases:  # granted after a wait: say the wait is over
                run.queued_leases.discard(lease_id)
                if not run.queued_leases:
                    self._publish_slot_wait(run, waiting=False)

        # A request that is not granted at once has not been granted yet (`LeaseManager.request`).
        if not self.leases.request(run.task.row.project_id, run.id, lease_id, grant):
            # Otherwise the run just looks stuck: say it waits its turn ([llm] max_in_flight_requests).
            run.queued_leases.add(lease_id)
            self._publish_slot_wait(run, waiting=True)

    def _publish_slot_wait(self, run: LiveRun, *, waiting: bool) -> None:
        self.publish(run.task, EventType.LLM_SLOT_WAIT, {"waiting": waiting, "limit": self.leases.limit}, run)

    def _on_delegate(self, run: LiveRun, msg: DelegateRequest) -> None:
        if not msg.agent or not msg.task.strip():
            self.send_worker(run, ErrorReply(id=msg.id, code="bad_request",
                                             message="delegate needs an agent name and a non-empty task"))
            return
        if run.spec.depth + 1 > MAX_DELEGATION_DEPTH:
            self.send_worker(run, ErrorReply(
                id=msg.id, code="too_deep",
                message=f"delegation depth would exceed {MAX_DELEGATION_DEPTH}; do the work here instead"))
            return
        if self.shutting_down or run.stopping:
            self.send_worker(run, ErrorReply(id=msg.id, code="stopping", message="the run is being stopped"))
            return
        inherited = {k: run.spec.options[k] for k in INHERITED_OPTIONS if k in run.spec.options}
        try:
            child = self.create_run(run.task, run.turn, msg.agent, msg.task, parent=run, call_id=msg.call_id,
                                    options=inherited, context=msg.context)
        except sqlite3.OperationalError as exc:  # the parent must hear back, or it waits forever
            log.error("cannot record a delegation of run %s in %s: %s", run.id, self.registry.path, exc)
            self.send_worker(run, ErrorReply(
                id=msg.id, code="registry_unavailable",
                message=f"yagentd cannot write its task registry ({exc}); try the delegation again later"))
            return
        child.reply_to = msg.id
        assert run.clock is not None
        run.clock.freeze("delegation", self.clock())
        self.publish(run.task, EventType.RUN_QUEUED, {
            "agent": msg.agent, "parent": run.id, "call_id": msg.call_id, "run": child.id,
        }, run)
        self.admit(child)

    def _on_ask_user(self, run: LiveRun, msg: AskUser) -> None:
        assert run.clock is not None
        q = msg.question
        q.request_id = f"{run.id}.{msg.id}"
        q.task, q.run, q.agent, q.asked_at = run.task.id, run.id, run.agent, time.time()
        run.task.questions[q.request_id] = PendingQuestion(question=q, run=run, reply_to=msg.id)
        run.clock.freeze("user", self.clock())
        self.sync_task_state(run.task)
        self.publish(run.task, EventType.USER_HELP_NEEDED, q.to_wire(), run)

    def answer_question(self, task: LiveTask, request_id: str, answer: dict[str, Any], by: str) -> None:
        pending = task.questions.pop(request_id)
        run = pending.run
        if run.clock is not None:
            run.clock.unfreeze("user", self.clock())
        self.send_worker(run, UserAnswer(id=pending.reply_to, answer=answer))
        self.publish(task, EventType.USER_HELP_RESPONSE, {"request_id": request_id, "answer": answer, "by": by}, run)
        self.sync_task_state(task)

    def _on_result(self, run: LiveRun, msg: RunResult) -> None:
        self.send_worker(run, ResultAck())
        if run.result is not None:
            return
        run.result = msg
        self.finalize(run, self._outcome(run, msg))
        if not run.exited.is_set():
            self.scope.spawn(f"reap-after-result-{run.id}", self._reap_after_result(run))

    async def _reap_after_result(self, run: LiveRun) -> None:
        grace = max(self.settings.stop_grace, 1.0) * 3
        try:
            await asyncio.wait_for(run.exited.wait(), grace)
        except TimeoutError:
            log.warning("run %s reported its result but did not exit within %.0fs; killing it", run.id, grace)
            await self._escalate(run)

    # ------------------------------------------------------------------------------------------------
    # ending runs

    def _outcome(self, run: LiveRun, result: RunResult | None, exit_note: str = "") -> RunOutcome:
        if run.forced_stop is not None:
            status = {StopReason.CANCELLED: RunStatus.CANCELLED,
                      StopReason.INTERRUPTED: RunStatus.INTERRUPTED}.get(run.forced_stop, RunStatus.FAILED)
            error = run.forced_detail
            if exit_note and result is None:
                error = f"{error} ({exit_note})" if error else exit_note
            base = result.outcome if result else RunOutcome(status=status, stop_reason=run.forced_stop)
            return dataclasses.replace(base, run=run.id, agent=run.agent, status=status,
                                       stop_reason=run.forced_stop, error=error)
        if result is None:
            return RunOutcome(run=run.id, agent=run.agent, status=RunStatus.FAILED, stop_reason=StopReason.PANIC,
                              error=f"{exit_note or 'worker exited'} before reporting a result")
        status = result.outcome.status if result.outcome.status in _FINISHED_STATUSES else RunStatus.FAILED
        return dataclasses.replace(result.outcome, run=run.id, agent=run.agent, status=status)

    def finalize(self, run: LiveRun, outcome: RunOutcome) -> None:
        """Record the run's end and hand its outcome to whoever waits for it."""
        if run.finished:
            return
        run.finished = True
        run.status = RunStatus(outcome.status)
        try:
            self.registry.finish_run(run.id, outcome.status, outcome.stop_reason, outcome.output, outcome.error)
        except Exception:  # a full disk must not also strand the parent, the slots and the followers
            log.exception("recording the end of run %s failed", run.id)
        self.leases.drop_run(run.id)
        if run.handle is None:
            self.slots.release(run.id)  # never launched: free its queue place
            run.exited.set()
            self.runs.pop(run.id, None)
        for child in list(run.children.values()):
            if not child.finished:
                self.stop_run(child, StopReason.CANCELLED, f"its parent run {run.id} ended")
        withdrawn = False
        for rid, pending in list(run.task.questions.items()):
            if pending.run is run:
                del run.task.questions[rid]
                withdrawn = True
                self.publish(run.task, EventType.USER_HELP_RESPONSE,
                             {"request_id": rid, "answer": {"cancelled": True}, "by": "daemon"}, run)
        if withdrawn:
            self.sync_task_state(run.task)
        self.publish(run.task, EventType.RUN_FINISHED, {
            "status": outcome.status, "stop_reason": outcome.stop_reason, "error": outcome.error,
            "output": outcome.output, "parent": run.parent.id if run.parent else None, "call_id": run.call_id,
            "cpu_seconds": outcome.cpu_seconds,
        }, run)
        parent = run.parent
        if parent is not None:
            parent.pool.done(run.id)
            if parent.clock is not None:
                parent.clock.unfreeze("delegation", self.clock())
            if not parent.finished and run.reply_to is not None:
                self.send_worker(parent, DelegateResult(id=run.reply_to, outcome=outcome))
        elif run.task.root is run:
            run.task.root_outcome = outcome
        task = run.task
        if task.root_outcome is not None and task.root is not None and not task.in_flight:
            outcome, task.root_outcome = task.root_outcome, None
            self._finish_turn(task, outcome)
        self._maybe_forget_task(task)

    def _finish_turn(self, task: LiveTask, outcome: RunOutcome) -> None:
        state = {RunStatus.DONE: TaskState.DONE, RunStatus.CANCELLED: TaskState.CANCELLED,
                 RunStatus.INTERRUPTED: TaskState.INTERRUPTED}.get(RunStatus(outcome.status), TaskState.FAILED)
        self.registry.finish_turn(task.id, task.turn, state, outcome.output or outcome.error)
        self.registry.set_task_state(task.id, state)
        task.row.state = state
        task.paused = False
        self.publish(task, EventType.TURN_FINISHED, {
            "turn": task.turn, "state": state, "status": outcome.status, "stop_reason": outcome.stop_reason,
            "output": outcome.output, "error": outcome.error, "run": outcome.run,
        }, task.root)

    def stop_run(self, run: LiveRun, reason: StopReason, detail: str) -> None:
        """Stop a run and its descendants: cancel → grace → SIGTERM → grace → SIGKILL of the tree."""
        if run.finished and run.exited.is_set():
            return
        if run.stopping:
            return
        run.stopping = True
        if run.forced_stop is None and not run.finished:
            run.forced_stop = reason
            run.forced_detail = detail
        for child in list(run.children.values()):
            self.stop_run(child, StopReason.CANCELLED, f"its parent run {run.id} was stopped ({reason.value})")
        if run.handle is None:  # still queued: there is no process to stop
            self.finalize(run, self._outcome(run, None))
            return
        self.send_worker(run, RunControl(action=ControlAction.CANCEL, reason=reason.value))
        self.scope.spawn(f"stop-{run.id}", self._escalate(run))

    async def _escalate(self, run: LiveRun) -> None:
        grace = self.settings.stop_grace
        for sig in (None, signal.SIGTERM, signal.SIGKILL):
            if sig is not None:
                log.info("run %s still alive; sending %s to its process tree", run.id, sig.name)
                try:
                    os.killpg(run.pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass
                await asyncio.to_thread(kill_run_tree, run.id, run.pid, sig)
            try:
                await asyncio.wait_for(run.exited.wait(), grace if sig != signal.SIGKILL else 10.0)
                return
            except TimeoutError:
                continue
        log.error("run %s (pid %d) survived SIGKILL", run.id, run.pid)

    # ------------------------------------------------------------------------------------------------
    # task-level control

    def sync_task_state(self, task: LiveTask) -> None:
        if not task.in_flight:
            return
        state = TaskState.PAUSED if task.paused else (TaskState.WAITING if task.questions else TaskState.RUNNING)
        if task.row.state != state:
            task.row.state = state
            self.registry.set_task_state(task.id, state)

    def pause_task(self, task: LiveTask) -> None:
        if task.paused:
            return
        task.paused = True
        now = self.clock()
        if task.turn_clock is not None:
            task.turn_clock.freeze("paused", now)
        for run in task.runs.values():
            if run.clock is not None and not run.finished:
                run.clock.freeze("paused", now)
                self.send_worker(run, RunControl(action=ControlAction.PAUSE))
        self.sync_task_state(task)
        self.publish(task, EventType.TASK_PAUSED, {"turn": task.turn})

    def continue_task(self, task: LiveTask) -> None:
        if not task.paused:
            return
        task.paused = False
        now = self.clock()
        if task.turn_clock is not None:
            task.turn_clock.unfreeze("paused", now)
        for run in task.runs.values():
            if run.clock is not None and not run.finished:
                run.clock.unfreeze("paused", now)
                self.send_worker(run, RunControl(action=ControlAction.CONTINUE))
        self.sync_task_state(task)
        self.publish(task, EventType.TASK_RESUMED, {"turn": task.turn})

    # ------------------------------------------------------------------------------------------------
    # periodic work

    async def _tick_loop(self) -> None:
        last_ping = last_wd = last_status = last_dir_check = 0.0
        last_prune = self.clock()
        wd_interval = self.notifier.watchdog_interval
        previous = self.clock()
        while True:
            await asyncio.sleep(TICK)
            now = self.clock()
            if now - previous > 1.0 + TICK:
                log.warning("the daemon's event loop was blocked for %.1fs", now - previous - TICK)
            previous = now
            try:
                self._check_timeouts(now)
                self.registry.flush_pending()  # updates a locked or full state.db refused, retried with backoff
                if now - last_prune >= EVENT_LOG_PRUNE_INTERVAL:
                    last_prune = now
                    self._prune_event_logs()
                if now - last_dir_check >= RUNTIME_DIR_CHECK:
                    last_dir_check = now
                    self._check_runtime_dir()
                if now - last_ping >= self.settings.heartbeat_interval:
                    last_ping = now
                    for run in list(self.runs.values()):
                        if run.connected and not run.exited.is_set():
                            self.send_worker(run, Ping())
                if wd_interval and now - last_wd >= wd_interval:
                    last_wd = now
                    self.notifier.watchdog()
                if self.notifier.enabled and now - last_status >= 5.0:
                    last_status = now
                    self.notifier.status(self._status_line())
            except Exception:  # the watchdog must outlive any one bad tick
                log.exception("a watchdog tick failed")

    def _prune_event_logs(self) -> None:
        retention = self.settings.event_log_retention
        if retention <= 0 or self.hub is None:
            return
        pruned = self.hub.prune(retention, busy=lambda task: task in self.tasks)
        if pruned:
            log.info("deleted the event logs of %d tasks idle for over %gs ([daemon] event_log_retention)",
                     len(pruned), retention)

    def _check_timeouts(self, now: float) -> None:
        s = self.settings
        for run in list(self.runs.values()):
            if run.finished or run.stopping:
                continue
            if run.status == RunStatus.STARTING and now - run.launched_at > HELLO_DEADLINE:
                self.stop_run(run, StopReason.PANIC, f"worker did not say hello within {HELLO_DEADLINE:.0f}s")
                continue
            clock = run.clock
            if clock is None or run.parent is None:
                continue
            if s.delegate_idle_timeout > 0 and clock.idle_for(now) > s.delegate_idle_timeout:
                self.stop_run(run, StopReason.IDLE_TIMEOUT,
                              f"no progress for {s.delegate_idle_timeout:g}s ([agent] delegate_idle_timeout)")
            elif s.delegate_total_timeout > 0 and clock.total_for(now) > s.delegate_total_timeout:
                self.stop_run(run, StopReason.TOTAL_TIMEOUT,
                              f"ran longer than {s.delegate_total_timeout:g}s ([agent] delegate_total_timeout)")
        if s.task_timeout > 0:
            for task in list(self.tasks.values()):
                root = task.root
                if (task.in_flight and root is not None and not root.stopping and task.turn_clock is not None
                        and task.turn_clock.total_for(now) > s.task_timeout):
                    self.stop_run(root, StopReason.TOTAL_TIMEOUT,
                                  f"the task ran longer than {s.task_timeout:g}s (task_timeout)")

    def _status_line(self) -> str:
        running = sum(1 for t in self.tasks.values() if t.in_flight)
        return f"{running} tasks running, {len(self.slots.live)} workers, {self.leases.in_use} LLM requests in flight"


def _ignore_send_error(fut: asyncio.Future[Any]) -> None:
    if not fut.cancelled():
        fut.exception()  # retrieved, so asyncio does not report it as never retrieved


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def _path_stamp(path: Path) -> tuple[int, int] | None:
    """Which file a path names (device, inode); None when nothing is there."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def _file_stamp(path: Path) -> tuple[int, int, int] | None:
    """What tells a changed file from the one read before (None: no file)."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)
