"""The worker process entry point: the function the forkserver runs for every run.

The worker first takes its run's secret from the pipe the launcher handed it (then closes the pipe) and makes
itself non-dumpable, so no other process of the user can read the secret out of its memory. It then lets go of
the forkserver's liveness pipe (so the forkserver exits as soon as the
daemon dies), puts itself in its own process group (so the daemon can signal its whole tree), asks the
kernel for SIGTERM when its parent — the forkserver — goes away, marks its environment with the run id
(inherited by every tool child, so orphans can be found), then connects to the daemon and runs its agent
kind until it reports a result. It watches its own pipe to the daemon (`daemon_watch`): when yagentd
dies, the run wraps up at once — cancelled, its tools stopped, its result and memory written — and exits.

A warm worker (`warm_worker_main`) is forked before any run wants it and does only what belongs to no run: it lets
go of the forkserver's pipe, turns non-dumpable, takes its own process group and the parent-death signal, copies the
pages earlier runs copied on write (`page_warmth.py`: their faults would otherwise fall in the run's start), makes
its channel's ZeroMQ context and its provider client (objects without a thread or a socket until used) and fills a
Landlock ruleset with the read rules every run shares (not enforced: no confinement yet), then blocks on its
assignment pipe — no thread, no secret, no socket, no confinement. The run's id, endpoint and confinement arrive on
that pipe, followed by its secret; from there on it is started as a cold worker is, with what it made ahead.
Its pipe closing (the daemon reaped it, or died) or its pipe to the daemon closing ends it.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import dataclasses
import gc
import importlib
import logging
import os
import reprlib
import resource
import select
import signal
import sys
import traceback
from collections.abc import Awaitable, Callable, Mapping
from multiprocessing import forkserver
from multiprocessing.connection import Connection

import zmq.asyncio

from yagent.ipc.confinement import ConfinementSpec
from yagent.ipc.errors import MalformedMessage
from yagent.ipc.http_request_logs import quiet_request_lines
from yagent.ipc.messages import RunOutcome, RunResult, RunSpec
from yagent.ipc.private_files import keep_private
from yagent.ipc.vocabulary import RunStatus, StopReason

from . import sandbox
from .channel import DaemonChannel, DaemonLost
from .daemon_watch import WRAP_UP_GRACE, DaemonWatch, daemon_liveness_fd
from .kinds import RunContext, known_kinds, resolve_kind, works_in_model_steps
from .late_sync import LATE_SYNC
from .llm import make_client_ahead, parse_ahead
from .page_warmth import PageMap, prefault
from .term_signal import TermSignal
from .tools.processes import kill_descendants

__all__ = ["warm_worker_main", "worker_main"]

log = logging.getLogger(__name__)

RUN_ENV = "YAGENT_RUN_ID"
_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_PR_SET_NAME = 15

# Exit codes, for the daemon's log only: the result message is what counts.
EXIT_OK = 0
EXIT_DAEMON_LOST = 3
EXIT_NO_START = 4
# How long a finished run waits on its way out for its files to reach the disk (its result is already delivered).
LATE_SYNC_GRACE = 5.0  # below the 3 × [daemon] stop_grace the daemon gives a run between its result and its exit
# What a run left for after its result (closing its model clients) may take at most this long, each.
WRAP_UP_AFTER_RESULT = 1.0


def _libc_prctl() -> Callable[..., int] | None:
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None  # not Linux: heartbeat loss still ends the worker


# Resolved once, in the forkserver that imports this module: every start calls it several times.
_PRCTL = _libc_prctl()


def _prctl(option: int, arg: int | bytes) -> None:
    if _PRCTL is not None:
        _PRCTL(option, arg, 0, 0, 0)


def _take_run_secret(pipe: Connection | None, *, spec_follows: bool = False) -> tuple[bytes, RunSpec | None]:
    """The run's secret, read once from the launcher's pipe, which is then closed; b"" without one. With
    `spec_follows` (a warm worker's assignment), the run's spec comes after it (None: it did not fit the pipe, and
    comes with the start message).

    Non-dumpable first: no ptrace attach and no /proc/PID/mem (nor environ, fds...) for other processes of the
    user, so the secret and the keys in the start message stay in this process. What it costs: no core dumps
    of workers; a daemon not run as root finds a worker by its pid, never by its environment, and sees its RSS
    but not its USS (smaps is closed too). Programs the worker executes (run_bash) are dumpable again: execve
    resets the flag. A tracer that attached while the process was still dumpable stays attached, so a traced
    process leaves without reading the secret.
    """
    _prctl(_PR_SET_DUMPABLE, 0)
    if pipe is None:
        return b"", None
    tracer = _tracer()
    if tracer:
        pipe.close()
        os.write(2, f"yagent worker {os.getpid()}: process {tracer} traces this worker; it leaves without taking "
                    "its run's secret\n".encode())
        os._exit(EXIT_NO_START)
    try:
        secret = pipe.recv_bytes(256)
    except (OSError, EOFError):  # no secret: the hello cannot prove anything and the daemon refuses the run
        pipe.close()
        return b"", None
    try:
        spec = pipe.recv() if spec_follows else None  # the daemon's launcher wrote it: trusted
    except (OSError, EOFError):  # not there after all: the start message brings it
        spec = None
    finally:
        pipe.close()
    return secret, spec if isinstance(spec, RunSpec) else None


def _tracer() -> int:
    """The pid of the process tracing this one (0: none), from /proc/self/status."""
    try:
        with open("/proc/self/status", "rb") as status:
            for line in status:
                if line.startswith(b"TracerPid:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass  # no procfs: nothing to learn here
    return 0


def _leave_the_forkserver() -> None:
    """Close the forkserver's "alive" pipe the fork handed us.

    The stdlib gives every child a copy of its write end, so the forkserver would live on while any worker
    does — and the parent-death signal below, which fires when the forkserver exits, would never come.
    """
    server = forkserver._forkserver
    fd = getattr(server, "_forkserver_alive_fd", None)  # a private of the stdlib: absent, there is nothing to do
    if fd is not None:
        server._forkserver_alive_fd = None
        with contextlib.suppress(OSError):
            os.close(fd)


def _freeze_what_was_there() -> None:
    """Leave every object this process holds now (the forkserver's preload, a warm worker's own preparations) out of
    the garbage collector's scans for the rest of the run.

    Measured without it: a Chat run's first collection of generation 1 walked those objects, 1.2–2 ms of CPU
    between its assignment and its first model request, every run, and wrote to their headers, copying pages the
    run had no other reason to touch. What is frozen is never collected: a cycle among them that becomes garbage
    stays until the run's process exits, which is soon."""
    gc.freeze()


def _become_run_process(run_id: str, agent_hint: str) -> None:
    parent = os.getppid()
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)
    _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # the parent died before the death signal was armed
        os._exit(EXIT_DAEMON_LOST)
    if run_id:  # a warm worker has none yet: it gets its mark when it gets its run
        os.environ[RUN_ENV] = run_id
    _prctl(_PR_SET_NAME, f"yagent:{agent_hint}"[:15].encode())


