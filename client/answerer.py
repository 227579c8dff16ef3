"""Who answered a question, in words the other attached terminals can place ("yagent on pts/3")."""

from __future__ import annotations

import os

__all__ = ["answerer"]


def answerer(program: str) -> str:
    """`program` and the terminal it runs on, else its pid (a script answering has no terminal)."""
    for fd in (0, 1, 2):
        try:
            name = os.ttyname(fd)
        except OSError:
            continue
        return f"{program} on {name.removeprefix('/dev/')}"
    return f"{program} (pid {os.getpid()})"
