"""Small real source trees, one per language, written by the tests: a module that defines, another that imports and
calls, a call in the same file and a call on an object of unknown type — what each resolution label needs."""

from __future__ import annotations

import threading
from pathlib import Path

from yagent.workers.codeintel.answers import CodeQueries
from yagent.workers.codeintel.index_store import IndexStore
from yagent.workers.codeintel.indexer import IndexSettings, ProjectIndexer

TREES: dict[str, dict[str, str]] = {
    "python": {
        "pkg/__init__.py": "",
        "pkg/util.py": 'def helper(x):\n    """Doubles x."""\n    return x * 2\n\n\ndef twice(x):\n'
                       "    return helper(helper(x))\n\n\nclass Tool:\n    \"\"\"A tool.\"\"\"\n\n"
                       "    def run(self):\n        return self.step()\n\n    def step(self):\n        return 1\n",
        "app/main.py": "from pkg.util import helper as h, Tool\nfrom pkg import util\n\n\ndef go(thing):\n"
                       "    h(1)\n    util.helper(2)\n    thing.step()\n    return Tool().run()\n",
    },
    "javascript": {
        "src/lib/util.js": "/** Doubles x. */\nexport function helper(x) { return x * 2; }\n"
                           "export function twice(x) { return helper(helper(x)); }\n",
        "src/main.js": "import { helper as h } from './lib/util';\nimport * as u from './lib/util.js';\n"
                       "export class App {\n  start(thing) { h(1); u.helper(2); thing.helper(3); }\n}\n",
    },
    "typescript": {
        "src/shapes.ts": "export interface Shape { area(): number }\n/** A square. */\n"
                         "export class Square implements Shape {\n  constructor(private s: number) {}\n"
                         "  area(): number { return this.s * this.s; }\n}\nexport function total(xs: Shape[]): number "
                         "{ return xs.reduce((a, x) => a + x.area(), 0); }\n",
        "src/app.tsx": "import { total, Square } from './shapes';\nexport function View(): number {\n"
                       "  return total([new Square(2)]);\n}\n",
    },
    "go": {
        "go.mod": "module example.com/proj\n",
        "util/util.go": "package util\n\n// Helper doubles x.\nfunc Helper(x int) int { return x * 2 }\n\n"
                        "func twice(x int) int { return Helper(Helper(x)) }\n",
        "util/more.go": "package util\n\nfunc thrice(x int) int { return Helper(x) + x }\n",
        "cmd/main.go": "package main\n\nimport u \"example.com/proj/util\"\n\ntype Server struct{}\n\n"
                       "// Start starts.\nfunc (s *Server) Start() int { return u.Helper(1) + s.stop() }\n\n"
                       "func (s *Server) stop() int { return 0 }\n",
    },
    "rust": {
        "src/util.rs": "/// Doubles x.\npub fn helper(x: i32) -> i32 { x * 2 }\npub struct Thing;\n"
                       "impl Thing {\n    pub fn new() -> Self { Thing }\n"
                       "    pub fn run(&self) -> i32 { helper(1) }\n}\n",
        "src/main.rs": "mod util;\nuse crate::util::{helper, Thing};\n\nfn main() {\n    let t = Thing::new();\n"
                       "    helper(2);\n    util::helper(3);\n    t.run();\n}\n",
    },
    "java": {
        "src/com/x/util/Helper.java": "package com.x.util;\n\n/** Helps. */\npublic class Helper {\n"
                                      "    public static int go(int x) { return x; }\n"
                                      "    public int twice(int x) { return go(go(x)); }\n}\n",
        "src/com/x/App.java": "package com.x;\n\nimport com.x.util.Helper;\n\npublic class App {\n"
                              "    void run(Helper h) { Helper.go(1); h.twice(2); }\n}\n",
    },
    "c": {
        "include/util.h": "#ifndef UTIL_H\n#define UTIL_H\nint helper(int x);\n#endif\n",
        "src/util.c": "#include \"util.h\"\n/* Doubles x. */\nint helper(int x) { return x * 2; }\n"
                      "static int twice(int x) { return helper(helper(x)); }\n",
        "src/main.c": "#include \"util.h\"\n#include <stdio.h>\nint main(void) { printf(\"%d\", helper(1)); "
                      "return 0; }\n",
    },
    "cpp": {
        "src/widget.hpp": "namespace ui {\nclass Widget {\n public:\n  void draw();\n};\n}\n",
        "src/widget.cpp": "#include \"widget.hpp\"\nnamespace ui {\n// Draws it.\nvoid Widget::draw() { paint(); }\n"
                          "void paint() {}\n}\n",
        "src/main.cpp": "#include \"widget.hpp\"\nint main() { ui::Widget w; w.draw(); return 0; }\n",
    },
}


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def built(root: Path, index_dir: Path, *, max_file_bytes: int = 1024 * 1024, max_files: int = 100_000,
          exclude: tuple[str, ...] = (), start: bool = True, timeout: float = 60.0) -> CodeQueries:
    """The answers over `root`'s index, once its first build is done (waited on its event, with a deadline)."""
    indexer = ProjectIndexer(root, IndexStore(index_dir, str(root)), IndexSettings(max_file_bytes, max_files, exclude))
    queries = CodeQueries(indexer)
    if start:
        indexer.start()
        assert indexer.built.wait(timeout), "the index was not built in time"
    return queries


def stop(queries: CodeQueries) -> None:
    queries.indexer.stop()
    thread = queries.indexer._thread
    if thread is not None and thread is not threading.current_thread():
        thread.join(10)
    queries.indexer.store.close()