def _confine(confinement: ConfinementSpec | None) -> str:
    """Restrict this process as the daemon said (Landlock, no-new-privileges); "" or why the run must not go on.

    Must come before anything starts a thread (agent modules' imports, the channel's libzmq, executors): the
    kernel confines the calling thread only, and threads that exist already keep every right. A sandbox that
    was asked for and could not be applied fails the run rather than letting it go on unconfined."""
    state = sandbox.confine_worker(confinement, confinement.agent if confinement else "")
    if state is not None and state.error:
        return (f"the sandbox could not be applied ({state.error}); the run was not started. Set "
                '[sandbox] mode = "off" in config.toml (or send the turn with --full-yolo) to run unconfined')
    return ""


def worker_main(run_id: str, workers_endpoint: str, agent_modules: tuple[str, ...] = (),
                secret_pipe: Connection | None = None, confinement: ConfinementSpec | None = None) -> None:
    # Before anything else: unshare needs a single thread, and the uid map is written while still dumpable.
    git_refusal = sandbox.protect_git_dir(confinement)
    secret, _ = _take_run_secret(secret_pipe)
    _freeze_what_was_there()
    _leave_the_forkserver()
    _keep_state_private()
    _become_run_process(run_id, "worker")
    _run(run_id, workers_endpoint, agent_modules, secret, confinement, git_refusal)


