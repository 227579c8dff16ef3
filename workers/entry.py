"""The worker process entry point: the function the forkserver runs for every run.

The worker puts itself in its own process group (so the daemon can signal its whole tree), asks the
kernel for SIGTERM when its parent — the forkserver, which exits when the daemon dies — goes away,
marks its environment with the run id (inherited by every tool child, so orphans can be found), then
connects to the daemon and runs its agent kind until it reports a result.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import importlib
import logging
import os
import resource
import signal
import sys
import traceback

from yagent.ipc.messages import RunOutcome, RunResult
from yagent.ipc.vocabulary import RunStatus, StopReason

from .channel import DaemonChannel, DaemonLost
from .kinds import AgentOutcome, RunContext, known_kinds, resolve_kind

__all__ = ["worker_main"]

log = logging.getLogger(__name__)

RUN_ENV = "YAGENT_RUN_ID"
_PR_SET_PDEATHSIG = 1
_PR_SET_NAME = 15

# Exit codes, for the daemon's log only: the result message is what counts.
EXIT_OK = 0
EXIT_DAEMON_LOST = 3
EXIT_NO_START = 4


def _prctl(option: int, arg: int | bytes) -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(option, arg, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: heartbeat loss still ends the worker


def _become_run_process(run_id: str, agent_hint: str) -> None:
    parent = os.getppid()
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)
    _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # the parent died before the death signal was armed
        os._exit(EXIT_DAEMON_LOST)
    os.environ[RUN_ENV] = run_id
    _prctl(_PR_SET_NAME, f"yagent:{agent_hint}"[:15].encode())


def worker_main(run_id: str, workers_endpoint: str, agent_modules: tuple[str, ...] = ()) -> None:
    _become_run_process(run_id, "worker")
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s worker {run_id} %(levelname)s %(name)s: %(message)s")
    for module in agent_modules:
        importlib.import_module(module)
    # Not asyncio.run: it joins the executor's threads on the way out, and a tool thread stuck in a blocking
    # call (a read from a FIFO, a huge tree walk) would keep the worker alive for good — after its daemon is
    # gone, with nobody left to kill it. Once `_serve` returns, the result is delivered or the daemon is lost:
    # nothing left in this process is worth waiting for.
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    code = loop.run_until_complete(_serve(run_id, workers_endpoint))
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def _outcome_from_exception(exc: BaseException) -> AgentOutcome:
    tb = "".join(traceback.format_exception(exc)).strip()
    return AgentOutcome(status=RunStatus.FAILED, stop_reason=StopReason.PANIC,
                        error=f"agent raised {exc.__class__.__name__}: {exc}", data={"traceback": tb[-4000:]})


async def _serve(run_id: str, endpoint: str) -> int:
    channel = DaemonChannel(run_id, endpoint)
    try:
        spec = await channel.open()
    except (DaemonLost, Exception) as exc:
        log.error("run %s: could not start: %s", run_id, exc)
        await channel.close()
        return EXIT_NO_START
    _prctl(_PR_SET_NAME, f"yagent:{spec.agent}"[:15].encode())
    try:
        os.chdir(spec.project_root)
    except OSError as exc:
        outcome = AgentOutcome(status=RunStatus.FAILED, stop_reason=StopReason.PANIC,
                               error=f"cannot enter project directory {spec.project_root}: {exc.strerror}")
        await channel.finish(_result(outcome))
        await channel.close()
        return EXIT_OK

    kind = resolve_kind(spec.agent)
    if kind is None:
        outcome = AgentOutcome(
            status=RunStatus.FAILED, stop_reason=StopReason.PANIC,
            error=f"unknown agent kind {spec.agent!r}; this worker knows: {', '.join(known_kinds()) or 'none'}")
        await channel.finish(_result(outcome))
        await channel.close()
        return EXIT_OK

    loop = asyncio.get_running_loop()
    agent_task = loop.create_task(kind(RunContext(spec, channel)), name=f"agent-{spec.agent}")
    channel.on_cancel = lambda reason: agent_task.cancel(reason)
    if channel.cancel_reason is not None:  # the cancel arrived with the start message, before on_cancel
        agent_task.cancel(channel.cancel_reason)
    loop.add_signal_handler(signal.SIGTERM, lambda: channel.cancel("interrupted"))
    try:
        outcome = await agent_task
    except asyncio.CancelledError:
        reason = channel.cancel_reason or "cancelled"
        stop = StopReason.INTERRUPTED if reason == "interrupted" else StopReason.CANCELLED
        outcome = AgentOutcome(status=RunStatus.CANCELLED, stop_reason=stop, error=f"run {reason}")
    except Exception as exc:
        outcome = _outcome_from_exception(exc)
    loop.remove_signal_handler(signal.SIGTERM)
    delivered = await channel.finish(_result(outcome), timeout=1.0 if channel.lost else 5.0)
    await channel.close()
    if channel.lost or not delivered:
        return EXIT_DAEMON_LOST
    return EXIT_OK


def _result(outcome: AgentOutcome) -> RunResult:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    data = dict(outcome.data)
    handoff = data.pop("handoff", None)
    try:
        status, stop = RunStatus(outcome.status), StopReason(outcome.stop_reason)
    except ValueError:
        status, stop = RunStatus.FAILED, StopReason.UNACCOUNTED
    return RunResult(outcome=RunOutcome(
        status=status, stop_reason=stop, output=outcome.output, error=outcome.error,
        handoff=handoff if isinstance(handoff, dict) else None, steps=int(data.pop("steps", 0) or 0),
        usage=data.pop("usage", {}) or {}, cpu_seconds=round(usage.ru_utime + usage.ru_stime, 4), data=data))
