"""run_bash: one shell command per call, in its own process group, output to a file in the scratch dir.

No command blacklist: the model marks risky commands with `is_dangerous`, and the guard asks the user
for those and for any command that names a path outside the project (see WorkspaceGuard).

The working directory is opened beneath the project root once, after the check, and the command starts
in that very directory: the child changes to `/proc/self/fd/<n>` (the descriptor, passed to it) before
it execs bash. Not `os.fchdir` in a `preexec_fn`: that runs Python in a forked child of a threaded worker
(unsafe); the chdir by /proc path is done by subprocess's own C code, and a magic link is never resolved
by name again. Where /proc is missing, the checked path itself is used.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import re
import signal
import time
from pathlib import Path

from yagent.ipc.state_files import open_state_dir, open_state_file

from .. import sandbox
from .beneath import PathEscape
from .file_read import moved_away
from .limits import BASH_DEFAULT_TIMEOUT, BASH_MAX_TIMEOUT, BASH_OUTPUT_CAP
from .processes import group_alive, terminate_group
from .registry import register
from .result import ToolResult
from .spec import AuthPolicy, Effect, Invocation, ResultPaths, ToolSpec, Truncation

KILL_GRACE = 2.0  # seconds between SIGTERM and SIGKILL when a command times out or is cancelled

# Terminal escape sequences (colours, cursor moves, titles): tokens for the model, noise in its context.
_ESCAPES = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
_CONTROLS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def for_model(text: str) -> str:
    """Output as a terminal would leave it: escapes removed, `\r`-redrawn progress lines at their last state,
    other control bytes (NUL from binary output) shown as U+FFFD. The output file keeps the raw bytes."""
    text = _ESCAPES.sub("", text).replace("\r\n", "\n")
    if "\r" in text:
        text = "\n".join(line.rsplit("\r", 1)[-1] if "\r" in line.rstrip("\r") else line.rstrip("\r")
                         for line in text.split("\n"))
    return _CONTROLS.sub("\ufffd", text)


def read_capped(path: Path, cap: int = BASH_OUTPUT_CAP, *, dir_fd: int | None = None) -> tuple[str, int]:
    """(text, total bytes) of a command's output: all of it under `cap`, else its head and tail. With `dir_fd` (its
    directory, opened), the file is opened by its name in that directory."""
    # The command may have put a link or a pipe in its output file's place: refused, never followed or waited on.
    name = path.name if dir_fd is not None else path
    with open(open_state_file(name, os.O_RDONLY, dir_fd=dir_fd, shown=path), "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size <= cap:
            return fh.read().decode("utf-8", errors="replace"), size
        head_len = cap // 3
        head = fh.read(head_len)
        fh.seek(size - (cap - head_len))
        tail = fh.read()
    # Cut on character boundaries: a UTF-8 sequence split by the cap would show up as U+FFFD noise.
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    head_text = decoder.decode(head, final=False)
    head_len = len(head) - len(decoder.getstate()[0])  # the bytes of an incomplete last character are held back
    skip = 0
    while skip < min(3, len(tail)) and 0x80 <= tail[skip] <= 0xBF:  # continuation bytes of a cut character
        skip += 1
    tail = tail[skip:]
    omitted = size - head_len - len(tail)
    marker = (
        f"\n[... {omitted} bytes omitted; the full output is in {path}: read it with read_file "
        "offset/limit or search it with search_by_regex ...]\n"
    )
    return head_text + marker + tail.decode("utf-8", errors="replace"), size


_FD_DIR = Path("/proc/self/fd")


class _MissingDirectory(Exception):
    """The working directory is gone (or is no longer a directory) by the time the command starts."""


async def _spawn(inv: Invocation, output: Path, logs: int) -> asyncio.subprocess.Process:
    files = inv.ctx.guard.files
    try:
        cwd_fd = files.open(inv.path("cwd"), os.O_RDONLY | os.O_DIRECTORY)
    except (FileNotFoundError, NotADirectoryError) as exc:
        raise _MissingDirectory from exc
    by_descriptor = _FD_DIR.is_dir()
    try:
        # The command writes the scratch directory: a link or a pipe planted at the name is refused, not followed.
        with open(open_state_file(output.name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, dir_fd=logs, shown=output),
                  "wb") as out:
            return await asyncio.create_subprocess_exec(
                # Through the sandbox's exec helper when the worker is confined: the command's own, stricter domain.
                *sandbox.shell_argv(str(inv.args["command"])),
                cwd=_FD_DIR / str(cwd_fd) if by_descriptor else inv.path("cwd"),
                pass_fds=(cwd_fd,) if by_descriptor else (),
                env=sandbox.shell_env(),
                umask=files.umask,  # the user's, not the worker's private 077: what commands make is the user's
                stdin=asyncio.subprocess.DEVNULL,
                stdout=out,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,  # own session and process group: one signal reaches every descendant
            )
    finally:
        os.close(cwd_fd)


async def _start(inv: Invocation, output: Path, logs: int) -> asyncio.subprocess.Process:
    """Spawn and register the command; a cancellation mid-spawn still stops the process it started."""
    spawning = asyncio.ensure_future(_spawn(inv, output, logs))
    try:
        proc = await asyncio.shield(spawning)
    except asyncio.CancelledError:
        # bash can already be running when the cancellation lands; it must not escape unregistered.
        with contextlib.suppress(OSError):
            await _stop(await spawning)
        raise
    inv.ctx.processes.add(proc.pid, str(inv.args["command"]))
    return proc


async def _stop(proc: asyncio.subprocess.Process) -> None:
    terminate_group(proc.pid, signal.SIGTERM)
    try:
        async with asyncio.timeout(KILL_GRACE):
            await asyncio.shield(proc.wait())
    except TimeoutError:
        pass
    terminate_group(proc.pid, signal.SIGKILL)  # also takes down children that outlived the leader
    with contextlib.suppress(ProcessLookupError):
        proc.kill()  # the leader itself, should its group be gone already
    await proc.wait()


async def run_bash(inv: Invocation) -> ToolResult:
    ctx = inv.ctx
    command = str(inv.args["command"])
    cwd = inv.path("cwd")
    if not cwd.is_dir():
        return ToolResult.error(f"working directory {inv.display(cwd)} does not exist.")
    # The commands write the scratch directory, one left running among them: `run_bash` may be swapped for a link
    # to a directory outside it at any time, so its files are opened through a descriptor of the directory itself.
    try:
        logs = open_state_dir(ctx.scratch / "run_bash")
    except OSError as exc:
        return ToolResult.error(f"could not keep the command's output: {exc.strerror or exc}")
    try:
        return await _run_bash(inv, command, cwd, logs, ctx.scratch / "run_bash")
    finally:
        os.close(logs)


async def _run_bash(inv: Invocation, command: str, cwd: Path, logs: int, logs_path: Path) -> ToolResult:
    ctx = inv.ctx
    stem = re.sub(r"[^A-Za-z0-9_-]", "_", inv.call_id or "call")
    output = logs_path / f"{stem}-{time.monotonic_ns()}.log"
    try:
        proc = await _start(inv, output, logs)
    except PathEscape:
        return moved_away(inv, cwd)
    except _MissingDirectory:
        return ToolResult.error(f"working directory {inv.display(cwd)} does not exist.")
    except OSError as exc:
        return ToolResult.error(f"could not start bash: {exc}")
    if inv.args.get("is_background", False):
        return ToolResult.ok(
            f"Started in the background (pid {proc.pid}). Output goes to {output}; read it with read_file. "
            "The process is stopped when this run ends.",
            data={"pid": proc.pid, "output_file": str(output), "background": True},
        )
    timeout = min(max(1, int(inv.args.get("timeout", BASH_DEFAULT_TIMEOUT))), BASH_MAX_TIMEOUT)
    started = time.monotonic()
    timed_out = False
    try:
        timed_out = not await _wait_with_heartbeat(proc, timeout, inv)
        if timed_out:
            await _stop(proc)
    except BaseException:  # cancelled with the run (or failed): the command must not outlive the call
        await asyncio.shield(_stop(proc))
        ctx.processes.discard(proc.pid)
        raise
    elapsed = time.monotonic() - started
    # Children the command left running (`server &`) stay registered so the run's kill_all() ends them.
    lingering = not timed_out and await asyncio.to_thread(group_alive, proc.pid)
    if not lingering:
        ctx.processes.discard(proc.pid)
    try:
        text, size = read_capped(output, dir_fd=logs)
    except OSError as exc:
        text, size = f"[its output cannot be read: {exc.strerror or exc}]", 0
    text = for_model(text)
    data = {"exit_code": proc.returncode, "output_file": str(output), "output_bytes": size, "timed_out": timed_out}
    if timed_out:
        return ToolResult.error(
            f"$ {command}\n{text}\n[timed out after {timeout} s; the command and its children were killed. "
            "Raise `timeout`, or run it with is_background=true and read its output file.]",
            data=data,
        )
    note = "; processes it started in the background keep running until the run ends" if lingering else ""
    return ToolResult.ok(f"$ {command}\n{text}\n[exit code {proc.returncode}, {elapsed:.1f} s{note}]", data=data)


async def _wait_with_heartbeat(proc: asyncio.subprocess.Process, timeout: float, inv: Invocation) -> bool:
    """True when the command exited within `timeout`; beats the heartbeat while it runs."""
    waiter = asyncio.ensure_future(proc.wait())
    deadline = time.monotonic() + timeout
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            done, _ = await asyncio.wait({waiter}, timeout=min(inv.ctx.heartbeat_interval, remaining))
            if done:
                return True
            inv.ctx.heartbeat()
    finally:
        if not waiter.done():
            waiter.cancel()
        waiter.add_done_callback(lambda f: f.cancelled() or f.exception())  # read, so none goes unseen


register(
    ToolSpec(
        name="run_bash",
        description=(
            "Run a bash command in the project (or in `cwd`) and get its combined stdout and stderr and exit "
            "code. Long output is cut to its head and tail; the full text stays in a file. Set "
            "is_background=true for servers and watchers: the call returns at once with the output file. "
            "Set is_dangerous=true for anything destructive or hard to undo (deleting, force-pushing, "
            "installing system-wide): the user is asked first. Commands that name paths outside the project "
            "also need the user's approval."
        ),
        parameters={
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The bash command line."},
                "cwd": {"type": "string", "description": "Working directory. Default: the project root."},
                "timeout": {"type": "integer", "description": "Seconds before the command is killed (1-1800, "
                            "default 120). Ignored in background mode."},
                "is_background": {"type": "boolean", "description": "Start it and return at once. Default false."},
                "is_dangerous": {"type": "boolean", "description": "The command is destructive or hard to undo."},
            },
            "required": ["command"],
            "additionalProperties": False,
        },
        effects=Effect.SHELL,
        executor=run_bash,
        mutates=True,
        serial=True,
        auth=AuthPolicy.DANGEROUS,
        path_params=("cwd",),
        command_params=("command",),
        danger_flag="is_dangerous",
        truncation=Truncation.EARLY,
        result_paths=ResultPaths.NONE,
        page_hint="the full output is in the output file named above",
    )
)
