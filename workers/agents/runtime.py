"""What one agent run is assembled from: engines, tool surface, tool context, loop settings.

Everything comes from the run's spec (the configuration table the daemon handed over, the project
root, the yolo level, per-submit options) and its channel (events, leases, delegations, questions).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from yagent.ipc import event_data
from yagent.ipc.atomic_file import write_atomic
from yagent.ipc.config import parse_duration
from yagent.ipc.messages import RunOutcome
from yagent.ipc.provider_config import parse_llm_config
from yagent.ipc.vocabulary import EventType, RunStatus, StopReason
from yagent.workers.kinds import AgentOutcome, RunContext
from yagent.workers.llm import Engine, EngineFactory, RoutingEngine, build_engine
from yagent.workers.tools import (
    Surface,
    SurfaceError,
    ToolContext,
    ToolSpec,
    YoloLevel,
    build_surface,
    normalize_max_parallel,
)

from .circuit_breaker import ProviderBreakers
from .loop import LoopConfig, LoopPolicy, LoopResult, run_agent_loop
from .ports import ChannelAsker, ChannelAuthorizer, ChannelDelegator, EngineTextLLM

__all__ = ["DEFAULT_MAX_STEPS", "AgentRun", "outcome_from_loop"]

DEFAULT_MAX_STEPS = {"director": 100, "coding": 150, "repo": 50, "chat": 50, "devops": 50, "custom": 15}


def _section(config: dict[str, Any], name: str) -> dict[str, Any]:
    value = config.get(name, {})
    return value if isinstance(value, dict) else {}


class AgentRun:
    """One run's assembled parts. `role` picks the profile, prompt and engine configuration."""

    def __init__(self, ctx: RunContext, role: str, *, extra_specs: Iterable[ToolSpec] = (),
                 pick: Iterable[str] | None = None,
                 on_delegation: Callable[[str, RunOutcome], None] | None = None) -> None:
        self.ctx = ctx
        self.role = role
        config = ctx.config
        self.agent_cfg = _section(config, "agent")
        self.llm_cfg = _section(config, "llm")
        self.lang = str(self.agent_cfg.get("lang") or "English")
        self.yolo = YoloLevel(ctx.spec.yolo) if ctx.spec.yolo in {y.value for y in YoloLevel} else YoloLevel.NONE
        override = ctx.spec.options.get("model_override") or None
        # One factory per run: the agent's engine and its tools' engines share connections and the lease gate.
        self._llm_config = parse_llm_config(config, os.environ)
        self._factory = EngineFactory(self._llm_config, gate=ctx.channel)
        self.engine: RoutingEngine = build_engine(self._llm_config, agent=role, gate=ctx.channel,
                                                  override=override, factory=self._factory)
        self._tool_engines: dict[str, Engine] = {}
        self.delegator = ChannelDelegator(ctx, on_result=on_delegation)
        # Tools a design picked that this run may not hold (ask_user_for_help under --full-yolo, a tool
        # gone from the palette) are left out and reported, rather than failing the run.
        self.dropped_tools: list[str] = []
        if pick is not None:
            pick, self.dropped_tools = _usable_pick(role, pick, self.yolo)
            if self.dropped_tools:
                note = (f"{ctx.spec.agent}: left out tools this run cannot offer at yolo level "
                        f"{self.yolo.value!r}: {', '.join(self.dropped_tools)}")
                ctx.log.warning("%s", note)
                ctx.emit(EventType.LOG, event_data.log("warning", note))
        self.surface: Surface = build_surface(role, yolo=self.yolo, extra_specs=extra_specs, pick=pick)
        self.tool_ctx = ToolContext(
            project_root=ctx.project_root,
            run_id=ctx.spec.run,
            yolo=self.yolo,
            authorizer=ChannelAuthorizer(ctx),
            asker=ChannelAsker(ctx),
            delegator=self.delegator,
            llm=EngineTextLLM(self._engine_for_tool),
            emit=lambda type_, data: ctx.emit(type_, dict(data)),
            heartbeat=ctx.heartbeat,
            heartbeat_interval=self._heartbeat_interval(),
            scratch_dir=ctx.home / "scratch" / ctx.spec.run,
            settings_path=ctx.home / "settings.json",
            session_grants=frozenset(self._load_session_grants()),
        )

    # -- configuration ------------------------------------------------------------------------------

    def max_steps(self) -> int:
        value = self.agent_cfg.get(f"{self.role}_max_steps")
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
        return DEFAULT_MAX_STEPS.get(self.role, 50)

    def step_retries(self) -> int:
        value = self.llm_cfg.get("step_retries", 2)
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 2

    def max_parallel_readonly(self) -> int:
        value = self.agent_cfg.get("max_parallel_readonly_tools")
        return normalize_max_parallel(value if isinstance(value, int) and not isinstance(value, bool) else None)

    def breakers(self) -> ProviderBreakers | None:
        """The breakers, one per provider: the loop picks the one of the provider each call resolves to,
        after routing — never the provider the engine pointed at when this run was assembled."""
        threshold = self.llm_cfg.get("circuit_breaker_threshold", 0)
        if not isinstance(threshold, int) or isinstance(threshold, bool) or threshold <= 0:
            return None
        reset = parse_duration(self.llm_cfg.get("circuit_breaker_reset_timeout", "60s"),
                               "[llm] circuit_breaker_reset_timeout") or 60.0
        return ProviderBreakers(threshold, reset, directory=self.ctx.home / "breaker")

    def _heartbeat_interval(self) -> float:
        """How often a long-running tool beats: well within `[agent] delegate_idle_timeout`, or a command
        printing nothing gets its run killed as idle whenever that timeout is shorter than the default beat (5 s)."""
        default = ToolContext.heartbeat_interval
        try:
            idle = parse_duration(self.agent_cfg.get("delegate_idle_timeout", 60.0), "[agent] delegate_idle_timeout")
        except ValueError:  # the daemon reports a bad value; it does not use it either
            return default
        return min(default, max(0.25, idle / 4)) if idle > 0 else default

    def _engine_for_tool(self, tool: str) -> Engine:
        engine = self._tool_engines.get(tool)
        if engine is None:
            engine = build_engine(self._llm_config, agent=self.role, tool=tool, gate=self.ctx.channel,
                                  factory=self._factory)
            self._tool_engines[tool] = engine
        return engine

    # -- session approvals ----------------------------------------------------------------------------

    def _grants_path(self) -> Path:
        return self.ctx.home / "tasks" / f"{self.ctx.spec.task}.grants.json"

    def _load_session_grants(self) -> list[str]:
        try:
            data = json.loads(self._grants_path().read_text())
        except (OSError, ValueError):
            return []
        return [g for g in data if isinstance(g, str)] if isinstance(data, list) else []

    def save_session_grants(self) -> None:
        """Session approvals last for the task: later runs of it read them back.

        Runs of one task save concurrently (a child finishes while its parent still runs, parallel
        children): the file is read, merged and replaced under an exclusive lock, so no run's grants
        overwrite those another run saved meanwhile.
        """
        grants = self.tool_ctx.guard.approvals.session_grants()
        if not grants:
            return
        path = self._grants_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        with _locked(path.with_name(path.name + ".lock")):
            merged = set(self._load_session_grants()) | grants
            write_atomic(path, json.dumps(sorted(merged)).encode(), mode=0o600)

    # -- running ------------------------------------------------------------------------------------

    def loop_config(self, messages: list[Any], policy: LoopPolicy, *, route_task: str = "") -> LoopConfig:
        return LoopConfig(
            agent=self.ctx.spec.agent,
            engine=self.engine,
            surface=self.surface,
            tool_ctx=self.tool_ctx,
            messages=messages,
            max_steps=self.max_steps(),
            emit=self.ctx.emit,
            step_boundary=self.ctx.step_boundary,
            policy=policy,
            step_retries=self.step_retries(),
            max_parallel_readonly=self.max_parallel_readonly(),
            breaker=self.breakers() if self.role == "director" else None,
            route_task=route_task,
        )

    async def run_loop(self, config: LoopConfig) -> LoopResult:
        try:
            return await run_agent_loop(config)
        finally:
            self.tool_ctx.processes.kill_all()
            self.save_session_grants()

    async def close(self) -> None:
        await self._factory.aclose()


def _usable_pick(role: str, pick: Iterable[str], yolo: YoloLevel) -> tuple[list[str], list[str]]:
    """Split a pick into the tools `build_surface` accepts for this role and yolo level, and the rest."""
    usable: list[str] = []
    dropped: list[str] = []
    for name in dict.fromkeys(pick):
        try:
            build_surface(role, yolo=yolo, pick=[name])
        except SurfaceError:
            dropped.append(name)
        else:
            usable.append(name)
    return usable, dropped


@contextlib.contextmanager
def _locked(lock_path: Path) -> Iterator[None]:
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def outcome_from_loop(result: LoopResult) -> AgentOutcome:
    ok = result.stop_reason in (StopReason.AGENT_EXIT, StopReason.PLAIN_TEXT)
    data: dict[str, Any] = {"steps": result.steps, "usage": result.usage}
    if result.handoff is not None:
        data["handoff"] = result.handoff
    if result.exit_args:
        data["exit"] = {k: v for k, v in result.exit_args.items() if k != "handoff"}
    return AgentOutcome(status=RunStatus.DONE if ok else RunStatus.FAILED, stop_reason=result.stop_reason,
                        output=result.deliverable, error=result.error, data=data)
