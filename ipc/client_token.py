"""The credential a client shows to yagentd: a random token in the runtime directory.

Anyone who can `connect()` to control.sock can drive the daemon, and Landlock does not mediate connecting to a
Unix socket by path; what a confined agent cannot do is read the runtime directory. So the daemon writes a
fresh token there at every start (0600, replacing the last one), every client reads it and sends it in its
`hello` on control.sock and as its PLAIN password on events.sock, and the daemon answers nothing else first.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

from .atomic_file import write_atomic

__all__ = ["EVENTS_USER", "MAX_TOKEN_BYTES", "new_client_token", "read_client_token", "write_client_token"]

EVENTS_USER = b"yagent"  # the PLAIN user name on events.sock; the password is the token
MAX_TOKEN_BYTES = 255  # PLAIN's limit for a password, and more than a token ever is


def new_client_token() -> str:
    return secrets.token_hex(32)


def write_client_token(path: Path, token: str) -> None:
    write_atomic(path, token.encode(), mode=0o600)


def read_client_token(path: Path) -> str:
    """The token yagentd wrote at `path`; raises `OSError` saying why it cannot be had."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        data = os.read(fd, MAX_TOKEN_BYTES + 1)
    finally:
        os.close(fd)
    token = data.decode("ascii", "replace").strip()
    if not token or len(data) > MAX_TOKEN_BYTES:
        raise OSError(f"{path} does not hold a token (empty or damaged)")
    return token
