"""run_bash with real bash processes: output, cap, timeout, background mode, process groups, heartbeats."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import psutil

from yagent.workers.tools import ToolBatch, ToolCall, build_surface, shell

from .doubles import call_tool, make_ctx
from .signals import FifoLine, wait_terminated


def test_runs_bash_and_reports_output_and_exit_code(project: Path, tmp_path: Path) -> None:
    (project / "sub").mkdir()
    ctx = make_ctx(project, tmp_path)
    result = call_tool(ctx, "run_bash", {"command": "pwd; echo out; echo err >&2; exit 3", "cwd": "sub"})
    lines = result.content.split("\n")
    assert lines[:4] == ["$ pwd; echo out; echo err >&2; exit 3", str(project / "sub"), "out", "err"]
    assert lines[-1].startswith("[exit code 3, ")
    assert not result.is_error and result.data["exit_code"] == 3
    assert Path(result.data["output_file"]).is_relative_to(tmp_path / "scratch")


def test_output_over_the_cap_keeps_head_and_tail_and_the_full_file(project: Path, tmp_path: Path) -> None:
    result = call_tool(make_ctx(project, tmp_path), "run_bash", {"command": "seq 1 40000"})
    full = subprocess.run(["seq", "1", "40000"], capture_output=True, text=True, check=True).stdout
    assert Path(result.data["output_file"]).read_text() == full
    assert result.data["output_bytes"] == len(full) > 20_000
    assert result.content.startswith("$ seq 1 40000\n1\n2\n3\n")
    assert "39999\n40000\n" in result.content and "bytes omitted" in result.content
    assert len(result.content) < 21_000


def test_timeout_kills_the_whole_process_group(project: Path, tmp_path: Path) -> None:
    fifo = FifoLine(tmp_path / "pids")
    try:
        command = f"sleep 300 & echo $$ $! > {fifo.path}; wait"
        result = call_tool(make_ctx(project, tmp_path), "run_bash", {"command": command, "timeout": 1})
        pids = [int(p) for p in fifo.read_line().split()]
    finally:
        fifo.close()
    assert result.is_error and "timed out after 1 s" in result.content and result.data["timed_out"]
    assert wait_terminated(pids) == []


def test_background_returns_at_once_and_kill_all_ends_the_group(project: Path, tmp_path: Path) -> None:
    ctx = make_ctx(project, tmp_path)
    fifo = FifoLine(tmp_path / "pids")
    try:
        command = f"sleep 300 & echo $$ $! > {fifo.path}; echo started; wait"
        result = call_tool(ctx, "run_bash", {"command": command, "is_background": True})
        assert not result.is_error and result.data["background"]
        leader, child = (int(p) for p in fifo.read_line().split())
    finally:
        fifo.close()
    assert leader == result.data["pid"] and os.getpgid(child) == leader
    assert leader in ctx.processes.groups()
    assert psutil.Process(child).status() != psutil.STATUS_ZOMBIE
    assert ctx.processes.kill_all() == [leader]
    assert wait_terminated([leader, child]) == []
    assert not [p for p in psutil.process_iter() if _in_group(p, leader)]
    assert ctx.processes.groups() == {}


def _in_group(proc: psutil.Process, pgid: int) -> bool:
    try:
        return os.getpgid(proc.pid) == pgid and proc.status() != psutil.STATUS_ZOMBIE
    except (ProcessLookupError, psutil.Error):
        return False


def test_children_left_by_a_finished_command_die_with_the_run(project: Path, tmp_path: Path) -> None:
    ctx = make_ctx(project, tmp_path)
    result = call_tool(ctx, "run_bash", {"command": "sleep 300 & echo $!"})
    child = int(result.content.split("\n")[1])
    assert "keep running until the run ends" in result.content
    assert psutil.Process(child).status() != psutil.STATUS_ZOMBIE
    ctx.processes.kill_all()
    assert wait_terminated([child]) == []


def test_heartbeat_beats_while_a_command_runs(project: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "beat"
    os.mkfifo(fifo)
    beats: list[int] = []

    def heartbeat() -> None:
        beats.append(1)
        try:  # release the command once it is waiting on the pipe
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            return
        os.write(fd, b"beat\n")
        os.close(fd)

    ctx = make_ctx(project, tmp_path, heartbeat=heartbeat, heartbeat_interval=0.05)
    result = call_tool(ctx, "run_bash", {"command": f"read line < {fifo}; echo got $line", "timeout": 20})
    assert "got beat" in result.content and beats


def test_cancelling_the_batch_kills_a_running_command(project: Path, tmp_path: Path) -> None:
    ctx = make_ctx(project, tmp_path)
    fifo = FifoLine(tmp_path / "pids")

    async def scenario() -> tuple[list[int], ToolBatch]:
        command = f"sleep 300 & echo $$ $! > {fifo.path}; wait"
        batch = ToolBatch(build_surface("coding"), [ToolCall("c1", "run_bash", {"command": command})], ctx)
        task = asyncio.create_task(batch.run())
        line = await asyncio.to_thread(fifo.read_line)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        return [int(p) for p in line.split()], batch

    try:
        pids, batch = asyncio.run(scenario())
    finally:
        fifo.close()
    [result] = batch.results()
    assert result.is_error and result.content.startswith("Cancelled:") and result.call_id == "c1"
    assert wait_terminated(pids) == []
    assert ctx.processes.groups() == {}


def test_missing_working_directory_is_an_error(project: Path, tmp_path: Path) -> None:
    result = call_tool(make_ctx(project, tmp_path), "run_bash", {"command": "true", "cwd": "nope"})
    assert result.is_error and "does not exist" in result.content


def test_cancelling_while_the_command_is_awaited_kills_it(project: Path, tmp_path: Path) -> None:
    fifo = FifoLine(tmp_path / "pids")

    async def scenario() -> ToolBatch:
        waiting = asyncio.Event()  # the heartbeat only beats from inside the wait loop
        ctx = make_ctx(project, tmp_path, heartbeat=waiting.set, heartbeat_interval=0.01)
        command = f"sleep 300 & echo $$ $! > {fifo.path}; wait"
        batch = ToolBatch(build_surface("devops"), [ToolCall("c1", "run_bash", {"command": command})], ctx)
        task = asyncio.create_task(batch.run())
        await asyncio.wait_for(waiting.wait(), 10)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        assert ctx.processes.groups() == {}
        return batch

    try:
        batch = asyncio.run(scenario())
        pids = [int(p) for p in fifo.read_line().split()]
    finally:
        fifo.close()
    assert batch.results()[0].content.startswith("Cancelled:")
    assert wait_terminated(pids) == []


def test_output_cap_never_splits_a_multibyte_character(project: Path, tmp_path: Path) -> None:
    ctx = make_ctx(project, tmp_path)
    # One ASCII byte before or after 20,000 two-byte characters puts the head cut, then the tail cut, mid-character.
    for text in ("'x' + 'é' * 20000", "'é' * 20000 + 'x'"):
        result = call_tool(ctx, "run_bash", {"command": f'python3 -c "import sys; sys.stdout.write({text})"'})
        assert "bytes omitted" in result.content and result.data["output_bytes"] == 40_001
        assert "\ufffd" not in result.content
        omitted = int(result.content.split("[... ", 1)[1].split(" ", 1)[0])
        shown = result.content.split("\n", 1)[1].rsplit("\n[exit code", 1)[0]
        head, tail = shown.split("\n[... ", 1)[0], shown.split(" ...]\n", 1)[1]
        assert len(head.encode()) + omitted + len(tail.encode()) == 40_001


def test_a_command_reading_stdin_gets_end_of_file_at_once(project: Path, tmp_path: Path) -> None:
    command = "cat; read line; echo rc=$?"
    result = call_tool(make_ctx(project, tmp_path), "run_bash", {"command": command, "timeout": 60})
    assert not result.data["timed_out"] and "rc=1" in result.content


def test_the_model_sees_output_as_a_terminal_shows_it_and_the_file_keeps_the_bytes(
    project: Path, tmp_path: Path
) -> None:
    command = r"printf '\033[1;31mred\033[0m\n50%%\r100%%\nA\000B\a\n\033]0;title\a' && echo done"
    result = call_tool(make_ctx(project, tmp_path), "run_bash", {"command": command})
    assert not result.is_error
    shown = result.content.split("\n", 1)[1]  # after the `$ command` line
    assert shown.startswith("red\n100%\nA\ufffdB\ufffd\ndone\n")
    assert not any(ch in shown for ch in "\x1b\x00\x07\r")
    raw = Path(result.data["output_file"]).read_bytes()
    assert b"\x1b[1;31m" in raw and b"A\x00B" in raw and b"50%\r100%" in raw


def test_a_run_bash_dir_planted_as_a_link_is_refused_and_its_target_left_alone(project: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"  # outside the run's sandbox: a confined run could plant the link, not write here
    elsewhere.mkdir()
    (elsewhere / "doc0.md").write_text("precious\n")
    link = tmp_path / "scratch" / "run_bash"
    link.parent.mkdir()
    link.symlink_to(elsewhere, target_is_directory=True)
    result = call_tool(make_ctx(project, tmp_path), "run_bash", {"command": "echo out"})
    assert result.is_error and f"{link} is a symbolic link" in result.content and "remove it" in result.content
    assert [p.name for p in elsewhere.iterdir()] == ["doc0.md"] and (elsewhere / "doc0.md").read_text() == "precious\n"


def test_an_output_file_swapped_for_a_link_or_a_pipe_by_its_command_is_not_read(project: Path, tmp_path: Path) -> None:
    (project / "secret.txt").write_text("the secret\n")  # stands for a file the worker may read, the command not
    ctx = make_ctx(project, tmp_path)
    for swap, said in (('ln -s "$PWD/secret.txt"', "is a symbolic link"), ("mkfifo", "is a named pipe")):
        command = f'out=$(readlink -f /dev/stderr); rm "$out"; {swap} "$out"; echo done'
        result = call_tool(ctx, "run_bash", {"command": command})
        assert not result.is_error and result.data["exit_code"] == 0 and result.data["output_bytes"] == 0
        assert "the secret" not in result.content and said in result.content, result.content


def test_a_pipe_planted_at_the_output_name_is_refused_not_waited_on(project: Path, tmp_path: Path,
                                                                    monkeypatch) -> None:
    monkeypatch.setattr(shell, "time", SimpleNamespace(monotonic=time.monotonic, monotonic_ns=lambda: 7))
    logs = tmp_path / "scratch" / "run_bash"
    logs.mkdir(parents=True)
    os.mkfifo(logs / "c1-7.log")  # the name the call's output would take; no reader ever comes
    result = call_tool(make_ctx(project, tmp_path), "run_bash", {"command": "echo out"})
    assert result.is_error and f"{logs / 'c1-7.log'} is a named pipe" in result.content


def test_a_command_that_swaps_the_output_directory_for_a_link_still_has_its_own_output_read(
        project: Path, tmp_path: Path, monkeypatch) -> None:
    # A command (or one it left running) may swap `run_bash/` for a link while the call runs: the output is read
    # through a descriptor of the directory the call opened, never by its name again.
    monkeypatch.setattr(shell, "time", SimpleNamespace(monotonic=time.monotonic, monotonic_ns=lambda: 7))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "c1-7.log").write_text("the secret\n")  # what the name leads to once the link is in place
    command = (f'd=$(dirname "$(readlink /proc/$$/fd/1)"); mv "$d" "$d.moved"; '
               f'ln -s "{elsewhere}" "$d"; echo kept')
    result = call_tool(make_ctx(project, tmp_path), "run_bash", {"command": command})
    assert not result.is_error and "kept" in result.content and "the secret" not in result.content, result.content
    assert (tmp_path / "scratch" / "run_bash").is_symlink() and (elsewhere / "c1-7.log").read_text() == "the secret\n"
