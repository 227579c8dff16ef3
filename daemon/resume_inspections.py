"""Resume inspections: what `continue` would do with each interrupted delegation of a stopped turn, asked of a
short process the daemon starts for the task (`workers/resume_inspection.py`), since the daemon reads no
rollout.

Each inspection is started from the forkserver off the event loop, confined by itself to reading the task's
state and the project, and has `DEADLINE` seconds once started (its start may take `START_LIMIT`) to send one
report of at most `MAX_REPORT_BYTES` through its pipe; at most `MAX_AT_ONCE` run together. One that dies, hangs,
sends garbage or too much is killed and its task gets a line saying it could not be inspected and why. Reports
are kept only until the request that asked for them is answered.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import stat
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path

from yagent.ipc.config import Settings
from yagent.ipc.confinement import ConfinementSpec
from yagent.ipc.errors import ProtocolError
from yagent.ipc.messages import ResumeInspectionReport, ResumeInspectionSpec
from yagent.ipc.provider_config import LLMConfig
from yagent.ipc.records import decode
from yagent.ipc.state_layout import task_dir, tasks_dir

from .job_process import EXIT_GRACE, JobProcess
from .launcher import Launcher, RunHandle
from .registry import TaskRow, TurnRow
from .run_confinement import why_unconfined

__all__ = ["DEADLINE", "MAX_AT_ONCE", "MAX_REPORT_BYTES", "Inspection", "inspect_stopped_turns"]

log = logging.getLogger(__name__)

MAX_AT_ONCE = 4  # inspections running together
DEADLINE = 5.0  # seconds one inspection may take once its process has started
START_LIMIT = 30.0  # seconds its start from the forkserver may take (the preload after a daemon start)
MAX_REPORT_BYTES = 1 << 20  # a report is a few lines per interrupted call


@dataclass(frozen=True, slots=True)
class Inspection:
    """One stopped turn to inspect."""

    row: TaskRow
    stopped: TurnRow


async def inspect_stopped_turns(launcher: Launcher, settings: Settings, *, home: Path, runtime_dir: Path, abi: int,
                                targets: list[Inspection], gate: asyncio.Semaphore, deadline: float = DEADLINE
                                ) -> dict[str, ResumeInspectionReport | str]:
    """Each target's report, or why it could not be inspected, by task id; `gate` holds how many run at once
    (`MAX_AT_ONCE` per daemon)."""

    async def one(target: Inspection) -> tuple[str, ResumeInspectionReport | str]:
        async with gate:
            try:
                got = await _inspect(launcher, settings, home=home, runtime_dir=runtime_dir, abi=abi, target=target,
                                     deadline=deadline)
            except Exception as exc:  # a request must get its answer whatever one inspection did
                log.exception("resume inspection of task %s failed", target.row.id)
                got = f"yagentd failed to inspect it ({type(exc).__name__}: {exc}); see the daemon log"
            return target.row.id, got

    return dict(await asyncio.gather(*(one(t) for t in targets)))


def _spec_and_confinement(settings: Settings, home: Path, runtime_dir: Path, abi: int, target: Inspection
                          ) -> tuple[ResumeInspectionSpec, ConfinementSpec]:
    row, stopped = target.row, target.stopped
    # No provider table: the inspection calls no model, so it holds no key.
    run = dataclasses.replace(settings.run_settings, llm=LLMConfig())
    spec = ResumeInspectionSpec(task=row.id, home=str(home), project_root=row.project_path,
                                stopped_run=stopped.root_run, agent=stopped.agent or "director", yolo=stopped.yolo,
                                settings=run)
    _writable, deny = settings.sandbox.expanded(str(Path.home()))
    confinement = ConfinementSpec(
        abi=abi, agent="inspect", project_root=row.project_path, home=str(home), runtime_dir=str(runtime_dir),
        task_dir=str(task_dir(home, row.id)), scratch_dir="", unconfined=why_unconfined(settings, "none", abi),
        required=settings.sandbox.required, deny_read=deny)
    return spec, confinement


async def _inspect(launcher: Launcher, settings: Settings, *, home: Path, runtime_dir: Path, abi: int,
                   target: Inspection, deadline: float) -> ResumeInspectionReport | str:
    spec, confinement = _spec_and_confinement(settings, home, runtime_dir, abi, target)
    if confinement.unconfined is not None and confinement.required:
        return ("[sandbox] required = true and this kernel cannot confine the inspection (Landlock is missing); "
                "`continue` still resumes the task")
    loop = asyncio.get_running_loop()
    started = asyncio.Event()
    process = JobProcess(on_started=lambda: loop.call_soon_threadsafe(started.set))
    # The whole exchange waits in a thread (the forkserver's answer, the pipe); the loop only keeps the time.
    work = asyncio.ensure_future(asyncio.to_thread(_run_blocking, launcher, spec, confinement, process))
    work.add_done_callback(_retrieved)
    waiting = asyncio.ensure_future(started.wait())
    try:
        # Its start may wait on the forkserver's preload (a daemon just started, a busy machine): not its time.
        async with asyncio.timeout(START_LIMIT):
            await asyncio.wait({work, waiting}, return_when=asyncio.FIRST_COMPLETED)
    except TimeoutError:
        process.abandon()
        return (f"its process did not start within {START_LIMIT:g}s (yagentd's worker starter is busy); try "
                "`yagent resume` again in a moment")
    finally:
        waiting.cancel()
    try:
        async with asyncio.timeout(deadline):
            return await asyncio.shield(work)
    except TimeoutError:
        process.abandon()
        return (f"it did not report within {deadline:g}s of its start and was stopped; try `yagent resume` again "
                "when the machine is less busy")
    finally:
        process.abandon()  # cancelled with the request (daemon stop): the process goes too


def _retrieved(work: asyncio.Future) -> None:
    if not work.cancelled() and work.exception() is not None:
        log.error("a resume inspection's thread failed", exc_info=work.exception())


def _run_blocking(launcher: Launcher, spec: ResumeInspectionSpec, confinement: ConfinementSpec, process: JobProcess
                  ) -> ResumeInspectionReport | str:
    refusal = _task_dir_refusal(Path(spec.home), spec.task)
    if refusal:
        return refusal
    try:
        handle, reader = launcher.launch_inspection(spec.task, spec, confinement=confinement)
    except (OSError, ValueError, NotImplementedError) as exc:
        return f"its process could not be started ({type(exc).__name__}: {exc})"
    try:
        if not process.started(handle):
            return "it was given up on before it started"
        return _report(reader, handle)
    finally:
        process.finish(handle, reader)


def _task_dir_refusal(home: Path, task: str) -> str:
    """Why the task's directory is not one to hand an inspection ("" when it is): a link is never followed."""
    where = task_dir(home, task)
    for path in (tasks_dir(home), where):
        try:
            mode = os.lstat(path).st_mode
        except OSError as exc:
            return f"{path} cannot be looked at ({exc.strerror}); nothing was read"
        if not stat.S_ISDIR(mode):
            what = "a symbolic link" if stat.S_ISLNK(mode) else "not a directory"
            return (f"{path} is {what}, not the directory yagent made; nothing was read. Put the task's own "
                    "directory back to resume it")
    return ""


def _report(reader: Connection, handle: RunHandle) -> ResumeInspectionReport | str:
    try:
        frame = reader.recv_bytes(MAX_REPORT_BYTES)
    except EOFError:
        code = handle.exitcode() if wait([handle.sentinel], timeout=EXIT_GRACE) else None
        how = f"exit status {code}" if code is not None else "it closed its pipe"
        return f"its process ended without a report ({how})"
    except OSError as exc:  # over the cap: the pipe says so and the rest is never read
        return f"its report was refused ({exc}; at most {MAX_REPORT_BYTES} bytes are read)"
    try:
        report = decode(frame)
    except ProtocolError as exc:
        return f"its report could not be read ({exc})"
    if not isinstance(report, ResumeInspectionReport):
        return f"it sent a {report.kind} message instead of its report"
    return report
