"""`write_atomic`, the one way any yagent process replaces a file."""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from yagent.ipc.atomic_file import write_atomic


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_bytes_and_streamed_chunks_replace_the_file(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    path.write_bytes(b"old content that is longer than the new one")
    write_atomic(path, b"new")
    assert path.read_bytes() == b"new"
    write_atomic(path, (bytes([c]) * 3 for c in b"abc"))
    assert path.read_bytes() == b"aaabbbccc"
    write_atomic(path, [])
    assert path.read_bytes() == b""
    assert os.listdir(tmp_path) == ["state.json"]


class _Midway(Exception):
    pass


def _chunks_then_raise() -> Iterator[bytes]:
    yield b"half of the new"
    raise _Midway("the source broke off")


def test_a_write_that_fails_midway_leaves_the_old_file_and_no_temp_file(tmp_path: Path) -> None:
    path = tmp_path / "events.log"
    path.write_bytes(b"the old file")
    with pytest.raises(_Midway):
        write_atomic(path, _chunks_then_raise())
    assert path.read_bytes() == b"the old file"
    assert os.listdir(tmp_path) == ["events.log"]


def test_a_failed_first_write_creates_nothing(tmp_path: Path) -> None:
    with pytest.raises(_Midway):
        write_atomic(tmp_path / "new.json", _chunks_then_raise())
    assert os.listdir(tmp_path) == []


def test_an_existing_file_keeps_its_mode_and_an_explicit_mode_wins(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_bytes(b"#!/bin/sh\n")
    script.chmod(0o751)
    write_atomic(script, b"#!/bin/sh\necho hi\n")
    assert _mode(script) == 0o751  # an edit does not drop the executable bit
    secret = tmp_path / "grants.json"
    secret.write_bytes(b"[]")
    secret.chmod(0o644)
    write_atomic(secret, b'["x"]', mode=0o600)
    assert _mode(secret) == 0o600
    write_atomic(tmp_path / "fresh.json", b"{}", mode=0o600)
    assert _mode(tmp_path / "fresh.json") == 0o600


def test_a_new_file_gets_the_umask_mode_without_the_umask_being_touched(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    previous = os.umask(0o027)
    try:
        def no_umask_calls(mask: int) -> int:
            raise AssertionError("os.umask changes the umask of every thread while it is set")

        monkeypatch.setattr(os, "umask", no_umask_calls)
        write_atomic(tmp_path / "new.txt", b"x")
    finally:
        monkeypatch.undo()
        os.umask(previous)
    assert _mode(tmp_path / "new.txt") == 0o640


def test_a_symlink_is_replaced_by_a_file_and_its_target_is_untouched(tmp_path: Path) -> None:
    # Callers that must write through a link (the config file) pass the link's resolved target.
    real = tmp_path / "real.toml"
    real.write_bytes(b"real")
    link = tmp_path / "link.toml"
    link.symlink_to(real)
    write_atomic(link, b"replaced")
    assert not link.is_symlink() and link.read_bytes() == b"replaced"
    assert real.read_bytes() == b"real"


def test_concurrent_writers_of_one_path_never_share_a_temp_file(tmp_path: Path) -> None:
    path = tmp_path / "task.agents.json"
    writers = 4
    all_open = threading.Barrier(writers, timeout=10)
    all_looked = threading.Barrier(writers, timeout=10)
    seen: list[list[str]] = []
    errors: list[BaseException] = []

    def content(n: int) -> Iterator[bytes]:
        yield f"writer {n} begins;".encode()
        all_open.wait()  # every writer's temp file exists now, none is renamed yet
        seen.append(sorted(os.listdir(tmp_path)))
        all_looked.wait()
        yield f"writer {n} ends".encode()

    def write(n: int) -> None:
        try:
            write_atomic(path, content(n))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=20)
    assert not any(t.is_alive() for t in threads)
    assert errors == []
    assert len(seen) == writers and all(len(listing) == writers for listing in seen)
    assert path.read_bytes().decode() in {f"writer {n} begins;writer {n} ends" for n in range(writers)}
    assert os.listdir(tmp_path) == [path.name]


def test_a_write_through_a_directory_descriptor_follows_the_directory_not_its_name(tmp_path: Path) -> None:
    inside = tmp_path / "inside"
    inside.mkdir()
    (inside / "f.txt").write_bytes(b"old")
    os.chmod(inside / "f.txt", 0o640)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f.txt").write_bytes(b"outside")
    fd = os.open(inside, os.O_RDONLY | os.O_DIRECTORY)
    try:
        inside.rename(tmp_path / "moved")
        inside.symlink_to(outside, target_is_directory=True)  # the name now leads elsewhere; the descriptor does not
        write_atomic("f.txt", b"new", dir_fd=fd)
        with pytest.raises(ValueError, match="one file name"):
            write_atomic("../f.txt", b"x", dir_fd=fd)
    finally:
        os.close(fd)
    assert (tmp_path / "moved" / "f.txt").read_bytes() == b"new" and _mode(tmp_path / "moved" / "f.txt") == 0o640
    assert (outside / "f.txt").read_bytes() == b"outside" and sorted(os.listdir(outside)) == ["f.txt"]
    assert sorted(os.listdir(tmp_path / "moved")) == ["f.txt"]