def warm_worker_main(assignment: Connection, agent_modules: tuple[str, ...] = (),
                     pages: tuple[int, tuple[tuple[int, int], ...]] | None = None, learning: bool = False,
                     providers: tuple[tuple[str, str], ...] = ()) -> None:
    """A worker forked ahead of demand: wait on `assignment` for a run, then start it as `worker_main` would.

    `pages` is the daemon's page profile, (the forkserver's pid, page stretches): copied before the wait. `learning`:
    the daemon still asks runs to report their pages, so this one may be asked. `providers`: (api_format,
    api_base_url) of the daemon's configured providers, whose request addresses are parsed while it waits."""
    # While still dumpable: a non-dumpable process's page map belongs to root.
    page_map = PageMap.open() if learning else None
    _prctl(_PR_SET_DUMPABLE, 0)  # nobody may reach into it while it waits: the secret comes later
    _leave_the_forkserver()
    _keep_state_private()
    _become_run_process("", "warm")
    _log_as("")
    loop = _event_loop()  # what a start pays for and needs no run: made while waiting
    term = TermSignal(loop)  # and so is its SIGTERM wakeup (unarmed: until its run starts, SIGTERM ends it)
    context = zmq.asyncio.Context()  # so is the channel's context: its I/O threads start with its first socket
    make_client_ahead()  # and the provider client its run's engines share
    parse_ahead(providers)  # and the addresses it will most likely send its requests to
    # Pages of another forkserver (one started since) are not this memory's: they are left alone.
    prefaulted = 0
    if pages is not None and pages[0] == os.getppid():
        prefaulted = prefault(pages[1], ranges=page_map.ranges if page_map is not None else None)
    sandbox.prepare_shared_rules()  # a ruleset is no confinement until enforced: its run's rules come with it
    _freeze_what_was_there()
    if not _assigned(assignment, daemon_liveness_fd()):
        os._exit(EXIT_OK)  # reaped, or the daemon is gone: there is nothing to clean up
    try:
        # What the daemon's launcher sent: trusted. `learn`: report the pages this run makes its own.
        run_id, workers_endpoint, confinement, learn = assignment.recv()
    except (EOFError, OSError):
        os._exit(EXIT_OK)
    if page_map is not None and not learn:
        page_map.close()
        page_map = None
    if confinement is not None and confinement.git_namespace:
        _prctl(_PR_SET_DUMPABLE, 1)  # the uid map of the .git view is written while dumpable, as in a cold start
    git_refusal = sandbox.protect_git_dir(confinement)
    # Non-dumpable again, and untraced, before the secret and the spec (which holds the provider keys) are read.
    secret, spec = _take_run_secret(assignment, spec_follows=True)
    os.environ[RUN_ENV] = run_id
    _prctl(_PR_SET_NAME, b"yagent:worker")
    _run(run_id, workers_endpoint, agent_modules, secret, confinement, git_refusal, loop,
         warmth=_Warmth(prefaulted, page_map, context, term), spec=spec)


@dataclasses.dataclass
class _Warmth:
    """What a warm worker did while it waited: the pages it copied ahead, its page map when asked to learn, and the
    channel's context it made."""

    prefaulted: int = 0
    page_map: PageMap | None = None
    context: zmq.asyncio.Context | None = None  # the channel's, made while it waited (still without a thread)
    term: TermSignal | None = None  # its SIGTERM wakeup on its loop, made while it waited (armed at the run's start)


def _assigned(assignment: Connection, liveness_fd: int | None) -> bool:
    """Block, threadless, until the assignment pipe has something to read (True) or this worker is not wanted
    any more: its pipe or the daemon's closed (False)."""
    poller = select.poll()
    poller.register(assignment.fileno(), select.POLLIN)
    if liveness_fd is not None:
        poller.register(liveness_fd, select.POLLIN)
    ready = dict(poller.poll())
    if liveness_fd in ready:
        return False
    return bool(ready.get(assignment.fileno(), 0) & select.POLLIN)


