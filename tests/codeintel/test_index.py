"""The code index over time: its first build (and what answers say while it runs), incremental updates by content
digest (changed, renamed, deleted files), what it leaves out and says so (ignore rules, binaries, huge and generated
files), a file that fails to parse, and a damaged index file, which is set aside and rebuilt, never trusted."""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

import pytest

from tests.codeintel.trees import TREES, built, stop, write_tree
from yagent.workers.codeintel import indexer as indexer_module
from yagent.workers.codeintel.index_store import DB_NAME


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every file the index parses, in order (the real parse, counted)."""
    seen: list[str] = []
    real = indexer_module.parse

    def counting(data: bytes, rel: str):
        seen.append(rel)
        return real(data, rel)

    monkeypatch.setattr(indexer_module, "parse", counting)
    return seen


def test_answers_during_the_first_build_say_so_and_a_named_file_is_answered_anyway(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "p", TREES["python"])
    queries = built(root, tmp_path / "index", start=False)  # the build has not begun: as at a server's start
    for answer in (queries.callers("helper"), queries.semantic_search("doubles"), queries.call_graph("go"),
                   queries.snippet("helper")):
        assert answer.startswith("index building: ") and "nothing was searched" in answer
        assert "search_by_regex" in answer and "no definition" not in answer
    skeleton = queries.skeleton(["pkg/util.py"])  # one file is parsed on the spot
    assert skeleton.startswith("File: pkg/util.py  (python, 17 lines, 5 definitions)")
    assert queries.snippet("helper", path="pkg/util.py").startswith("File: pkg/util.py  (function helper, lines 1-3)")
    queries.indexer.start()
    assert queries.indexer.built.wait(30)
    assert "app/main.py:6: in go: h(1)  [by import]" in queries.callers("helper")
    stop(queries)


def test_changed_renamed_and_deleted_files_are_followed_and_unchanged_ones_never_parsed_again(
        tmp_path: Path, parses: list[str]) -> None:
    root = write_tree(tmp_path / "p", TREES["python"])
    queries = built(root, tmp_path / "index")
    assert sorted(parses) == ["app/main.py", "pkg/__init__.py", "pkg/util.py"]
    parses.clear()
    util = root / "pkg" / "util.py"
    util.write_text(util.read_text().replace("def twice(x):", "def quadruple(x):"))
    (root / "app" / "main.py").rename(root / "app" / "entry.py")  # renamed, unchanged: its facts are kept
    (root / "pkg" / "__init__.py").unlink()
    (root / "app" / "more.py").write_text("from pkg.util import helper\n\n\ndef more():\n    return helper(9)\n")
    assert queries.indexer.refresh() == (3, 2)
    assert sorted(parses) == ["app/more.py", "pkg/util.py"]  # entry.py kept its facts by digest
    callers = queries.callers("helper")
    assert "pkg/util.py:7: in quadruple: return helper(helper(x))  [exact]" in callers
    assert "app/entry.py:6: in go: h(1)  [by import]" in callers and "app/main.py" not in callers
    assert "app/more.py:5: in more: return helper(9)  [by import]" in callers
    assert "no definition named twice" in queries.callers("twice")
    assert "function quadruple" in queries.semantic_search("quadruple")  # before the search model caught up
    assert set(queries.indexer.index.files) == {"app/entry.py", "app/more.py", "pkg/util.py"}
    parses.clear()
    assert queries.indexer.refresh() == (0, 0) and parses == []
    stop(queries)
    restarted = built(root, tmp_path / "index")  # a new server over the same index reads nothing again
    assert parses == [] and "app/more.py:5: in more" in restarted.callers("helper")
    stop(restarted)


def test_an_edit_within_the_same_mtime_tick_and_size_is_still_seen(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "p", {"a.py": "def alpha():\n    pass\n"})
    queries = built(root, tmp_path / "index")
    path = root / "a.py"
    info = path.stat()
    path.write_text("def omega():\n    pass\n")  # same size
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))  # and the same mtime, as an edit in one tick
    queries.indexer.refresh()
    assert "1: def omega():" in queries.skeleton(["a.py"])
    stop(queries)


def test_ignore_rules_and_what_is_skipped_are_honoured_and_counted(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "p", {
        "keep.py": "def kept():\n    pass\n",
        ".gitignore": "build/\n*.gen.py\n!keep.gen.py\n",
        "build/out.py": "def built_output():\n    pass\n",
        "x.gen.py": "def generated_one():\n    pass\n",
        "keep.gen.py": "def kept_generated():\n    pass\n",
        "vendor/.ignore": "lib.py\n",
        "vendor/lib.py": "def vendored():\n    pass\n",
        "third/party.py": "def third_party():\n    pass\n",
        ".hidden/secret.py": "def hidden():\n    pass\n",
        "big.py": "x = 1\n" * 10_000,
        "min.js": "var a=" + "1+" * 15_000 + "1;\n",
    })
    (root / "binary.py").write_bytes(b"def looks_like_code():\n    pass\n\x00\x01\x02")
    queries = built(root, tmp_path / "index", max_file_bytes=40_000, exclude=("third/",))
    assert set(queries.indexer.index.files) == {"keep.py", "keep.gen.py"}
    note = queries.callers("kept")
    assert "not indexed: " in note
    for count in ("1 binary", "1 larger than [codeseek] max_file_bytes",
                  "1 generated (minified or one very long line)"):
        assert count in note
    stop(queries)


def test_a_file_that_fails_to_parse_keeps_what_the_parser_recovered_and_says_so(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "p", {
        "ok.py": "def fine():\n    return broken_caller()\n",
        "bad.py": "def good_one():\n    pass\n\ndef broken(:\n    return (\n\nclass Later:\n    pass\n",
        "bad.go": "package x\nfunc Half( {\n",
    })
    queries = built(root, tmp_path / "index")
    skeleton = queries.skeleton(["bad.py"])
    assert "(syntax errors (first near line 4): what it defines may be incomplete)" in skeleton
    assert "  1: def good_one():" in skeleton
    assert "syntax errors" in queries.skeleton(["bad.go"])
    assert "ok.py:1: function fine" in queries.semantic_search("fine")
    stop(queries)


def test_a_damaged_index_file_is_set_aside_and_rebuilt_and_a_damaged_record_is_parsed_again(
        tmp_path: Path, parses: list[str]) -> None:
    root = write_tree(tmp_path / "p", TREES["python"])
    index = tmp_path / "index"
    stop(built(root, index))
    db_path = index / DB_NAME
    assert stat.S_IMODE(db_path.stat().st_mode) == 0o600
    db = sqlite3.connect(db_path)
    db.execute("UPDATE files SET record = ? WHERE path = 'pkg/util.py'", (b"\x78\x9c junk that is not zlib",))
    db.commit()
    db.close()
    parses.clear()
    queries = built(root, index)
    assert parses == ["pkg/util.py"] and "app/main.py:6: in go: h(1)  [by import]" in queries.callers("helper")
    stop(queries)
    data = bytearray(db_path.read_bytes())
    data[len(data) // 3: len(data) // 3 + 64] = os.urandom(64)  # damage in the middle of the file
    data[:16] = b"not sqlite at al"
    db_path.write_bytes(bytes(data))
    parses.clear()
    queries = built(root, index)
    assert (index / f"{DB_NAME}.damaged").exists() and "set aside" in queries.indexer.store_problem
    assert sorted(parses) == ["app/main.py", "pkg/__init__.py", "pkg/util.py"]
    assert "app/main.py:6: in go: h(1)  [by import]" in queries.callers("helper")
    assert "set aside" in queries.callers("helper")  # and the answer says what happened to the old file
    stop(queries)
