"""File operations that stay beneath a directory, so the path the guard checked is the path a tool uses.

The guard decides on a resolved path. A tool that then reopened that path by name would follow whatever
sits at the name by then: a directory swapped for a link to elsewhere in the instant between (by the
agent's own shell, or by anyone else) sent writes out of the project. So tools never reopen by name.
Every open and create is resolved again by the kernel, relative to a descriptor of the directory it must
stay under (its anchor), and every rename and delete acts on one name in a parent opened that way:

- inside the project the anchor is the project root: links that stay inside it are followed; a step
  that would leave it (`..` above it, an absolute link, a link out, a /proc magic link) is refused;
- outside the project (a path the user approved, or a read) the anchor is `/` and no link is followed
  at all, so what is opened is exactly the resolved path that was approved.

Two ways to resolve (`Resolution`), chosen once per process by `default_resolution()` and open to tests
as a seam: `openat2(2)` with RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS (Linux 5.6+; Python has no wrapper,
so a ctypes call), or, where that call is missing, a walk one component at a time with O_NOFOLLOW from
the anchor's descriptor that refuses `..` and every link: the paths handed in are already resolved, so
a link met on the way means the tree changed after the check.

Nothing is held open between calls: the anchor is opened for each operation (from `/`, with no link
allowed, so a project root replaced by a link is refused too).
"""

from __future__ import annotations

import contextlib
import ctypes
import enum
import errno
import functools
import os
import platform
import stat
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from yagent.ipc.atomic_file import write_atomic
from yagent.ipc.private_files import user_umask

__all__ = [
    "FileAccess",
    "PathEscape",
    "Resolution",
    "default_resolution",
    "open_beneath",
    "remove_entry",
    "rename_noreplace",
]

# openat2 has the same number on every architecture that gained it after the 5.x syscall-table unification.
_NR_OPENAT2 = {"x86_64": 437, "aarch64": 437, "arm64": 437, "armv7l": 437, "i686": 437, "riscv64": 437,
               "ppc64le": 437, "s390x": 437}
# Only the raw syscall exists where glibc predates renameat2 (2.28).
_NR_RENAMEAT2 = {"x86_64": 316, "aarch64": 276, "arm64": 276}
_AT_FDCWD = -100
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08
RENAME_NOREPLACE = 1
# The kernel answers EAGAIN when a rename elsewhere raced a `..` step; a retry resolves afresh.
_EAGAIN_RETRIES = 8
_MACHINE = platform.machine()


class Resolution(enum.Enum):
    """How a path is resolved beneath its anchor."""

    OPENAT2 = "openat2"  # one system call; the kernel refuses any step out of the anchor
    WALK = "walk"  # one component at a time with O_NOFOLLOW; `..` and every link refused


class PathEscape(OSError):
    """The path would leave its anchor on the way (a link or `..` met where the check saw none); refused."""


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _openat2(dir_fd: int, path: str, flags: int, mode: int, resolve: int) -> int:
    number = _NR_OPENAT2.get(_MACHINE)
    if number is None:
        raise OSError(errno.ENOSYS, f"openat2 is not known on {_MACHINE}")
    # The kernel refuses a mode without O_CREAT / O_TMPFILE (EINVAL); O_TMPFILE's bits include O_DIRECTORY.
    tmpfile = getattr(os, "O_TMPFILE", 0)
    creates = bool(flags & os.O_CREAT) or (tmpfile != 0 and flags & tmpfile == tmpfile)
    how = _OpenHow(flags, mode if creates else 0, resolve)
    fd = _libc.syscall(ctypes.c_long(number), ctypes.c_int(dir_fd), ctypes.c_char_p(os.fsencode(path)),
                       ctypes.byref(how), ctypes.c_size_t(ctypes.sizeof(how)))
    if fd < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), path)
    return fd


@functools.cache
def default_resolution() -> Resolution:
    """OPENAT2 where the kernel has it (Linux 5.6+, not filtered by seccomp), WALK otherwise."""
    try:
        os.close(_openat2(_AT_FDCWD, "/", os.O_PATH | os.O_CLOEXEC, 0, RESOLVE_NO_MAGICLINKS))
    except OSError:
        return Resolution.WALK  # ENOSYS (old kernel), EPERM (seccomp), an unknown architecture
    return Resolution.OPENAT2


def _relative(rel: PurePosixPath | str) -> PurePosixPath:
    text = os.fspath(rel)
    if "\0" in text:  # ctypes would cut the path at the NUL and open a shorter one
        raise ValueError(f"a path cannot hold a NUL character: {text!r}")
    path = PurePosixPath(text)
    if path.is_absolute():
        raise PathEscape(errno.EXDEV, "an absolute path is not beneath its anchor", text)
    return path


