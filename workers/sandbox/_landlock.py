"""The three Landlock system calls over ctypes, and the access rights each ABI version knows.

Kept free of yagent imports (only the standard library) so that the run_bash exec helper, started for every
command, loads it in a fraction of a millisecond. `restrict_self` confines the *calling thread* (and what
it starts afterwards); threads that already exist keep their old rights, so callers confine before any
thread is started.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat

__all__ = [
    "ABI_SCOPES",
    "FILE_RIGHTS",
    "READ",
    "SCOPE_ABSTRACT_UNIX_SOCKET",
    "SCOPE_SIGNAL",
    "WRITE",
    "LandlockError",
    "Rule",
    "add_rules",
    "create_ruleset",
    "enforce",
    "handled_for",
    "kernel_abi",
    "load",
    "restrict_self",
    "scopes_for",
    "set_no_new_privs",
]

# x86_64 and aarch64 share these numbers (the unified table from 5.13 on); other machines are not supported.
_SYSCALLS = {"x86_64": (444, 445, 446), "aarch64": (444, 445, 446)}
_CREATE_RULESET_VERSION = 1 << 0
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

# Filesystem access rights (include/uapi/linux/landlock.h), with the ABI version that introduced each.
EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13  # ABI 2: link and rename across directories
TRUNCATE = 1 << 14  # ABI 3: truncate(2), ftruncate(2), open(O_TRUNC)
IOCTL_DEV = 1 << 15  # ABI 5: ioctl(2) on character and block devices

_ABI1_FS = (1 << 13) - 1
_FS_BY_ABI = {1: _ABI1_FS, 2: _ABI1_FS | REFER, 3: _ABI1_FS | REFER | TRUNCATE, 4: _ABI1_FS | REFER | TRUNCATE}
_FS_BY_ABI[5] = _FS_BY_ABI[4] | IOCTL_DEV

# Scopes (ABI 6): a domain's processes cannot connect to abstract Unix sockets or signal processes outside it.
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0
SCOPE_SIGNAL = 1 << 1
ABI_SCOPES = 6

# Rights a rule on a file (not a directory) may carry; the others only make sense for a directory.
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
READ = EXECUTE | READ_FILE | READ_DIR
# Everything that changes a tree except making devices (mknod needs CAP_MKNOD; no tool needs it).
WRITE = (WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_DIR | MAKE_REG | MAKE_SOCK | MAKE_FIFO | MAKE_SYM | REFER
         | TRUNCATE)


class LandlockError(OSError):
    """A Landlock call failed; `str()` names the call and the path it was about."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = (("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64))


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # __attribute__((packed)) in the kernel header
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


_libc: ctypes.CDLL | None = None


def load() -> None:
    """Open libc and look its functions up now (the forkserver does, once): not in each worker's start."""
    _syscall()
    assert _libc is not None
    _libc.prctl  # noqa: B018 - ctypes resolves and caches the symbol on first access


def _syscall() -> ctypes._CFuncPtr:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.syscall.restype = ctypes.c_long
    return _libc.syscall


def _numbers() -> tuple[int, int, int] | None:
    return _SYSCALLS.get(os.uname().machine)


