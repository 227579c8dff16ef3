"""Private state: $YAGENT_HOME 0700 with every directory 0700 and every file 0600, for a fresh home and for an
old 0755/0644 one after a daemon start and a run; the repair at start never follows a link out of the home."""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from yagent.daemon.home_repair import repair_home
from yagent.ipc.messages import Ack, Answer, Event
from yagent.ipc.private_files import USER_UMASK_ENV, keep_private, make_private_dirs, user_umask
from yagent.ipc.vocabulary import EventType

from ..daemon_harness import DaemonProcess, arun, collect_turn, script, submit, wait_until


def modes(home: Path) -> dict[str, int]:
    """Permission bits of everything under `home` (and `home` itself), links and sockets left out."""
    found = {".": stat.S_IMODE(os.lstat(home).st_mode)}
    for dirpath, dirnames, filenames in os.walk(home):
        for name in [*dirnames, *filenames]:
            st = os.lstat(Path(dirpath) / name)
            if stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode):
                found[str((Path(dirpath) / name).relative_to(home))] = stat.S_IMODE(st.st_mode)
    return found


def open_to_others(home: Path) -> dict[str, str]:
    return {name: oct(mode) for name, mode in modes(home).items() if mode & 0o077}


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[DaemonProcess]:
    d = DaemonProcess(tmp_path)
    try:
        yield d
    finally:
        d.close()


def _one_run(d: DaemonProcess, project: Path) -> None:
    """A run whose worker also has a child make a directory and a file under the home, with default modes.

    The run asks a question after starting the child and is answered only once the file is there, so the
    run's end (which sweeps its processes) cannot come first.
    """
    made = d.home / "made-by-a-run" / "f"
    command = f"mkdir -p {made.parent} && echo x > {made}.tmp && mv {made}.tmp {made}"

    async def go() -> None:
        async with d.client() as c, d.client() as answering:
            sub = await submit(c, project, script({"emit": 3}, {"spawn": command, "keep": True},
                                                  {"ask": {"kind": "confirm", "prompt": "Written?"}}))

            async def answer(ev: Event) -> None:
                if ev.type == EventType.USER_HELP_NEEDED:
                    await asyncio.to_thread(wait_until, made.exists, 30, f"the run's child to write {made}")
                    await answering.request(Answer(id=0, task=sub.task, request_id=ev.data["request_id"],
                                                   answer={"value": "yes"}), Ack)

            await collect_turn(c, sub.task, on_event=answer)

    arun(go(), 90)


def test_a_fresh_home_is_private_after_a_daemon_start_and_a_run(daemon: DaemonProcess, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    os.chmod(daemon.home, 0o700)
    os.chmod(daemon.home / "config", 0o700)
    os.chmod(daemon.home / "config" / "config.toml", 0o600)
    daemon.start()
    _one_run(daemon, project)
    daemon.terminate()
    found = modes(daemon.home)
    assert any(name.startswith("events") and name.endswith(".log") for name in found), found
    assert "state.db" in found and "logs/yagentd.log" in found and "made-by-a-run/f" in found
    assert open_to_others(daemon.home) == {}
    assert {mode for name, mode in found.items() if (daemon.home / name).is_file()} == {0o600}
    assert {mode for name, mode in found.items() if (daemon.home / name).is_dir()} == {0o700}
    assert "private (group and other access removed" not in daemon.log_path.read_text(errors="replace")


def test_an_old_open_home_is_repaired_at_start_without_following_a_link_out(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "users-file").write_text("mine\n")
    os.chmod(outside / "users-file", 0o644)
    os.chmod(outside, 0o755)
    daemon.start()  # a first start makes the state an old install would have
    _one_run(daemon, project)
    daemon.terminate()
    opened = 0
    for dirpath, dirnames, filenames in os.walk(daemon.home):
        for name in dirnames:
            os.chmod(Path(dirpath) / name, 0o755)
            opened += 1
        for name in filenames:
            os.chmod(Path(dirpath) / name, 0o644)
            opened += 1
    os.chmod(daemon.home, 0o755)
    (daemon.home / "link-out").symlink_to(outside / "users-file")
    (daemon.home / "dir-link-out").symlink_to(outside, target_is_directory=True)
    assert len(open_to_others(daemon.home)) == opened + 1

    daemon.start()
    _one_run(daemon, project)
    daemon.terminate()
    assert open_to_others(daemon.home) == {}
    assert stat.S_IMODE(os.stat(outside / "users-file").st_mode) == 0o644  # not followed
    assert stat.S_IMODE(os.stat(outside).st_mode) == 0o755
    log = daemon.log_path.read_text(errors="replace")
    assert f"made {opened + 1} entries under {daemon.home} private" in log


def test_the_repair_walks_by_descriptor_and_changes_only_what_is_open(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "events").mkdir(parents=True)
    (home / "events" / "t.log").write_text("x")
    (home / "private.json").write_text("{}")
    os.chmod(home / "private.json", 0o600)
    os.chmod(home / "events" / "t.log", 0o640)
    os.chmod(home / "events", 0o750)
    os.chmod(home, 0o755)
    os.mkfifo(home / "a-fifo", 0o644)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f").write_text("mine")
    os.chmod(outside / "f", 0o644)
    (home / "link").symlink_to(outside / "f")
    (home / "dir-link").symlink_to(outside, target_is_directory=True)
    report = repair_home(home)
    assert (report.repaired, report.skipped, report.failed) == (3, 1, 0)
    assert modes(home) == {".": 0o700, "events": 0o700, "events/t.log": 0o600, "private.json": 0o600}
    assert stat.S_IMODE(os.stat(outside / "f").st_mode) == 0o644
    assert stat.S_IMODE(os.lstat(home / "a-fifo").st_mode) == 0o644  # never opened: it could block
    assert repair_home(home).repaired == 0  # a second walk has nothing left to do


def test_a_home_that_is_itself_a_link_is_not_walked(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (real / "f").write_text("x")
    os.chmod(real / "f", 0o644)
    (tmp_path / "home").symlink_to(real, target_is_directory=True)
    assert repair_home(tmp_path / "home").failed == 1
    assert stat.S_IMODE(os.stat(real / "f").st_mode) == 0o644


def test_keep_private_sets_077_and_remembers_the_users_umask_for_the_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(USER_UMASK_ENV, "")  # so that the value keep_private records is undone afterwards
    monkeypatch.delenv(USER_UMASK_ENV)
    previous = os.umask(0o002)
    try:
        assert keep_private() == 0o002
        assert os.umask(0o077) == 0o077 and user_umask() == 0o002
        assert keep_private() == 0o002  # a worker, inheriting 077 already, keeps the recorded value
        make_private_dirs(tmp_path / "a" / "b" / "c")
    finally:
        os.umask(previous)
    assert {oct(stat.S_IMODE(os.stat(p).st_mode)) for p in (tmp_path / "a", tmp_path / "a/b", tmp_path / "a/b/c")} \
        == {"0o700"}
