"""Every error the IPC layer raises, in one place.

    IpcError                      base of everything below
    ├── RuntimeDirError           the runtime directory is unusable (wrong owner, open permissions, path too long)
    ├── DaemonNotRunning          nothing answers on control.sock
    ├── RequestTimeout            the daemon did not reply before the deadline
    ├── ProtocolError             a frame could not be understood
    │   ├── MessageTooLarge       a frame exceeds MAX_FRAME_BYTES
    │   ├── MalformedMessage      not msgpack, not a map, unknown kind, or a field of the wrong type
    │   └── ProtocolMismatch      the peer speaks another protocol version
    └── RemoteError               the daemon answered with an error reply (carries its code)

Every message says what is wrong, where, and what to do next.
"""

from __future__ import annotations

__all__ = [
    "DaemonNotRunning",
    "IpcError",
    "MalformedMessage",
    "MessageTooLarge",
    "ProtocolError",
    "ProtocolMismatch",
    "RemoteError",
    "RequestTimeout",
    "RuntimeDirError",
]


class IpcError(Exception):
    """Base class of all IPC errors."""


class RuntimeDirError(IpcError):
    """The runtime directory cannot be used safely."""


class DaemonNotRunning(IpcError):
    def __init__(self, runtime_dir: str = "") -> None:
        where = f" (runtime dir {runtime_dir})" if runtime_dir else ""
        super().__init__(f"yagentd is not running{where} — start it with `yagent daemon start`")


class RequestTimeout(IpcError):
    """The daemon accepted the connection but did not answer in time."""


class ProtocolError(IpcError):
    """A frame could not be understood."""


class MessageTooLarge(ProtocolError):
    pass


class MalformedMessage(ProtocolError):
    """`request_id` is the id the unreadable frame carried, when it had one, so the sender can be answered
    instead of waiting for a reply that will never come; `kind` the message kind it claimed."""

    def __init__(self, message: str, *, request_id: int | None = None, kind: str = "") -> None:
        super().__init__(message)
        self.request_id = request_id
        self.kind = kind


class ProtocolMismatch(ProtocolError):
    pass


class RemoteError(IpcError):
    """An error reply from the daemon; `code` is machine-readable, the message is for people."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
