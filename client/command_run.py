"""How a CLI command that talks to yagentd ends: its coroutine run to an exit code, a failure said once on stderr."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Coroutine
from typing import Any

from yagent.ipc import IpcError, RemoteError

from . import exit_codes
from .liveness import LivenessUnknown

__all__ = ["run_command", "say"]


def say(text: str) -> None:
    print(f"yagent: {text}", file=sys.stderr)


def run_command(coro: Coroutine[Any, Any, int]) -> int:
    """Run a command's coroutine; a refusal, a lost daemon or Ctrl+C becomes its line and exit code."""
    try:
        return asyncio.run(coro)
    except RemoteError as exc:
        say(str(exc))
        return exit_codes.for_refusal(exc.code)
    except LivenessUnknown as exc:  # the daemon may well be running: only the follow stopped
        say(str(exc))
        return exit_codes.FAILED
    except IpcError as exc:
        say(str(exc))
        return exit_codes.for_ipc_error(exc)
    except KeyboardInterrupt:
        return exit_codes.SIGINT
