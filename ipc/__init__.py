"""yagent.ipc — the contract between client, daemon and worker processes.

Message definitions and their codec, runtime-directory security, socket set-up, request/reply with
deadlines, gap-free event following, and the configuration file schema.
"""

from .client import DaemonClient, daemon_listening
from .errors import (
    DaemonNotRunning,
    IpcError,
    MalformedMessage,
    MessageTooLarge,
    ProtocolError,
    ProtocolMismatch,
    RemoteError,
    RequestTimeout,
    RuntimeDirError,
)
from .follow import EventStream
from .home import config_path, yagent_home
from .messages import PROTOCOL_VERSION, Event
from .records import MAX_FRAME_BYTES, decode, encode
from .runtime_dir import RuntimePaths, ensure_runtime_dir, resolve_runtime_dir
from .vocabulary import (
    ControlAction,
    ErrorCode,
    EventType,
    HandoffStatus,
    QuestionKind,
    RunStatus,
    StopReason,
    TaskState,
    YoloLevel,
)

__all__ = [
    "MAX_FRAME_BYTES",
    "PROTOCOL_VERSION",
    "ControlAction",
    "DaemonClient",
    "DaemonNotRunning",
    "ErrorCode",
    "Event",
    "EventStream",
    "EventType",
    "HandoffStatus",
    "IpcError",
    "MalformedMessage",
    "MessageTooLarge",
    "ProtocolError",
    "ProtocolMismatch",
    "QuestionKind",
    "RemoteError",
    "RequestTimeout",
    "RunStatus",
    "RuntimeDirError",
    "RuntimePaths",
    "StopReason",
    "TaskState",
    "YoloLevel",
    "config_path",
    "daemon_listening",
    "decode",
    "encode",
    "ensure_runtime_dir",
    "resolve_runtime_dir",
    "yagent_home",
]