def _log_as(run_id: str) -> None:
    """Log to stderr (the daemon's log) with the run's id on every line; a warm worker has none yet."""
    if not logging.root.handlers:
        logging.basicConfig(level=logging.INFO)
    quiet_request_lines(logging.root.level)
    line = logging.Formatter(f"%(asctime)s worker {run_id or '(warm)'} %(levelname)s %(name)s: %(message)s")
    for handler in logging.root.handlers:
        handler.setFormatter(line)


def _event_loop() -> asyncio.AbstractEventLoop:
    # Not asyncio.run: it joins the executor's threads on the way out, and a tool thread stuck in a blocking
    # call (a read from a FIFO, a huge tree walk) would keep the worker alive for good — after its daemon is
    # gone, with nobody left to kill it. Once `_serve` returns, the result is delivered or the daemon is lost:
    # nothing left in this process is worth waiting for. A loop is descriptors, no thread: a warm worker has it.
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    return loop


def _run(run_id: str, workers_endpoint: str, agent_modules: tuple[str, ...], secret: bytes,
         confinement: ConfinementSpec | None, git_refusal: str, loop: asyncio.AbstractEventLoop | None = None,
         warmth: _Warmth | None = None, spec: RunSpec | None = None) -> None:
    # Order matters: everything that needs a right the sandbox takes away (inherited fds are kept) goes above,
    # every thread below.
    refusal = _confine(confinement) or git_refusal
    _log_as(run_id)
    for module in agent_modules:
        importlib.import_module(module)
    if loop is None:
        loop = _event_loop()
    code = loop.run_until_complete(_serve(run_id, workers_endpoint, liveness_fd=daemon_liveness_fd(),
                                          give_up=_abandon_run, secret=secret, refusal=refusal,
                                          warmth=warmth, spec=spec))
    if code == EXIT_DAEMON_LOST:
        kill_descendants()  # with yagentd gone nobody else sweeps what the run's tools left running
    # After the result went out: the files the run wrote are made durable on its way out, not before its result.
    if not LATE_SYNC.wait(LATE_SYNC_GRACE):
        log.warning("the run's files were not all synced to disk within %.0fs; leaving anyway", LATE_SYNC_GRACE)
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def _keep_state_private() -> None:
    """Umask 077 for what the run writes under $YAGENT_HOME; file tools and shell commands use the user's own."""
    keep_private()


def _abandon_run() -> None:
    """The run is stuck past its wrap-up time with its daemon gone: leave, taking its tools along.

    Called from the watch thread while the event loop is stuck: nothing here may wait for the loop or a lock
    it might hold (logging's included), so the last word goes straight to stderr.
    """
    kill_descendants()
    with contextlib.suppress(OSError):
        os.write(2, f"worker {os.getpid()}: the run did not wrap up within {WRAP_UP_GRACE:.0f}s of yagentd's "
                    "exit; leaving without it\n".encode())
    os._exit(EXIT_DAEMON_LOST)


def _outcome_from_exception(exc: BaseException) -> RunOutcome:
    tb = "".join(traceback.format_exception(exc)).strip()
    return RunOutcome(status=RunStatus.FAILED, stop_reason=StopReason.PANIC,
                        error=f"agent raised {exc.__class__.__name__}: {exc}", data={"traceback": tb[-4000:]})


