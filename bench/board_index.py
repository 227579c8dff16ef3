"""Board index rebuild: the text every Director model call carries, rebuilt from a board of N notes.

Run from the repository root: `.venv/bin/python bench/board_index.py [--notes N]` (default 200; target ≤ 10 ms).

Figures (best of several runs, same files, same process):
  baseline  a bare `os.scandir` of every agent directory and a read of each note's first 4 KiB
  rebuild   `TaskBoard.index_text()`: list (lstat, no links), read each front-matter, parse, render
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from best_time import best_of  # noqa: E402

from yagent.ipc.board_settings import BoardSettings  # noqa: E402
from yagent.ipc.vocabulary import HandoffStatus  # noqa: E402
from yagent.workers.board import Fact, Handoff, TaskBoard  # noqa: E402

AGENTS = ("repo", "coding", "chat", "devops")


def fill(board: TaskBoard, notes: int) -> None:
    for i in range(notes):
        handoff = Handoff(f"finding {i}: the handler for case {i} lives in src/mod_{i}.py and needs a guard",
                          tuple(Fact(f"claim {i}.{j} about the code", f"src/mod_{i}.py:{j * 10}") for j in range(4)),
                          (f"is case {i} reachable?",), HandoffStatus.OK)
        body = "\n".join(f"line {k} of the full deliverable of note {i}" for k in range(120))
        board.notes.write(AGENTS[i % len(AGENTS)], handoff, body, task=f"task {i}")


def bare_scan(root: Path) -> int:
    size = 0
    for agent in os.scandir(root):
        for entry in os.scandir(agent.path):
            with open(entry.path, "rb") as f:
                size += len(f.read(4096))
    return size


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--notes", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        # All notes indexed (index_max_notes = N), so the rebuild reads as many files as the baseline.
        board = TaskBoard(Path(tmp), "task", BoardSettings(index_max_notes=args.notes), environ={})
        fill(board, args.notes)
        index = board.index_text()
        baseline = best_of(lambda: bare_scan(board.notes.root), runs=20)
        rebuild = best_of(board.index_text, runs=20)
        default = TaskBoard(Path(tmp), "task", BoardSettings(), environ={})
        shown = best_of(default.index_text, runs=20)
    print(f"board of {args.notes} notes, index of {index.count(chr(10))} lines, {len(index)} characters")
    print(f"baseline  scandir + read 4 KiB each : {baseline * 1000:7.2f} ms")
    print(f"rebuild   all {args.notes} notes indexed       : {rebuild * 1000:7.2f} ms  "
          f"({rebuild / baseline:.1f}x the baseline; target <= 10 ms)")
    print(f"rebuild   default index_max_notes  : {shown * 1000:7.2f} ms  ({shown / baseline:.1f}x the baseline)")


if __name__ == "__main__":
    main()