def kernel_abi() -> int:
    """The kernel's Landlock ABI version; 0 where Landlock is missing (not built, disabled, another machine)."""
    numbers = _numbers()
    if numbers is None or os.uname().sysname != "Linux":
        return 0
    try:
        version = _syscall()(numbers[0], None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    except (OSError, AttributeError):
        return 0
    return max(0, int(version))


def handled_for(abi: int) -> int:
    """Every filesystem right an ABI version can restrict (all of them are handled: what is not granted is denied)."""
    return _FS_BY_ABI[min(abi, 5)] if abi >= 1 else 0


def scopes_for(abi: int) -> int:
    return SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= ABI_SCOPES else 0


class Rule:
    """Allow `access` beneath `path` (the whole tree; for a file, the file alone). A plain class: dataclasses
    would cost the exec helper 14 ms of imports per command."""

    __slots__ = ("access", "path")

    def __init__(self, path: str, access: int) -> None:
        self.path = path
        self.access = access

    def __repr__(self) -> str:
        return f"Rule({self.path!r}, {self.access:#x})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Rule) and (self.path, self.access) == (other.path, other.access)

    def __hash__(self) -> int:
        return hash((self.path, self.access))


def set_no_new_privs() -> None:
    """No execve may gain privileges from now on (setuid, file capabilities): `sudo` inside fails. Required
    by the kernel before an unprivileged process may restrict itself."""
    _syscall()  # loads libc once
    assert _libc is not None
    if _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        code = ctypes.get_errno()
        raise LandlockError(code, f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(code)}")


def restrict_self(abi: int, rules: list[Rule]) -> int:
    """Confine the calling thread to `rules` under every right `abi` knows, with its scopes; returns the number
    of rules added. Paths that do not exist are skipped (a rule needs an open file). Raises `LandlockError`."""
    ruleset = create_ruleset(abi)
    try:
        added = add_rules(ruleset, abi, rules)
        enforce(ruleset)
    finally:
        os.close(ruleset)
    return added


def create_ruleset(abi: int) -> int:
    """A new, empty ruleset handling every right `abi` knows and its scopes: a descriptor (close-on-exec) the
    caller closes. Creating one and adding rules to it confines nothing yet: only `enforce` does."""
    numbers = _numbers()
    if abi < 1 or numbers is None:
        raise LandlockError(errno.ENOSYS, "Landlock is not available on this system")
    attr = _RulesetAttr(handled_for(abi), 0, scopes_for(abi))
    size = ctypes.sizeof(attr) if abi >= ABI_SCOPES else 8 if abi < 4 else 16
    ruleset = _syscall()(numbers[0], ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        code = ctypes.get_errno()
        raise LandlockError(code, f"landlock_create_ruleset: {os.strerror(code)}")
    return int(ruleset)


def add_rules(ruleset: int, abi: int, rules: list[Rule], opened: list[tuple[str, int, int]] | None = None) -> int:
    """Add `rules` to `ruleset` (made for `abi`); returns how many were added. Paths that do not exist are skipped
    (a rule needs an open file); a rule on a file keeps only the rights a file can have. `opened` receives (path,
    device, inode) of what each added rule was opened as: a rule holds that file, whatever its path names later."""
    numbers = _numbers()
    if numbers is None:
        raise LandlockError(errno.ENOSYS, "Landlock is not available on this system")
    handled = handled_for(abi)
    call = _syscall()
    added = 0
    # One attribute record and one set of argument objects for every rule: a worker start runs this loop.
    beneath = _PathBeneathAttr(0, -1)
    args = (ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH), ctypes.byref(beneath), ctypes.c_uint32(0))
    for rule in rules:
        access = rule.access & handled
        try:
            fd = os.open(rule.path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            continue  # gone, or never there: nothing to allow
        try:
            status = os.fstat(fd)
            if not stat.S_ISDIR(status.st_mode):
                access &= FILE_RIGHTS
            if not access:
                continue
            beneath.allowed_access, beneath.parent_fd = access, fd
            if call(numbers[1], *args) != 0:
                code = ctypes.get_errno()
                raise LandlockError(code, f"landlock_add_rule({rule.path}): {os.strerror(code)}")
            added += 1
            if opened is not None:
                opened.append((rule.path, status.st_dev, status.st_ino))
        finally:
            os.close(fd)
    return added


def enforce(ruleset: int) -> None:
    """Confine the calling thread (and what it starts from now on) to `ruleset`, after no-new-privileges."""
    numbers = _numbers()
    if numbers is None:
        raise LandlockError(errno.ENOSYS, "Landlock is not available on this system")
    set_no_new_privs()
    if _syscall()(numbers[2], ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
        code = ctypes.get_errno()
        raise LandlockError(code, f"landlock_restrict_self: {os.strerror(code)}")
