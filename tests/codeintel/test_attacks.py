"""The code server against the project it reads — every file of which is untrusted input: links out of the project, a
FIFO, a 1 GB sparse file, 100 000 nested brackets, NUL bytes, a directory swapped for a link; its Landlock
confinement (it cannot write the project or read the state home, even through a link); and a `kill -9` in the middle
of its first build, after which the index is intact and the next build only finishes the rest."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.codeintel.trees import built, stop, write_tree
from tests.daemon_harness import wait_until
from yagent.ipc.confinement import landlock_abi
from yagent.workers.codeintel import indexer as indexer_module
from yagent.workers.codeintel.index_store import DB_NAME
from yagent.workers.codeintel.project_files import SkipReason, Unreadable, read_source

REPO = Path(__file__).resolve().parents[2]


def test_links_out_of_the_project_fifos_sparse_giants_deep_nesting_and_nul_bytes_cost_nothing(tmp_path: Path) -> None:
    secrets = write_tree(tmp_path / "user", {".ssh/id_rsa.py": "def private_key():\n    return 'SECRET'\n",
                                             "yagent-home/config/config.toml.py": "def api_key():\n    pass\n"})
    root = write_tree(tmp_path / "p", {"ok.py": "def fine():\n    pass\n"})
    (root / "ssh").symlink_to(secrets / ".ssh")  # a directory link out of the project
    (root / "key.py").symlink_to(secrets / ".ssh" / "id_rsa.py")  # a file link out of it
    (root / "home").symlink_to(secrets / "yagent-home")
    os.mkfifo(root / "pipe.py")  # opened blocking, this would hang the walk forever
    os.mkfifo(root / ".gitignore")  # and this would hang the ignore rules
    with open(root / "sparse.py", "wb") as fh:
        fh.truncate(1 << 30)  # 1 GB that reads as NUL bytes, taking no disk
    nesting = ("[" * 50 + "\n") * 2000 + ("]" * 50 + "\n") * 2000  # 100 000 deep, in short lines
    (root / "nested.py").write_text("x = " + nesting + "\n\ndef after_nesting():\n    pass\n")
    (root / "nul_early.py").write_bytes(b"def hidden_by_nul():\n    pass\n\x00")
    (root / "nul_late.py").write_bytes(b"def before_nul():\n    pass\n# " + b"x" * 9000 + b"\x00\n")
    began = time.monotonic()
    queries = built(root, tmp_path / "index", timeout=60)
    assert time.monotonic() - began < 60
    files = set(queries.indexer.index.files)
    assert files == {"ok.py", "nested.py", "nul_late.py"}
    skipped = queries.indexer.skipped
    assert skipped[SkipReason.LINK] == 3 and skipped[SkipReason.SPECIAL] == 1 and skipped[SkipReason.BINARY] == 1
    assert skipped[SkipReason.TOO_LARGE] == 1
    assert "SECRET" not in queries.semantic_search("private key api") and "private_key" not in queries.skeleton(["."])
    assert "  4003: def after_nesting():" in queries.skeleton(["nested.py"])  # parsed, and walked without recursion
    assert "nested.py:4003: function after_nesting" in queries.semantic_search("after nesting")
    assert "1: def before_nul():" in queries.skeleton(["nul_late.py"])
    assert "key.py" in queries.skeleton(["key.py"]) and "a symbolic link" in queries.skeleton(["key.py"])
    stop(queries)


def test_a_read_never_follows_a_link_on_the_way_nor_waits_on_what_replaced_a_file(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "p", {"src/a.py": "x = 1\n"})
    outside = write_tree(tmp_path / "outside", {"a.py": "SECRET = 1\n"})
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert read_source(fd, "src/a.py", 1000)[0] == b"x = 1\n"
        (root / "src").rename(root / "old")
        (root / "src").symlink_to(outside)  # the directory swapped for a link between the walk and the read
        with pytest.raises(Unreadable) as link:
            read_source(fd, "src/a.py", 1000)
        assert link.value.reason == SkipReason.LINK
        (root / "src").unlink()
        (root / "src").mkdir()
        os.mkfifo(root / "src" / "a.py")  # a file swapped for a FIFO: refused at once
        with pytest.raises(Unreadable) as fifo:
            read_source(fd, "src/a.py", 1000)
        assert fifo.value.reason == SkipReason.SPECIAL
    finally:
        os.close(fd)


_PROBE = """
import json, os, sys
from yagent.workers.codeintel.__main__ import _arguments, confine
args = _arguments(sys.argv[1:])
out = {"unconfined": confine(args)}
def attempt(name, action):
    try:
        action()
        out[name] = "allowed"
    except OSError as exc:
        out[name] = exc.errno
