"""Agent kinds, registered by name, and what a running agent gets to work with.

An agent kind is an async function `(RunContext) -> RunOutcome` (`yagent.ipc.messages`): the one record
of how a run ended, which the worker reports and the daemon hands on to the parent unchanged. Kinds
register at import time of their module; the daemon names the modules to preload (the built-in agents
plus any `[daemon] agent_modules` from the configuration), so a worker finds its kind already imported.
An outcome a kind gets wrong (not a `RunOutcome`, a status that is no way to end) is reported as a failed
run saying what was wrong (`workers/entry.py`), never lost.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from yagent.ipc.messages import RunOutcome, RunSpec
from yagent.ipc.run_settings import RunSettings
from yagent.ipc.vocabulary import QuestionKind

if TYPE_CHECKING:
    from .channel import DaemonChannel

__all__ = ["AgentFn", "RunContext", "agent_kind", "known_kinds", "resolve_kind"]


class RunContext:
    """The run's view of the world: its spec and its channel to the daemon.

    `after_result`: where the worker keeps what a kind leaves for after its result is delivered (None: this
    context's caller keeps nothing, and the kind does it before it returns)."""

    def __init__(self, spec: RunSpec, channel: DaemonChannel, *,
                 after_result: list[Callable[[], Awaitable[None]]] | None = None) -> None:
        self.spec = spec
        self.channel = channel
        self.log = logging.getLogger(f"yagent.run.{spec.agent}")
        self._after_result = after_result

    def after_result(self, wrap_up: Callable[[], Awaitable[None]]) -> bool:
        """Leave `wrap_up` (what nobody waits for: closing the model clients) for after the run's result has reached
        the daemon, so that the parent resumes without waiting for it; False when this context cannot, and the
        caller must do it now."""
        if self._after_result is None:
            return False
        self._after_result.append(wrap_up)
        return True

    @property
    def project_root(self) -> Path:
        return Path(self.spec.project_root)

    @property
    def home(self) -> Path:
        return Path(self.spec.home)

    @property
    def settings(self) -> RunSettings:
        """The configuration as this run needs it, resolved by the daemon (workers never read config.toml)."""
        return self.spec.settings

    def emit(self, type_: str, data: dict[str, Any] | None = None) -> None:
        self.channel.emit(type_, data or {})

    def heartbeat(self) -> None:
        self.channel.heartbeat()

    def compaction_requested(self) -> bool:
        """Whether `/compact` asked this run for a compaction since the last call (the call clears it)."""
        return self.channel.take_compaction_request()

    async def step_boundary(self) -> None:
        """Block here while the task is paused; raises CancelledError if the run is cancelled."""
        await self.channel.pause_gate()

    async def ask_user(self, kind: QuestionKind, prompt: str, *, options: list[str] | None = None,
                       default: str | None = None, details: dict[str, Any] | None = None) -> dict[str, Any]:
        return await self.channel.ask_user(kind, prompt, options=options or [], default=default,
                                           details=details or {})


AgentFn = Callable[[RunContext], Awaitable[RunOutcome]]

_KINDS: dict[str, AgentFn] = {}
_MODEL_LOOPS: set[str] = set()  # kinds that work in model steps (`agent_kind(model_loop=True)`)


def agent_kind(name: str, *, model_loop: bool = False) -> Callable[[AgentFn], AgentFn]:
    """Register an agent kind under `name`. `model_loop`: the kind works in model steps — its first act and its
    act after each tool's result is a model call — so the daemon may hand it a model slot with its start and
    with a child's result (a slot handed to a kind that does not call at once would sit idle)."""
    def register(fn: AgentFn) -> AgentFn:
        if name in _KINDS and _KINDS[name] is not fn:
            raise ValueError(f"agent kind {name!r} registered twice")
        _KINDS[name] = fn
        if model_loop:
            _MODEL_LOOPS.add(name)
        return fn

    return register


def _registered_name(name: str) -> str:
    """Exact names first; `family:instance` names (e.g. `custom:reviewer`) fall back to `family:`."""
    if name not in _KINDS and ":" in name:
        return name.split(":", 1)[0] + ":"
    return name


def resolve_kind(name: str) -> AgentFn | None:
    return _KINDS.get(_registered_name(name))


def works_in_model_steps(name: str) -> bool:
    """Whether the kind `name` resolves to was registered with `model_loop` (False for an unknown one)."""
    return _registered_name(name) in _MODEL_LOOPS


def known_kinds() -> list[str]:
    return sorted(_KINDS)
