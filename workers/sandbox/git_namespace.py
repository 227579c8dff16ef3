"""A read-only view of the project's `.git/hooks` and `.git/config` for a worker and every command it runs.

A run allowed to write the project could otherwise plant a hook (or `core.hooksPath`, `core.fsmonitor`) that
the user's next git command runs unconfined. Where unprivileged user namespaces exist, the worker enters a
user and mount namespace of its own first thing after the fork (single-threaded: `unshare` refuses a
threaded process), mapping only its own uid and gid, and bind-mounts them read-only over themselves; `.git`
is bound over itself too, so it cannot be renamed away and replaced. The worker then gives up every
capability it holds in its namespace for good (a command run as uid 0 gets none back at `execve`), so
nothing below can unmount or remount them, and a namespace a command makes of its own inherits them locked
(the kernel refuses to unmount or remount a mount inherited from a more privileged namespace). The Landlock
domain that follows refuses any mount change at all. Nothing outside the worker sees the mounts.

Only what exists is bound, reached without following a symlink: a `.git/hooks` made later, a symlinked one,
a missing `.git` are not covered here, which is why the daemon still checks and reverts both after the run.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import stat

__all__ = ["GitNamespaceError", "protect_git"]

_CLONE_NEWNS = 0x00020000
_CLONE_NEWUSER = 0x10000000
_MS_RDONLY, _MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 1, 32, 4096, 16384, 1 << 18
# statvfs flags a bind remount must repeat (the kernel locks them on mounts a user namespace inherits).
_KEPT_FLAGS = {os.ST_NOSUID: 2, os.ST_NODEV: 4, os.ST_NOEXEC: 8, os.ST_NOATIME: 1024, os.ST_NODIRATIME: 2048,
               os.ST_RELATIME: 1 << 21}


class _Libc:
    """The C calls, resolved at import: the forkserver imports this module, so a worker starts with them."""

    def __init__(self) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        self.unshare, self.mount, self.prctl, self.capset = libc.unshare, libc.mount, libc.prctl, libc.capset


try:
    _LIBC: _Libc | None = _Libc()
except (OSError, AttributeError):  # not Linux
    _LIBC = None


class GitNamespaceError(OSError):
    """The namespace could not be set up: the run goes on with the daemon's check-and-revert only, unless
    `broken` (the process entered a namespace without its uid mapped, where it cannot create a file)."""

    broken = False


def protect_git(project_root: str) -> list[str]:
    """Make `.git/hooks`, `.git/config` (or a `.git` gitlink file) read-only for this process and its
    children; returns what was bound read-only (empty: nothing to protect, and no namespace was made).
    Raises GitNamespaceError if the namespace was asked for and could not be made."""
    kind = _kind_at(project_root)
    if kind is None or kind == "link":
        return []  # no repository here, or a .git that points elsewhere by a symlink: nothing of ours to bind
    libc = _LIBC
    if libc is None:
        raise GitNamespaceError(0, "this system has no mount namespaces")
    _enter_namespaces(libc)
    try:
        return _make_view(libc, project_root, kind)
    finally:  # what made the mounts could unmake them: kept by nobody below, even if the view is unfinished
        _drop_capabilities(libc)


def _make_view(libc: _Libc, project_root: str, kind: str) -> list[str]:
    _call(libc.mount, None, b"/", None, _MS_REC | _MS_PRIVATE, None, what="make mounts private")
    try:  # opened in the new namespace: a descriptor from before names mounts of the old one
        root = os.open(project_root, os.O_PATH | os.O_DIRECTORY)
    except OSError as exc:
        raise GitNamespaceError(exc.errno, f"cannot open the project {project_root}: {exc.strerror}") from None
    try:
        if _kind(root, ".git") != kind:
            raise GitNamespaceError(0, f"{project_root}/.git changed while it was being protected")
        if kind == "file":  # a worktree's or submodule's gitlink: its pointer is what a run could redirect
            _bind(libc, root, ".git", read_only=True)
            return [".git"]
        _bind(libc, root, ".git", read_only=False)  # a mount point cannot be renamed or removed
        return [f".git/{name}" for name in ("hooks", "config") if _bind_in_git(libc, root, name)]
    finally:
        os.close(root)


def _kind_at(project_root: str) -> str | None:
    try:
        root = os.open(project_root, os.O_PATH | os.O_DIRECTORY)
    except OSError as exc:
        raise GitNamespaceError(exc.errno, f"cannot open the project {project_root}: {exc.strerror}") from None
    try:
        return _kind(root, ".git")
    finally:
        os.close(root)


def _bind_in_git(libc: _Libc, root: int, name: str) -> bool:
    git = os.open(".git", os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=root)  # inside the new mount
    try:
        kind = _kind(git, name)
        if kind not in ("dir", "file"):
            return False  # missing, or a symlink: never followed out of the project
        _bind(libc, git, name, read_only=True)
        return True
    finally:
        os.close(git)


def _kind(dir_fd: int, name: str) -> str | None:
    try:
        mode = os.lstat(name, dir_fd=dir_fd).st_mode
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise GitNamespaceError(exc.errno, f"cannot look at {name}: {exc.strerror}") from None
    if stat.S_ISLNK(mode):
        return "link"
    return "dir" if stat.S_ISDIR(mode) else "file" if stat.S_ISREG(mode) else None


def _bind(libc: _Libc, dir_fd: int, name: str, *, read_only: bool) -> None:
    """Bind `name` (beneath `dir_fd`, no symlink followed) over itself, then remount it read-only if asked."""
    fd = os.open(name, os.O_PATH | os.O_NOFOLLOW, dir_fd=dir_fd)
    try:
        if stat.S_ISLNK(os.fstat(fd).st_mode):  # swapped for a link since the look
            raise GitNamespaceError(0, f"{name} became a symbolic link while it was being protected")
        here = f"/proc/self/fd/{fd}".encode()
        _call(libc.mount, here, here, None, _MS_BIND, None, what=f"bind {name}")
    finally:
        os.close(fd)
    if not read_only:
        return
    fd = os.open(name, os.O_PATH | os.O_NOFOLLOW, dir_fd=dir_fd)  # the new mount, on top of the old
    try:
        here = f"/proc/self/fd/{fd}".encode()
        kept = os.statvfs(here).f_flag
        flags = _MS_REMOUNT | _MS_BIND | _MS_RDONLY
        for st_flag, ms_flag in _KEPT_FLAGS.items():
            if kept & st_flag:
                flags |= ms_flag
        _call(libc.mount, None, here, None, flags, None, what=f"make {name} read-only")
    finally:
        os.close(fd)


def _enter_namespaces(libc: _Libc) -> None:
    """A new user and mount namespace in which this process keeps its own uid and gid (and nothing else)."""
    uid, gid = os.getuid(), os.getgid()
    _call(libc.unshare, _CLONE_NEWUSER | _CLONE_NEWNS, what="unshare a user and mount namespace")
    for name, text in (("uid_map", f"{uid} {uid} 1\n"), ("setgroups", "deny"), ("gid_map", f"{gid} {gid} 1\n")):
        try:
            fd = os.open(f"/proc/self/{name}", os.O_WRONLY)
        except OSError as exc:
            failure = GitNamespaceError(exc.errno, f"cannot open /proc/self/{name}: {exc.strerror}")
            failure.broken = True
            raise failure from None
        try:
            os.write(fd, text.encode())
        except OSError as exc:
            failure = GitNamespaceError(exc.errno, f"cannot write /proc/self/{name}: {exc.strerror}")
            failure.broken = True
            raise failure from None
        finally:
            with contextlib.suppress(OSError):
                os.close(fd)


_PR_SET_SECUREBITS = 28
_SECBIT_NOROOT, _SECBIT_NOROOT_LOCKED = 1 << 0, 1 << 1
_CAPABILITY_VERSION_3 = 0x20080522


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _drop_capabilities(libc: _Libc) -> None:
    """No capability left in this namespace, and none to regain: uid 0 gets none at `execve` (the locked
    no-root bit), a file's capabilities are not granted under no-new-privileges (set by the Landlock step)."""
    _call(libc.prctl, _PR_SET_SECUREBITS, _SECBIT_NOROOT | _SECBIT_NOROOT_LOCKED, 0, 0, 0,
          what="keep uid 0 from regaining capabilities")
    header = _CapHeader(_CAPABILITY_VERSION_3, 0)
    none = (_CapData * 2)()  # the ambient set goes with the permitted one
    _call(libc.capset, ctypes.byref(header), none, what="drop capabilities")


def _call(function: object, *args: object, what: str) -> None:
    if function(*args) != 0:  # type: ignore[operator]
        errno = ctypes.get_errno()
        raise GitNamespaceError(errno, f"cannot {what}: {os.strerror(errno)}")
