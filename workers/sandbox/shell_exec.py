"""The exec helper `run_bash` starts each command through: it restricts itself, then becomes the command.

    python -E -s -S shell_exec.py ABI COUNT ACCESS PATH [ACCESS PATH ...] [--git-guard ROOT] -- ARGV...

Run as a script (not `-m yagent...`) with site disabled, so a command costs the interpreter's bare start and
`_landlock` (standard library only) instead of yagent's imports. The worker is multi-threaded by the time it
runs commands, and ctypes after a fork of a threaded process (a `preexec_fn`) is not safe: a fresh
single-threaded process restricting itself before `execve` is. Exits 126 with one line on stderr if the
sandbox cannot be applied: a command never runs less confined than asked.
"""

from __future__ import annotations

import os
import sys

if __package__:
    from ._landlock import LandlockError, Rule, restrict_self
else:  # run as a script: its own folder is on sys.path
    from _landlock import LandlockError, Rule, restrict_self

_USAGE = 2
_CANNOT = 126


def parse(argv: list[str]) -> tuple[int, list[Rule], list[str]]:
    """(abi, rules, the command's argv) from the helper's arguments; ValueError if they are malformed."""
    abi, count = int(argv[0]), int(argv[1])
    pairs = argv[2:2 + 2 * count]
    if len(pairs) != 2 * count:
        raise ValueError("fewer rules than announced")
    rules = [Rule(pairs[i + 1], int(pairs[i])) for i in range(0, len(pairs), 2)]
    rest = argv[2 + 2 * count:]
    if not rest or rest[0] != "--" or len(rest) < 2:
        raise ValueError("no command after --")
    return abi, rules, rest[1:]


def main(argv: list[str]) -> int:
    try:
        abi, rules, command = parse(argv)
    except (ValueError, IndexError) as exc:
        os.write(2, f"yagent sandbox helper: bad arguments ({exc})\n".encode())
        return _USAGE
    try:
        restrict_self(abi, rules)
    except LandlockError as exc:
        os.write(2, f"yagent sandbox: cannot confine the command ({exc}); it was not run\n".encode())
        return _CANNOT
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        os.write(2, f"yagent sandbox: cannot run {command[0]}: {exc.strerror}\n".encode())
        return _CANNOT
    return _CANNOT  # not reached: execvp replaces this process or raises


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
