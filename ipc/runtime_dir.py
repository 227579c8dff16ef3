"""Where the daemon's sockets live, and the checks that keep other users out.

Resolution: `$YAGENT_RUNTIME_DIR` → `$XDG_RUNTIME_DIR/yagent` → `/tmp/yagent-$UID`. The directory is
created 0700 and refused when another user owns it or group/others can enter it — the same rule tmux
applies to its socket directory, because whoever can connect to control.sock can run commands as us.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .errors import RuntimeDirError

__all__ = ["SOCKET_PATH_MAX", "RuntimePaths", "ensure_runtime_dir", "resolve_runtime_dir", "runtime_paths"]

# sun_path is 108 bytes on Linux including the terminating NUL.
SOCKET_PATH_MAX = 107


@dataclass(frozen=True, slots=True)
class RuntimePaths:
    root: Path
    control: Path
    events: Path
    workers: Path
    lock: Path
    token: Path  # the client credential (`client_token`): readable only by whoever can read this directory

    @staticmethod
    def endpoint(path: Path) -> str:
        return f"ipc://{path}"


def resolve_runtime_dir(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    explicit = env.get("YAGENT_RUNTIME_DIR")
    if explicit:
        return Path(explicit).expanduser().absolute()
    xdg = env.get("XDG_RUNTIME_DIR")
    if xdg:
        return Path(xdg).absolute() / "yagent"
    return Path(f"/tmp/yagent-{os.getuid()}")


def runtime_paths(root: Path) -> RuntimePaths:
    return RuntimePaths(
        root=root,
        control=root / "control.sock",
        events=root / "events.sock",
        workers=root / "workers.sock",
        lock=root / "yagentd.lock",
        token=root / "client.token",
    )


def ensure_runtime_dir(root: Path, *, create: bool = True) -> RuntimePaths:
    """Create (if asked) and vet the runtime directory; return its socket paths."""
    paths = runtime_paths(root)
    longest = max(len(os.fsencode(str(p))) for p in (paths.control, paths.events, paths.workers))
    if longest > SOCKET_PATH_MAX:
        raise RuntimeDirError(
            f"runtime directory {root} is too long for Unix socket paths ({longest} > {SOCKET_PATH_MAX} bytes); "
            "set YAGENT_RUNTIME_DIR to a shorter directory"
        )
    if create:
        try:
            root.mkdir(mode=0o700, parents=False, exist_ok=True)
        except FileNotFoundError:
            raise RuntimeDirError(
                f"cannot create runtime directory {root}: its parent does not exist; "
                "create the parent or set YAGENT_RUNTIME_DIR"
            ) from None
        except PermissionError:
            raise RuntimeDirError(
                f"cannot create runtime directory {root}: permission denied; set YAGENT_RUNTIME_DIR to a "
                "directory you own"
            ) from None
    try:
        st = os.lstat(root)
    except FileNotFoundError:
        raise RuntimeDirError(f"runtime directory {root} does not exist") from None
    if not stat.S_ISDIR(st.st_mode):
        raise RuntimeDirError(
            f"runtime path {root} is not a directory (a symlink or file?); remove it or set YAGENT_RUNTIME_DIR"
        )
    if st.st_uid != os.getuid():
        raise RuntimeDirError(
            f"runtime directory {root} is owned by uid {st.st_uid}, not you (uid {os.getuid()}); "
            "refusing to use it — set YAGENT_RUNTIME_DIR to a directory you own"
        )
    if st.st_mode & 0o077:
        raise RuntimeDirError(
            f"runtime directory {root} is accessible by group or others (mode {stat.S_IMODE(st.st_mode):o}); "
            f"refusing to use it — run `chmod 700 {root}` if you trust its contents, or remove it"
        )
    return paths
