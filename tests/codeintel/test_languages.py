"""The code server's answers over real source trees in each language it parses, and over an installed package (the
test virtualenv's anyio) as a larger corpus: outlines, definitions, callers and callees across files and modules,
each tie labelled with how it was made, and ranked search."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from tests.codeintel.trees import TREES, built, stop, write_tree
from yagent.workers.codeintel.answers import CodeQueries


@pytest.fixture(scope="module")
def trees(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, CodeQueries]]:
    base = tmp_path_factory.mktemp("trees")
    made = {lang: built(write_tree(base / lang / "p", files), base / lang / "index") for lang, files in TREES.items()}
    yield made
    for queries in made.values():
        stop(queries)


# (language, the name asked for, call-site lines the callers answer must hold)
CALLERS = [
    ("python", "helper", ["pkg/util.py:7: in twice: return helper(helper(x))  [exact]",
                          "app/main.py:6: in go: h(1)  [by import]",
                          "app/main.py:7: in go: util.helper(2)  [by import]"]),
    ("javascript", "helper", ["src/lib/util.js:3: in twice: ", "src/main.js:4: in App.start: ", "[by import]",
                              "[by name only]"]),
    ("typescript", "total", ["src/app.tsx:3: in View: return total([new Square(2)]);  [by import]"]),
    ("go", "Helper", ["util/more.go:3: in thrice: func thrice(x int) int { return Helper(x) + x }  [exact]",
                      "cmd/main.go:8: in Server.Start: func (s *Server) Start() int { return u.Helper(1) + s.stop() }"
                      "  [by import]"]),
    ("rust", "helper", ["src/util.rs:6: in Thing.run: pub fn run(&self) -> i32 { helper(1) }  [exact]",
                        "src/main.rs:6: in main: helper(2);  [by import]",
                        "src/main.rs:7: in main: util::helper(3);  [by import]"]),
    ("java", "Helper.go", ["src/com/x/util/Helper.java:6: in Helper.twice: ", "[exact]",
                           "src/com/x/App.java:6: in App.run: void run(Helper h) { Helper.go(1); h.twice(2); }  "
                           "[by import]"]),
    ("c", "helper", ["src/util.c:4: in twice: ", "[exact]",
                     "src/main.c:3: in main: int main(void) { printf(\"%d\", helper(1)); return 0; }  [by import]"]),
    ("cpp", "Widget.draw", ["src/main.cpp:2: in main: int main() { ui::Widget w; w.draw(); return 0; }  "
                            "[by name only]"]),
]


@pytest.mark.parametrize(("lang", "name", "expected"), CALLERS, ids=[c[0] for c in CALLERS])
def test_callers_across_files_and_modules_say_how_each_call_was_tied(trees, lang: str, name: str,
                                                                     expected: list[str]) -> None:
    answer = trees[lang].callers(name)
    for line in expected:
        assert line in answer, f"{lang}: {line!r} missing from:\n{answer}"


def test_a_call_on_an_object_of_unknown_type_is_never_claimed_more_than_by_name(trees) -> None:
    python = trees["python"]
    callers = python.callers("Tool.step")
    assert "pkg/util.py:14: in Tool.run: return self.step()  [exact]" in callers
    assert "app/main.py:8: in go: thing.step()  [by name only]" in callers
    callees = python.callees("go")
    assert "app/main.py:6: h(1) → pkg/util.py:1 helper  [by import]" in callees  # the alias is followed
    assert "app/main.py:8: thing.step() → pkg/util.py:16 Tool.step  [by name only]" in callees
    # Rust's `Thing::new()` beside its impl is exact; Go's `s.stop()` on a receiver of unknown type is by name only.
    assert "src/main.rs:5: in main: let t = Thing::new();  [by import]" in trees["rust"].callers("Thing.new")
    assert "[by name only]" in trees["go"].callers("stop")


SKELETONS = {
    "python": ["File: pkg/util.py  (python, 17 lines, 5 definitions)", "  1: def helper(x):  — Doubles x.",
               "  10: class Tool:  — A tool.", "    13: def run(self):"],
    "javascript": ["  2: function helper(x)  — Doubles x.", "  3: class App", "    4: start(thing)"],
    "typescript": ["  1: interface Shape", "  3: class Square implements Shape  — A square.",
                   "  7: function total(xs: Shape[]): number", "File: src/app.tsx  (tsx, 4 lines, 1 definitions)"],
    "go": ["  4: func Helper(x int) int  — Helper doubles x.", "  8: func (s *Server) Start() int  — Start starts.",
           "  5: Server struct{}"],
    "rust": ["  2: pub fn helper(x: i32) -> i32  — Doubles x.", "  4: impl Thing", "    5: pub fn new() -> Self"],
    "java": ["  4: public class Helper  — Helps.", "    5: public static int go(int x)"],
    "c": ["File: include/util.h  (c, 4 lines, 1 definitions)", "  3: int helper(int x);",
          "  3: int helper(int x)  — Doubles x."],
    "cpp": ["  2: namespace ui", "    4: void Widget::draw()  — Draws it.", "      4: void draw();"],
}


@pytest.mark.parametrize("lang", list(SKELETONS))
def test_a_skeleton_holds_every_definition_with_its_signature_and_doc_line_and_no_body(trees, lang: str) -> None:
    answer = trees[lang].skeleton(["."])
    for line in SKELETONS[lang]:
        assert line in answer.splitlines(), f"{lang}: {line!r} missing from:\n{answer}"
    assert "return" not in answer  # no bodies


def test_a_snippet_is_one_definition_by_name_with_line_numbers(trees) -> None:
    snippet = trees["python"].snippet("Tool.run")
    assert snippet.splitlines() == ["File: pkg/util.py  (method Tool.run, lines 13-14)", "    13|     def run(self):",
                                    "    14|         return self.step()"]
    assert "no definition named nothing_like_it" in trees["python"].snippet("nothing_like_it")


def test_the_call_graph_follows_callees_and_callers_to_the_depth_asked(trees) -> None:
    graph = trees["python"].call_graph("go", depth=2)
    assert "app/main.py:5: go" in graph and "  pkg/util.py:1: helper  [by import]" in graph
    assert "    pkg/util.py:16: Tool.step  [exact]" in graph  # go → Tool.run → Tool.step
    callers = trees["go"].call_graph("Helper", direction="callers", depth=1)
    assert "  cmd/main.go:8: Server.Start  [by import]" in callers and "  util/more.go:3: thrice  [exact]" in callers


def test_ranked_search_finds_definitions_by_their_words(trees) -> None:
    answer = trees["python"].semantic_search("doubles")
    assert answer.splitlines()[1] == "pkg/util.py:1: function helper (lines 1-3) — def helper(x): — Doubles x."
    assert "ranked by BM25 keyword relevance" in answer.splitlines()[0]
    nothing = trees["python"].semantic_search("zebra quokka")
    assert "No chunk contains any of the words zebra, quokka" in nothing


def test_an_installed_package_is_indexed_and_its_callers_are_tied_by_import_across_modules(tmp_path: Path) -> None:
    queries = built(Path(anyio.__file__).parent, tmp_path / "index")
    try:
        answer = queries.callers("get_async_backend")
        head = answer.splitlines()[:2]
        assert head[0].startswith("find_function_caller get_async_backend: 1 definition: _core/_eventloop.py:")
        exact, by_import = (int(head[1].split(f" {label}")[0].rsplit(" ", 1)[-1]) for label in ("exact", "by import"))
        assert exact >= 3 and by_import >= 20  # called in its own module and from many others that import it
        assert "[by import]" in answer and "_core/_sockets.py:" in answer
        search = queries.semantic_search("sleep until deadline")
        assert "function sleep_until" in search.splitlines()[1]
    finally:
        stop(queries)