async def _serve(run_id: str, endpoint: str, *, liveness_fd: int | None = None,
                 give_up: Callable[[], None] | None = None, secret: bytes = b"",
                 refusal: str = "", warmth: _Warmth | None = None, spec: RunSpec | None = None) -> int:
    """Run one agent kind for the daemon at `endpoint`; `liveness_fd` is the read end of the run's pipe to the
    daemon (EOF = the daemon is gone), `give_up` what to do if the run has not wrapped up in time after that,
    `secret` what the hello proves, `spec` the run's spec when it came with the assignment (the start message
    is then not waited for before the run is built)."""
    warmth = warmth or _Warmth()
    confinement = sandbox.current()
    channel = DaemonChannel(run_id, endpoint, context=warmth.context, owns_context=True, secret=secret,
                            prefaulted=warmth.prefaulted,
                            rules_ahead=confinement.ahead if confinement is not None else 0)
    watch = None
    if liveness_fd is not None:
        loop = asyncio.get_running_loop()

        def gone(why: str) -> None:  # from the watch thread
            with contextlib.suppress(RuntimeError):  # the loop already closed: the run is over anyway
                loop.call_soon_threadsafe(channel.daemon_lost, why)

        # Started once the hello is out: its thread's start waits for a CPU, which the daemon's answer need not.
        watch = DaemonWatch(liveness_fd, on_gone=gone, give_up=give_up)
    term = warmth.term or TermSignal(asyncio.get_running_loop())
    try:
        return await _serve_run(run_id, channel, refusal, hello_sent=watch.start if watch is not None else None,
                                page_map=warmth.page_map, spec=spec, term=term)
    finally:
        if watch is not None:
            watch.stop()
        term.close()


async def _serve_run(run_id: str, channel: DaemonChannel, refusal: str = "",
                     hello_sent: Callable[[], object] | None = None, page_map: PageMap | None = None,
                     spec: RunSpec | None = None, *, term: TermSignal) -> int:
    try:
        spec = await channel.open(hello_sent=hello_sent, spec=spec,
                                  model_loop=spec is not None and works_in_model_steps(spec.agent))
    except (DaemonLost, Exception) as exc:
        log.error("run %s: could not start: %s", run_id, exc)
        await channel.close()
        return EXIT_DAEMON_LOST if channel.lost else EXIT_NO_START
    _prctl(_PR_SET_NAME, f"yagent:{spec.agent}"[:15].encode())
    if refusal:
        await channel.finish(_result(RunOutcome(status=RunStatus.FAILED, stop_reason=StopReason.PANIC,
                                                error=refusal), spec.agent))
        await channel.close()
        return EXIT_OK
    try:
        os.chdir(spec.project_root)
    except OSError as exc:
        outcome = RunOutcome(status=RunStatus.FAILED, stop_reason=StopReason.PANIC,
                             error=f"cannot enter project directory {spec.project_root}: {exc.strerror}")
        await channel.finish(_result(outcome, spec.agent))
        await channel.close()
        return EXIT_OK

    kind = resolve_kind(spec.agent)
    if kind is None:
        outcome = RunOutcome(
            status=RunStatus.FAILED, stop_reason=StopReason.PANIC,
            error=f"unknown agent kind {spec.agent!r}; this worker knows: {', '.join(known_kinds()) or 'none'}")
        await channel.finish(_result(outcome, spec.agent))
        await channel.close()
        return EXIT_OK

    loop = asyncio.get_running_loop()
    after_result: list[Callable[[], Awaitable[None]]] = []
    agent_task = loop.create_task(kind(RunContext(spec, channel, after_result=after_result)),
                                  name=f"agent-{spec.agent}")
    channel.on_cancel = lambda reason: agent_task.cancel(reason)
    if channel.cancel_reason is not None:  # the cancel arrived with the start message, before on_cancel
        agent_task.cancel(channel.cancel_reason)
    # SIGTERM: the daemon's stop escalation (cancel once more), or the parent-death signal when the daemon, and
    # so the forkserver, died — that one comes with the daemon's loss, which has cancelled the run already.
    term.arm(lambda: channel.cancel("interrupted", again=not channel.lost))
    returned: object
    try:
        returned = await agent_task
    except asyncio.CancelledError:
        reason = channel.cancel_reason or "cancelled"
        stop = StopReason.INTERRUPTED if reason == "interrupted" else StopReason.CANCELLED
        returned = RunOutcome(status=RunStatus.CANCELLED, stop_reason=stop, error=f"run {reason}")
    except Exception as exc:
        returned = _outcome_from_exception(exc)
    if channel.failure is not None:
        returned = _channel_failed(returned, channel.failure)
    result = _result(returned, spec.agent)
    if page_map is not None:  # a few runs per daemon: the pages copied on write since the fork, for the next ones
        result = dataclasses.replace(result, page_runs=[list(r) for r in page_map.owned()], page_parent=os.getppid())
        page_map.close()
    delivered = await channel.finish(result, timeout=1.0 if channel.lost else 5.0)
    term.disarm()  # a SIGTERM now, during the wrap-up, ends the process: the result is out
    await _wrap_up(after_result)
    await channel.close()
    if channel.lost or not delivered:
        return EXIT_DAEMON_LOST
    return EXIT_OK


