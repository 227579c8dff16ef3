"""The blueprint's derived layer on this repository: a derivation with nothing remembered (a run's first), one with
its per-process import memo warm (a run's later ones), and the prompt shape rendered, against two baselines measured
in the same run — the code server's walk alone (what any derivation pays to list the files) and a tree-sitter parse
of every Python file (what parsing imports with the full parser would cost). The seed measured 6.6 ms for its
derivation (Go, imports-only parser). Figures are the best of N runs (default 5).

Usage: python bench/blueprint.py [N] [PROJECT]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from best_time import best_of  # noqa: E402

from yagent.workers.blueprint import derivation  # noqa: E402
from yagent.workers.blueprint.derivation import derive  # noqa: E402
from yagent.workers.blueprint.document import Blueprint  # noqa: E402
from yagent.workers.blueprint.views import shape_text  # noqa: E402
from yagent.workers.codeintel.project_files import walk_project  # noqa: E402
from yagent.workers.context.tokens import count_tokens  # noqa: E402


def _tree_sitter_parse(root: Path, files: list[str]) -> None:
    import tree_sitter
    import tree_sitter_python

    parser = tree_sitter.Parser(tree_sitter.Language(tree_sitter_python.language()))
    for rel in files:
        parser.parse((root / rel).read_bytes())


def main(runs: int, root: Path) -> None:
    def cold() -> None:
        derivation._IMPORTS.clear()
        derive(root)

    walk = best_of(lambda: walk_project(root, max_file_bytes=derivation.MAX_FILE_BYTES,
                                        max_files=derivation.MAX_FILES), runs)
    derived = derive(root)
    python = [rel for rel in sorted(derived.files) if rel.endswith(".py")]
    full_parse = best_of(lambda: _tree_sitter_parse(root, python), runs)
    first = best_of(cold, runs)
    warm = best_of(lambda: derive(root), runs)
    count_tokens("warm the tokenizer up")
    started = time.perf_counter()
    shape = shape_text(derived, Blueprint(), max_tokens=1500, count=count_tokens)
    render = time.perf_counter() - started
    print(f"{root}: {len(derived.modules)} modules, {derived.source_files} source files, {len(derived.edges)} edges")
    print(f"walk alone (baseline):                 {walk * 1000:8.1f} ms")
    print(f"tree-sitter parse of every .py file:   {full_parse * 1000:8.1f} ms")
    print(f"derivation, nothing remembered:        {first * 1000:8.1f} ms  ({first / walk:.1f}x the walk, "
          f"{full_parse / first:.1f}x faster than a full parse)")
    print(f"derivation, import memo warm:          {warm * 1000:8.1f} ms  ({warm / walk:.1f}x the walk; seed: 6.6 ms)")
    print(f"prompt shape ({count_tokens(shape)} tokens):            {render * 1000:8.1f} ms")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5, Path(sys.argv[2]) if len(sys.argv) > 2 else ROOT)