root, index, home = args.root, args.index, args.home
attempt("read_project", lambda: open(os.path.join(root, "a.py")).read())
attempt("write_project", lambda: open(os.path.join(root, "new.py"), "w").write("x"))
attempt("change_project_file", lambda: open(os.path.join(root, "a.py"), "a").write("x"))
attempt("read_config", lambda: open(os.path.join(home, "config", "config.toml")).read())
attempt("read_config_through_link", lambda: open(os.path.join(root, "cfg", "config.toml")).read())
attempt("read_outside_link", lambda: open(os.path.join(root, "ssh", "id_rsa")).read())
attempt("write_index", lambda: open(os.path.join(index, "probe"), "w").write("x"))
attempt("write_home", lambda: open(os.path.join(home, "planted"), "w").write("x"))
print(json.dumps(out))
"""


@pytest.mark.skipif(landlock_abi() < 1, reason="this kernel has no Landlock")
def test_the_confined_server_reads_the_project_and_writes_only_its_index(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "p", {"a.py": "x = 1\n"})
    home = root / ".yagent"  # the state home inside the project: the worst place for it
    write_tree(home, {"config/config.toml": "[global.llm]\n"})
    index = home / "data" / "codeintel" / "p"
    index.mkdir(parents=True)
    ssh = write_tree(tmp_path / "user" / ".ssh", {"id_rsa": "SECRET"})
    (root / "ssh").symlink_to(ssh)
    (root / "cfg").symlink_to(home / "config")
    probe = subprocess.run([sys.executable, "-c", _PROBE, f"--root={root}", f"--index={index}", f"--home={home}",
                            f"--runtime-dir={tmp_path / 'run'}", f"--landlock-abi={landlock_abi()}"],
                           capture_output=True, text=True, timeout=60, cwd=str(REPO))
    assert probe.returncode == 0, probe.stderr
    seen = json.loads(probe.stdout)
    assert seen["unconfined"] == "" and seen["read_project"] == "allowed" and seen["write_index"] == "allowed"
    denied = ("write_project", "change_project_file", "read_config", "read_config_through_link", "read_outside_link",
              "write_home")
    assert {name: seen[name] for name in denied} == dict.fromkeys(denied, 13)  # EACCES, each of them
    assert (root / "a.py").read_text() == "x = 1\n" and not (root / "new.py").exists()


def test_a_kill_9_in_the_middle_of_the_first_build_leaves_an_intact_index_the_next_build_finishes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "p"
    body = "".join(f"def function_{i}(x):\n    return helper_{i}(x) + {i}\n\n" for i in range(10))
    write_tree(root, {f"m{d:02d}/mod_{i:03d}.py": body for d in range(8) for i in range(150)})
    total = 1200
    index = tmp_path / "index"
    server = subprocess.Popen(
        [sys.executable, "-m", "yagent.workers.codeintel", f"--root={root}", f"--index={index}", "--landlock-abi=0"],
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=str(REPO),
        env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        def stored() -> int:
            try:
                db = sqlite3.connect(f"file:{index / DB_NAME}?mode=ro", uri=True, timeout=0.2)
                try:
                    return db.execute("SELECT count(*) FROM files").fetchone()[0]
                finally:
                    db.close()
            except sqlite3.Error:
                return 0

        kept = wait_until(stored, 90, "the first batches of the build to be stored", interval=0.005)
        os.kill(server.pid, signal.SIGKILL)
        server.wait(10)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(10)
    db = sqlite3.connect(index / DB_NAME)
    assert db.execute("PRAGMA quick_check").fetchall() == [("ok",)]
    kept = db.execute("SELECT count(*) FROM files").fetchone()[0]
    db.close()
    assert 0 < kept < total, f"the kill came after the build ({kept} of {total} stored): a faster machine than planned"
    parsed: list[str] = []
    real = indexer_module.parse
    monkeypatch.setattr(indexer_module, "parse", lambda data, rel: parsed.append(rel) or real(data, rel))
    queries = built(root, index, timeout=120)
    assert len(parsed) == total - kept and len(queries.indexer.index.files) == total
    assert queries.snippet("function_0", path="m07/mod_149.py").startswith(
        "File: m07/mod_149.py  (function function_0, lines 1-2)")
    stop(queries)
