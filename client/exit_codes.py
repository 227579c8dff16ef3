"""Process exit codes of the `yagent` command, one meaning each."""

from __future__ import annotations

from yagent.ipc.errors import IpcError, RuntimeDirError
from yagent.ipc.vocabulary import ErrorCode, RunStatus, TaskState

OK = 0
FAILED = 1  # the task ended in failure, or a request was refused
USAGE = 2  # bad arguments, a broken configuration or an unsafe runtime directory
NOT_RUNNING = 3  # yagentd is not running (`yagent daemon status` uses it too)
CANCELLED = 4
INTERRUPTED = 5
SIGINT = 130  # Ctrl+C (128 + SIGINT, what shells expect)
BROKEN_PIPE = 141  # stdout was closed by the reader (128 + SIGPIPE, as if the signal had killed us)

# Error codes of refused requests that mean the command line (or the configuration) must change.
_USAGE_REFUSALS = frozenset({ErrorCode.BAD_REQUEST, ErrorCode.BAD_CONFIG, ErrorCode.BAD_PROJECT})


def for_outcome(status: str) -> int:
    """Exit code for how a turn ended (a RunStatus or TaskState value)."""
    return {
        RunStatus.DONE.value: OK,
        TaskState.DONE.value: OK,
        RunStatus.CANCELLED.value: CANCELLED,
        RunStatus.INTERRUPTED.value: INTERRUPTED,
    }.get(status, FAILED)


def for_refusal(code: str) -> int:
    """Exit code for a request yagentd refused with this error code."""
    return USAGE if code in _USAGE_REFUSALS else FAILED


def for_ipc_error(exc: IpcError) -> int:
    """Exit code for a failure to reach yagentd: a runtime directory the user must fix is configuration
    (2), not a daemon that is down (3)."""
    return USAGE if isinstance(exc, RuntimeDirError) else NOT_RUNNING
