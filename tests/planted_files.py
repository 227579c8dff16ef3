"""What a run could leave at a name of the state home, for the tests of the code that reads or writes there later."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["KINDS", "plant", "untouched"]

# What `plant` can put at a name; "huge" takes its size from the caller.
KINDS = ["link", "dangling", "fifo", "directory"]


def plant(name: Path, kind: str, tmp_path: Path, content: str = "precious", *, huge: int = 0) -> Path:
    """Put at `name` a link to a file holding `content`, a dangling link, a pipe, a directory, or a sparse file of
    `huge` bytes; returns where a link leads (left as it is, or never created)."""
    name.parent.mkdir(parents=True, exist_ok=True)
    target = tmp_path / "elsewhere" / f"{name.name}-{kind}"
    target.parent.mkdir(exist_ok=True)
    if kind == "link":
        target.write_text(content)
        name.symlink_to(target)
    elif kind == "dangling":
        name.symlink_to(target)
    elif kind == "fifo":
        os.mkfifo(name)  # nobody ever opens its other end
    elif kind == "directory":
        name.mkdir()
    elif kind == "huge":
        with open(name, "wb") as fh:
            fh.truncate(huge)  # sparse: the test costs no disk
    else:
        raise ValueError(f"nothing to plant of kind {kind!r}")
    return target


def untouched(target: Path, kind: str, content: str = "precious") -> bool:
    """Whether what a link of `plant`'s led to is as it was (for the other kinds: never created)."""
    return target.read_text() == content if kind == "link" else not target.exists()
