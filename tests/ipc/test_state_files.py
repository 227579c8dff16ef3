"""State-home files a run may have planted things at: links, pipes, directories and huge files are refused, each
said plainly; regular files and directories pass."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from yagent.ipc.state_files import (
    StateFileError,
    is_own_dir,
    open_state_dir,
    open_state_file,
    read_state_bytes,
    state_dir,
)


def test_a_regular_file_is_read_whole_and_a_missing_one_is_file_not_found(tmp_path: Path) -> None:
    (tmp_path / "f.json").write_bytes(b"x" * 1000)
    assert read_state_bytes(tmp_path / "f.json", 1000) == b"x" * 1000
    with pytest.raises(FileNotFoundError):
        read_state_bytes(tmp_path / "missing.json", 1000)


def test_a_link_is_never_followed_for_reading_or_writing(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("precious\n")
    link = tmp_path / "f.json"
    link.symlink_to(secret)
    with pytest.raises(StateFileError, match=r"symbolic link to .*secret.*remove it"):
        read_state_bytes(link, 1 << 20)
    with pytest.raises(StateFileError, match="symbolic link"):
        open_state_file(link, os.O_RDWR | os.O_CREAT)
    dangling = tmp_path / "g.lock"
    dangling.symlink_to(tmp_path / "made-through-the-link")
    with pytest.raises(StateFileError, match="symbolic link"):
        open_state_file(dangling, os.O_WRONLY | os.O_CREAT)
    assert secret.read_text() == "precious\n" and not (tmp_path / "made-through-the-link").exists()


def test_a_named_pipe_is_refused_at_once_for_reading_and_for_writing(tmp_path: Path) -> None:
    pipe = tmp_path / "f.json"
    os.mkfifo(pipe)  # nobody ever opens its other end: a plain open would wait for ever
    with pytest.raises(StateFileError, match="named pipe"):
        read_state_bytes(pipe, 1 << 20)
    with pytest.raises(StateFileError, match="named pipe"):
        open_state_file(pipe, os.O_WRONLY | os.O_APPEND)


def test_a_directory_where_a_file_belongs_is_refused(tmp_path: Path) -> None:
    (tmp_path / "f.json").mkdir()
    with pytest.raises(StateFileError, match="is a directory"):
        read_state_bytes(tmp_path / "f.json", 100)
    with pytest.raises(StateFileError, match="is a directory"):
        open_state_file(tmp_path / "f.json", os.O_RDWR | os.O_CREAT)


def test_a_file_over_the_limit_is_refused_without_being_read(tmp_path: Path) -> None:
    big = tmp_path / "f.json"
    with big.open("wb") as fh:
        fh.truncate(64 << 20)  # sparse: 64 MiB the reader would otherwise hold
    with pytest.raises(StateFileError, match=r"67108864 bytes, more than the 1000"):
        read_state_bytes(big, 1000)
    (tmp_path / "g.json").write_bytes(b"y" * 200_000)  # at the limit, read in several pieces
    assert read_state_bytes(tmp_path / "g.json", 200_000) == b"y" * 200_000


def test_a_missing_directory_above_the_name_is_said_as_the_os_says_it(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(NotADirectoryError):  # not "... is something that cannot be looked at": the wrong name
        read_state_bytes(tmp_path / "file" / "f.json", 100)


def test_a_state_directory_descriptor_keeps_later_opens_inside_it_whatever_its_name_becomes(tmp_path: Path) -> None:
    fd = open_state_dir(tmp_path / "scratch" / "run_bash")
    try:
        (tmp_path / "elsewhere").mkdir()
        (tmp_path / "scratch" / "run_bash").rename(tmp_path / "moved")
        (tmp_path / "scratch" / "run_bash").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
        os.close(open_state_file("out.log", os.O_WRONLY | os.O_CREAT, dir_fd=fd))
        assert (tmp_path / "moved" / "out.log").exists() and list((tmp_path / "elsewhere").iterdir()) == []
        (tmp_path / "moved" / "pipe").mkdir()
        with pytest.raises(StateFileError, match=r"^\[Errno \d+\] .*/moved/pipe is a directory"):
            open_state_file("pipe", os.O_RDONLY, dir_fd=fd, shown=tmp_path / "moved" / "pipe")
    finally:
        os.close(fd)
    with pytest.raises(StateFileError, match="run_bash is a symbolic link"):
        open_state_dir(tmp_path / "scratch" / "run_bash")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    with pytest.raises(StateFileError, match=r"dangling is a symbolic link .*remove the link, not what it leads to"):
        open_state_dir(tmp_path / "dangling")
    assert not (tmp_path / "nowhere").exists()
    assert is_own_dir(tmp_path / "moved") and not is_own_dir(tmp_path / "scratch" / "run_bash")


def test_a_state_directory_is_made_and_a_link_in_its_place_is_refused(tmp_path: Path) -> None:
    made = state_dir(tmp_path / "a" / "b")
    assert made.is_dir() and not made.is_symlink()
    assert state_dir(made) == made  # there already: fine
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "notes").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(StateFileError, match=r"notes is a symbolic link to .*elsewhere"):
        state_dir(tmp_path / "notes")
    (tmp_path / "file").write_text("")
    with pytest.raises(StateFileError, match="file is a regular file, not a directory"):
        state_dir(tmp_path / "file")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    with pytest.raises(StateFileError, match=r"dangling is a symbolic link to .*nowhere"):
        state_dir(tmp_path / "dangling")
    assert not (tmp_path / "nowhere").exists()