async def _wrap_up(after_result: list[Callable[[], Awaitable[None]]]) -> None:
    """What the run left for after its result: each bounded, and one that fails is logged, not the run's end."""
    for wrap_up in after_result:
        try:
            async with asyncio.timeout(WRAP_UP_AFTER_RESULT):
                await wrap_up()
        except Exception:
            log.exception("wrapping up after the run's result failed (%s)", getattr(wrap_up, "__qualname__", wrap_up))


def _channel_failed(returned: object, why: str) -> RunOutcome:
    """The outcome of a run whose channel to the daemon broke, keeping what the agent had to say."""
    kept = returned if isinstance(returned, RunOutcome) else RunOutcome(status=RunStatus.FAILED,
                                                                         stop_reason=StopReason.PANIC)
    return dataclasses.replace(kept, status=RunStatus.FAILED, stop_reason=StopReason.PANIC, error=_joined(
        f"the worker's channel to yagentd failed: {why}; this is a bug in yagent: the daemon's log has the "
        "worker's traceback", kept.error))


def _result(returned: object, agent: str) -> RunResult:
    """The result message for what the agent kind returned, with the worker's own CPU time."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    outcome = dataclasses.replace(_readable(returned, agent), cpu_seconds=round(usage.ru_utime + usage.ru_stime, 4))
    return RunResult(outcome=outcome)


def _readable(returned: object, agent: str) -> RunOutcome:
    """`returned` as an outcome yagentd can read and a parent can act on.

    An agent kind — most likely one from `[daemon] agent_modules` — that returns something else (a status
    string, None, its own class), a field of the wrong type, or a status that is no way to end (`running`)
    gets a FAILED run with stop reason UNACCOUNTED whose error says what was wrong, keeping every part of the
    result that could be read: never a worker crash, never a result the daemon drops as malformed.
    """
    if not isinstance(returned, RunOutcome):
        return RunOutcome(
            status=RunStatus.FAILED, stop_reason=StopReason.UNACCOUNTED, output=_text_of(returned, "output"),
            error=_joined(f"agent kind {agent!r} returned {_shown(returned)} instead of a RunOutcome "
                          "(yagent.ipc.messages.RunOutcome)", _text_of(returned, "error")))
    wire = returned.to_wire()
    try:
        outcome = RunOutcome.from_wire(wire)  # the daemon's own check; converts valid status strings to members
    except MalformedMessage as exc:
        kept = RunOutcome.read({**wire, "status": RunStatus.FAILED, "stop_reason": StopReason.UNACCOUNTED})
        return dataclasses.replace(kept, error=_joined(
            f"agent kind {agent!r} returned an outcome yagentd cannot read ({exc})", kept.error))
    if not outcome.status.finished:
        return dataclasses.replace(outcome, status=RunStatus.FAILED, stop_reason=StopReason.UNACCOUNTED, error=_joined(
            f"agent kind {agent!r} returned status {outcome.status.value!r}, which does not end a run (use "
            f"{', '.join(s.value for s in RunStatus if s.finished)})", outcome.error))
    return outcome


def _text_of(value: object, name: str) -> str:
    """A text attribute or key of an object that is not an outcome, so what it says is not lost."""
    try:
        found = value.get(name) if isinstance(value, Mapping) else getattr(value, name, None)
    except Exception:  # an object of any class: its attribute access may raise anything
        return ""
    return found if isinstance(found, str) else ""


def _shown(value: object) -> str:
    try:
        return f"{type(value).__name__} {reprlib.repr(value)}"
    except Exception:  # a __repr__ that raises
        return type(value).__name__


def _joined(*parts: str) -> str:
    return "; ".join(p for p in parts if p)
