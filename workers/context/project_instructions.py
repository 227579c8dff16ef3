"""The project's instructions as the Director reads them: every instruction file from the project's root down
to the working directory (`yagent.ipc.project_instructions` says which), joined root first, each part
labelled with its path, under a byte budget.

What does not fit the budget is never cut silently: the text says where it was cut, and `overflow` holds a
warning naming each file shortened or left out and how much, which the Director shows (an event and a log
line). A file that cannot be read, is not a regular file, or is a link pointing outside the project's root
tree (a cloned repository's `AGENTS.md -> ~/.ssh/id_rsa` would otherwise go to the model provider) is left
out and said so in `problems`. The same file reached twice (`CLAUDE.md -> AGENTS.md`) is read once.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from yagent.ipc.project_instructions import instruction_candidates, instructions_root

__all__ = ["DEFAULT_BUDGET_BYTES", "INSTRUCTIONS_HEADING", "ProjectInstructions", "load_project_instructions"]

DEFAULT_BUDGET_BYTES = 32 * 1024
# The heading of the instructions inside a user message: how a later turn or a resume sees they are there.
INSTRUCTIONS_HEADING = "# Project instructions"


@dataclass
class ProjectInstructions:
    text: str = ""  # the labelled parts joined, root first; "" when there are none
    files: list[Path] = field(default_factory=list)  # what was read (in part, when the budget cut it)
    overflow: str = ""  # a warning when the budget cut or left out anything; "" when all fitted
    problems: list[str] = field(default_factory=list)  # files left out for another reason

    def block(self) -> str:
        """The instructions under their heading, as they go into a user message; "" when there are none."""
        return f"{INSTRUCTIONS_HEADING} (AGENTS.md, CLAUDE.md, YAGENT.md)\n\n{self.text}" if self.text else ""


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _read_at_most(path: str, limit: int) -> tuple[bytes, int, tuple[int, int]]:
    """Up to `limit` bytes of the regular file at `path` (no link followed), its size and identity."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise IsADirectoryError(f"{path} is not a regular file")
        chunks, size = [], 0
        while size < limit and (chunk := os.read(fd, min(1 << 16, limit - size))):
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks), info.st_size, (info.st_dev, info.st_ino)
    finally:
        os.close(fd)


def load_project_instructions(workdir: Path, budget: int = DEFAULT_BUDGET_BYTES) -> ProjectInstructions:
    root = os.path.realpath(instructions_root(workdir))
    result = ProjectInstructions()
    parts: list[str] = []
    left = budget
    seen: set[tuple[int, int]] = set()
    over: list[str] = []
    for candidate in instruction_candidates(workdir):
        shown = str(candidate)
        real = os.path.realpath(candidate)
        if not _inside(real, root):
            result.problems.append(f"{shown} points outside the project ({real}); not read")
            continue
        try:
            data, size, identity = _read_at_most(real, max(0, left))
        except OSError as exc:
            result.problems.append(f"{shown} cannot be read ({exc.strerror or exc}); left out")
            continue
        if identity in seen:
            continue
        seen.add(identity)
        if left <= 0:
            over.append(f"{shown} ({size:,} bytes) left out")
            continue
        text = data.decode("utf-8", errors="ignore" if size > len(data) else "replace").strip()
        left -= len(data)
        if size > len(data):
            over.append(f"{shown} cut after {len(data):,} of {size:,} bytes")
            text += f"\n… [cut here: the rest of this file is over the {budget:,}-byte budget for project instructions]"
        result.files.append(candidate)
        if text:
            parts.append(f"## {shown}\n\n{text}")
    result.text = "\n\n".join(parts)
    if over:
        result.overflow = (f"project instructions are over their {budget:,}-byte budget: {'; '.join(over)}. "
                           "Shorten those files (or move detail into files the agents can read when needed)")
    return result
