"""Control commands, one module each: the request's validation and handling sit together.

A handler is `async def handler(daemon, msg) -> Message` registered with `@command(RequestType)`;
it raises `CommandError(code, message)` for anything the user must fix. Adding a command means adding
its message to `yagent.ipc.messages` and one module here.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from yagent.ipc.messages import ErrorReply
from yagent.ipc.records import Message

from ..supervisor import CommandError

if TYPE_CHECKING:
    from ..supervisor import Daemon

__all__ = ["CommandError", "command", "dispatch", "resolve_task"]

Handler = Callable[["Daemon", Any], Awaitable[Message]]
_HANDLERS: dict[type[Message], Handler] = {}


def command(kind: type[Message]) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        _HANDLERS[kind] = fn
        return fn

    return register


def resolve_task(daemon: Daemon, ref: str):
    """A task id or a unique prefix of one."""
    ref = ref.strip()
    if not ref:
        raise CommandError("bad_request", "no task given; `yagent ps` lists tasks")
    row = daemon.registry.get_task(ref)
    if row is not None:
        return row
    matches = daemon.registry.find_tasks_by_prefix(ref)
    if not matches:
        raise CommandError("unknown_task", f"no task {ref!r}; `yagent ps` lists tasks")
    if len(matches) > 1:
        raise CommandError("ambiguous_task", f"{ref!r} matches several tasks ({', '.join(matches[:5])}); "
                                             "type more of the id")
    row = daemon.registry.get_task(matches[0])
    assert row is not None
    return row


async def dispatch(daemon: Daemon, msg: Message) -> Message:
    handler = _HANDLERS.get(type(msg))
    if handler is None:
        return ErrorReply(id=getattr(msg, "id", 0), code="not_a_request",
                          message=f"{msg.kind!r} is not a control request")
    return await handler(daemon, msg)


for _mod in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_mod.name}")