def open_beneath(anchor_fd: int, rel: PurePosixPath | str, flags: int, mode: int = 0o666, *,
                 follow_links: bool, resolution: Resolution) -> int:
    """`rel` opened beneath the directory `anchor_fd` holds, never leaving it; raises `PathEscape` if it would.

    With `follow_links`, links that stay beneath the anchor are followed (openat2 only: the walk refuses
    every link); without, any link on the way is refused. O_CLOEXEC is always added.
    """
    path = _relative(rel)
    flags |= os.O_CLOEXEC
    if resolution is Resolution.OPENAT2:
        resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | (0 if follow_links else RESOLVE_NO_SYMLINKS)
        for _ in range(_EAGAIN_RETRIES):
            try:
                return _openat2(anchor_fd, str(path), flags, mode, resolve)
            except OSError as exc:
                if exc.errno == errno.EAGAIN:
                    continue
                if exc.errno in (errno.EXDEV, errno.ELOOP):
                    raise PathEscape(exc.errno, "a link or `..` on the way leads out of where it must stay",
                                     str(path)) from None
                raise
        raise OSError(errno.EAGAIN, "the directory tree kept changing while the path was resolved", str(path))
    return _walk(anchor_fd, path.parts, flags, mode)


def _walk(anchor_fd: int, parts: tuple[str, ...], flags: int, mode: int) -> int:
    current = anchor_fd
    try:
        for part in parts[:-1]:
            step = _step(current, part, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC, 0)
            if current != anchor_fd:
                os.close(current)
            current = step
        return _step(current, parts[-1] if parts else ".", flags, mode)
    finally:
        if current != anchor_fd:
            os.close(current)


def _step(dir_fd: int, name: str, flags: int, mode: int) -> int:
    if name == "..":
        raise PathEscape(errno.EXDEV, "`..` on the way", name)
    try:
        fd = os.open(name, flags | os.O_NOFOLLOW, mode, dir_fd=dir_fd)
    except OSError as exc:
        # O_NOFOLLOW meets a link as ELOOP, or as ENOTDIR when a directory was asked for; ENOTDIR with a
        # directory there now means the entry was a link a moment ago (swapped back and forth).
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _kind(dir_fd, name) in (stat.S_IFLNK, stat.S_IFDIR):
            raise PathEscape(errno.ELOOP, "a link on the way", name) from None
        raise
    if flags & os.O_PATH and stat.S_ISLNK(os.fstat(fd).st_mode):  # O_PATH | O_NOFOLLOW opens the link itself
        os.close(fd)
        raise PathEscape(errno.ELOOP, "a link on the way", name)
    return fd


def _kind(dir_fd: int, name: str) -> int | None:
    try:
        return stat.S_IFMT(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return None


def remove_entry(dir_fd: int, name: str) -> str:
    """Delete the entry `name` of the directory `dir_fd` (a link itself, never its target); returns its kind.

    A non-empty directory raises OSError(ENOTEMPTY): the kernel decides, so nothing can slip in between.
    """
    kind = stat.S_IFMT(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    if kind == stat.S_IFDIR:
        os.rmdir(name, dir_fd=dir_fd)
        return "directory"
    os.unlink(name, dir_fd=dir_fd)
    return "symlink" if kind == stat.S_IFLNK else "file"


def rename_noreplace(src_dir: int, src_name: str, dst_dir: int, dst_name: str) -> None:
    """Move one entry to another directory entry that must not exist (FileExistsError if it does).

    renameat2(RENAME_NOREPLACE) makes "must not exist" atomic. Where the call or the flag is missing
    (ENOSYS, or EINVAL from a file system without it), the check comes first and the move right after,
    both on the same two descriptors, so only the destination's own directory can change in between. Across
    file systems (EXDEV) a regular file or link is copied and the original removed; a directory is refused.
    """
    try:
        _renameat2(src_dir, src_name, dst_dir, dst_name, RENAME_NOREPLACE)
        return
    except OSError as exc:
        if exc.errno == errno.EXDEV:
            _move_across(src_dir, src_name, dst_dir, dst_name)
            return
        if exc.errno not in (errno.ENOSYS, errno.EINVAL):
            raise
    if _exists(dst_dir, dst_name):
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), dst_name)
    os.rename(src_name, dst_name, src_dir_fd=src_dir, dst_dir_fd=dst_dir)


def _renameat2(src_dir: int, src: str, dst_dir: int, dst: str, flags: int) -> None:
    args = (ctypes.c_int(src_dir), ctypes.c_char_p(os.fsencode(src)), ctypes.c_int(dst_dir),
            ctypes.c_char_p(os.fsencode(dst)), ctypes.c_uint(flags))
    function = getattr(_libc, "renameat2", None)
    if function is not None:
        result = function(*args)
    elif _MACHINE in _NR_RENAMEAT2:
        result = _libc.syscall(ctypes.c_long(_NR_RENAMEAT2[_MACHINE]), *args)
    else:
        raise OSError(errno.ENOSYS, "renameat2 is not available")
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), src)


def _exists(dir_fd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def _move_across(src_dir: int, src: str, dst_dir: int, dst: str) -> None:
    st = os.stat(src, dir_fd=src_dir, follow_symlinks=False)
    if stat.S_ISLNK(st.st_mode):
        target = os.readlink(src, dir_fd=src_dir)
        os.symlink(target, dst, dir_fd=dst_dir)  # fails if dst exists: no replace here either
        os.unlink(src, dir_fd=src_dir)
        return
    if not stat.S_ISREG(st.st_mode):
        raise OSError(errno.EXDEV, "only files and links can be moved to another file system here", src)
    source = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=src_dir)
    try:
        target_fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                            dir_fd=dst_dir)
        try:
            while os.sendfile(target_fd, source, None, 1 << 24):
                pass
            os.fchmod(target_fd, stat.S_IMODE(st.st_mode))
            os.fsync(target_fd)
        except BaseException:
            os.close(target_fd)
            os.unlink(dst, dir_fd=dst_dir)
            raise
        os.close(target_fd)
    finally:
        os.close(source)
    os.unlink(src, dir_fd=src_dir)


class FileAccess:
    """Opens resolved paths beneath the anchor they belong to: the project root, or `/` with no links.

    `umask` is the user's (not the worker's private 077): new files and directories in the project get
    the modes the user's own tools would give them.
    """

    def __init__(self, root: Path, *, resolution: Resolution | None = None, umask: int | None = None):
        self.root = root
        self.resolution = resolution or default_resolution()
        self.umask = user_umask() if umask is None else umask

    @property
    def new_file_mode(self) -> int:
        return 0o666 & ~self.umask

    @property
    def new_dir_mode(self) -> int:
        return 0o777 & ~self.umask

    def anchor_of(self, path: Path) -> Path:
        """The directory `path` is opened beneath: the project root when inside it, else `/`."""
        return self.root if path == self.root or path.is_relative_to(self.root) else Path("/")

    def open(self, path: Path, flags: int, mode: int = 0o666) -> int:
        """A descriptor for the resolved `path` (caller closes it); `PathEscape` if it would leave its anchor."""
        if not path.is_absolute():
            raise ValueError(f"FileAccess takes resolved absolute paths, not {path}")
        anchor = self.anchor_of(path)
        inside = anchor == self.root
        with self._anchor(inside) as anchor_fd:
            return open_beneath(anchor_fd, path.relative_to(anchor), flags, mode, follow_links=inside,
                                resolution=self.resolution)

    @contextlib.contextmanager
    def opened(self, path: Path, flags: int = os.O_RDONLY) -> Iterator[int]:
        fd = self.open(path, flags)
        try:
            yield fd
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def directory(self, path: Path, *, create: bool = False) -> Iterator[int]:
        """`path` opened as a directory (for reading: it can be listed and synced); `create` makes missing ones."""
        try:
            fd = self.open(path, os.O_RDONLY | os.O_DIRECTORY)
        except FileNotFoundError:
            if not create:
                raise
            fd = self._make_dirs(path)
        try:
            yield fd
        finally:
            os.close(fd)

    def replace_file(self, dir_fd: int, name: str, data: bytes) -> None:
        """Replace the entry `name` of `dir_fd` with a regular file holding `data`, atomically.

        An existing regular file keeps its mode; a new one gets the user's. A hardlink or symlink at the
        name is replaced, never written through.
        """
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            mode = stat.S_IMODE(st.st_mode) if stat.S_ISREG(st.st_mode) else self.new_file_mode
        except FileNotFoundError:
            mode = self.new_file_mode
        write_atomic(name, data, mode=mode, dir_fd=dir_fd)

    def _make_dirs(self, path: Path) -> int:
        """Create the missing directories of `path` one by one beneath its anchor; the last one, opened."""
        anchor = self.anchor_of(path)
        inside = anchor == self.root
        with self._anchor(inside) as anchor_fd:
            current = open_beneath(anchor_fd, ".", os.O_PATH | os.O_DIRECTORY, follow_links=inside,
                                   resolution=self.resolution)
            try:
                for part in path.relative_to(anchor).parts:
                    step = self._make_dir(current, part, inside)
                    os.close(current)
                    current = step
                return open_beneath(current, ".", os.O_RDONLY | os.O_DIRECTORY, follow_links=inside,
                                    resolution=self.resolution)
            finally:
                os.close(current)

    def _make_dir(self, parent_fd: int, name: str, follow_links: bool) -> int:
        def step(flags: int) -> int:
            return open_beneath(parent_fd, name, flags, follow_links=follow_links, resolution=self.resolution)

        try:
            return step(os.O_PATH | os.O_DIRECTORY)
        except FileNotFoundError:
            pass
        try:
            os.mkdir(name, 0o700, dir_fd=parent_fd)  # mkdirat never follows a link at the name
        except FileExistsError:
            return step(os.O_PATH | os.O_DIRECTORY)
        made = step(os.O_RDONLY | os.O_DIRECTORY)
        os.fchmod(made, self.new_dir_mode)  # the worker's own umask (077) is for its private state
        return made

    @contextlib.contextmanager
    def _anchor(self, inside: bool) -> Iterator[int]:
        slash = os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        if not inside:
            try:
                yield slash
            finally:
                os.close(slash)
            return
        try:
            root = open_beneath(slash, self.root.relative_to("/"), os.O_PATH | os.O_DIRECTORY,
                                follow_links=False, resolution=self.resolution)
        finally:
            os.close(slash)
        try:
            yield root
        finally:
            os.close(root)
