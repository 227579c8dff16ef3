"""What one agent run is assembled from: engines, tool surface, tool context, loop settings.

Everything comes from the run's spec (the settings the daemon resolved from the configuration, the
project root, the yolo level, per-submit options) and its channel (events, leases, delegations, questions).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from yagent.ipc import event_data
from yagent.ipc.board_switches import artifacts_enabled, blackboard_enabled
from yagent.ipc.errors import RemoteError
from yagent.ipc.messages import McpServerStatus, McpToolsReply, RunOutcome
from yagent.ipc.skill_account import SkillAccount, account_lines, load_skill_account
from yagent.ipc.state_layout import (
    approvals_file,
    blueprint_dir,
    breaker_dir,
    scratch_dir,
    thinklink_dir,
)
from yagent.ipc.vocabulary import ErrorCode, EventType, StopReason
from yagent.workers.blueprint.reader import BlueprintReader
from yagent.workers.board import TaskBoard
from yagent.workers.context.project_instructions import ProjectInstructions
from yagent.workers.context.rule_truncation import CHEAP, COSTLY
from yagent.workers.context.thinklink import ThinkLink
from yagent.workers.kinds import RunContext
from yagent.workers.llm import Engine, EngineFactory, Message, RoutingEngine, Usage, build_engine, call_cost
from yagent.workers.memory.rollout_recorder import RunRecorder, open_recorder
from yagent.workers.memory.rollout_records import turn_context
from yagent.workers.skills import USE_SKILL, SkillShelf
from yagent.workers.tools import (
    CheckpointPort,
    Effect,
    Surface,
    SurfaceError,
    ToolContext,
    ToolDeclarationError,
    ToolSpec,
    Truncation,
    YoloLevel,
    build_surface,
)
from yagent.workers.tools.browser_tools import BROWSER_TOOL_NAMES
from yagent.workers.tools.mcp_tools import MCP_PREFIX, McpPort, mcp_servers_of, mcp_specs
from yagent.workers.tools.read_log import ReadLog

from .background_work import ChannelSubagents
from .circuit_breaker import ProviderBreakers
from .compaction import ContextCompactor
from .configuration_signature import SubagentConfiguration, signed, tool_entries
from .loop import LoopConfig, LoopPolicy, run_agent_loop
from .ports import ChannelAsker, ChannelAuthorizer, EngineTextLLM

__all__ = ["SWITCHED_OFF", "AgentRun", "McpRequiredMissing", "result_priority"]

# A run's rollout opening is made once its first request is out (while the model works), or this long after its loop
# began: a request that waits for a slot or a pause must not leave the rollout without it should the worker be killed.
OPENING_AT_THE_LATEST = 0.05

# The capabilities a run's configuration can take off its surface (`AgentRun.__init__`).
SWITCHED_OFF = (Effect.CODE_INDEX, Effect.CHECKPOINT, Effect.BLUEPRINT)


# What a model or the agent itself made: never cut by the first compression tier (not cheap to make again).
_MADE_BY_A_MODEL = Effect.LLM | Effect.REFLECT | Effect.DRAFT


class McpRequiredMissing(Exception):
    """A required MCP server (or one the resumed turn used) did not come up: the run cannot go on."""


class AgentRun:
    """One run's assembled parts. `role` picks the profile, prompt and engine configuration."""

    def __init__(self, ctx: RunContext, role: str, *, extra_specs: Iterable[ToolSpec] = (),
                 pick: Iterable[str] | None = None, model_role: str = "") -> None:
        self.ctx = ctx
        self.role = role
        self.model_role = model_role or role  # `[global.llm.agents] <model_role>` picks its provider
        self.settings = ctx.settings
        self.lang = self.settings.lang
        self.yolo = YoloLevel(ctx.spec.yolo) if ctx.spec.yolo in {y.value for y in YoloLevel} else YoloLevel.NONE
        override = ctx.spec.options.get("model_override") or None
        # One factory per run: the agent's engine and its tools' engines share connections and the lease gate.
        self._llm_config = self.settings.llm
        self._factory = EngineFactory(self._llm_config, gate=ctx.channel)
        self.engine: RoutingEngine = build_engine(self._llm_config, agent=self.model_role, gate=ctx.channel,
                                                  override=override, factory=self._factory)
        # Its handshakes travel while the rest of the run is built: the first request finds the connection open.
        self.engine.open_ahead()
        self._tool_engines: dict[str, Engine] = {}
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
        off = Effect.NONE if self.settings.codeintel else Effect.CODE_INDEX  # `[codeseek] enabled = false`
        if not self.settings.git_checkpoints:  # the daemon makes none for this run's project
            off |= Effect.CHECKPOINT
        if not self.settings.blueprint.enabled:  # `[blueprint] enable = false`, YAGENT_BLUEPRINT=0
            off |= Effect.BLUEPRINT
        # (SWITCHED_OFF names these three: the forkserver works out the surfaces of every combination of them.)
        delegated = ctx.spec.parent_run is not None
        self.surface: Surface = build_surface(role, yolo=self.yolo, extra_specs=extra_specs, pick=pick, without=off,
                                              delegated=delegated)
        profile = self.surface.profile
        # External tools only for a role whose profile can hold some: no round trip for the others.
        wants_mcp = bool(Effect.EXTERNAL & profile.grant) and not Effect.EXTERNAL & profile.deny and pick is None
        self._mcp: McpPort | None = ctx.channel if wants_mcp and isinstance(ctx.channel, McpPort) else None
        self.mcp_generation = -1  # of the MCP tool list the surface holds (-1: none asked for yet)
        self.mcp_servers: list[McpServerStatus] = []  # the project's servers as the daemon last described them
        self.mcp_added: list[str] = []  # MCP tools that joined after the system prompt was written
        # The built-in code server answers the code tools through the same channel, whatever [mcp] says.
        holds_code_tools = any(Effect.CODE_INDEX in s.effects for s in self.surface.specs())
        code_port = ctx.channel if holds_code_tools and isinstance(ctx.channel, McpPort) else None
        # What a sub-agent is made of, taken once its prompt is written (`sign`); digested when first read.
        self._configuration: SubagentConfiguration | None = None
        self._signed: tuple[str, dict[str, str]] | None = None
        # The browser tools reach the project's browser through the same channel; when it cannot work here (no
        # Chromium, turned off) they and delegate_browser stay, saying why.
        holds_browser = any(Effect.BROWSER in s.effects for s in self.surface.specs())
        browser_port = ctx.channel if holds_browser and hasattr(ctx.channel, "call_browser") else None
        if self.settings.browser:
            self.surface.annotate([*BROWSER_TOOL_NAMES, "delegate_browser"], self.settings.browser)
        self.skills = self._open_skills()
        authorizer = ChannelAuthorizer(ctx)
        # The run's own sub-agents: follow-ups and their status for any run that delegates; background starts
        # and waits only for a root run (those tools are root-only).
        self.subagents = ChannelSubagents(ctx.channel) if hasattr(ctx.channel, "start_child") else None
        holds_checkpoints = any(Effect.CHECKPOINT in s.effects for s in self.surface.specs())
        checkpoint_port = ctx.channel if holds_checkpoints and isinstance(ctx.channel, CheckpointPort) else None
        self.blueprint = BlueprintReader(ctx.project_root, blueprint_dir(ctx.home, ctx.spec.project),
                                         self.settings.blueprint) if self.settings.blueprint.enabled else None
        # Board scope = the task: every turn and delegation of the task reads and writes this one board.
        self.board = TaskBoard(ctx.home, ctx.spec.task, self.settings.blackboard)
        self.tool_ctx = ToolContext(
            project_root=ctx.project_root,
            run_id=ctx.spec.run,
            yolo=self.yolo,
            authorizer=authorizer,
            approved=authorizer,  # the prompts it asked are the ones approved operations name
            mcp=self._mcp,
            code_index=code_port,
            browser=browser_port,
            checkpoints=checkpoint_port,
            blueprint=self.blueprint,
            reads=ReadLog(ctx.project_root) if role == "repo" else None,  # the evidence of its blueprint entries
            asker=ChannelAsker(ctx),
            delegator=ctx.channel,  # the channel is the tools' Delegator port
            board=self.board,
            skills=self.skills,
            llm=EngineTextLLM(self._engine_for_tool, emit=lambda type_, data: ctx.emit(type_, data),
                              cost_of=self.cost_of),
            emit=lambda type_, data: ctx.emit(type_, dict(data)),
            heartbeat=ctx.heartbeat,
            heartbeat_interval=self.settings.tool_heartbeat_interval,
            scratch_dir=scratch_dir(ctx.home, ctx.spec.run),
            settings_path=approvals_file(ctx.home),
            session_grants=frozenset(ctx.spec.session_grants),
            delegated=delegated,
            subagents=self.subagents,
        )
        spec = ctx.spec
        # The run's thinklink log sits beside its rollout, in the task's state (all a confined worker may write).
        self.thinklink = ThinkLink(thinklink_dir(ctx.home, spec.task) / f"{spec.run}.jsonl",
                                   on_problem=self._rollout_problem)
        self.recorder: RunRecorder | None
        self.recorder, self.git = open_recorder(
            home=ctx.home, task=spec.task, run=spec.run, agent=spec.agent, turn=spec.turn, parent_run=spec.parent_run,
            delegation_id=spec.call_id, depth=spec.depth, project_root=ctx.project_root, yolo=self.yolo.value,
            model=lambda: self.engine.model, tier=lambda: self.engine.tier or "",
            stop_reason_of_cancel=self._stop_reason_of_cancel, on_problem=self._rollout_problem)
        # The writer starts once the first request is out; a run slower to get there (MCP servers to wait for,
        # delegations to replay) has it started all the same, so a kill meanwhile leaves its session_meta on disk.
        self._writer_start: asyncio.TimerHandle | None = None
        if self.recorder is not None:
            try:
                self._writer_start = asyncio.get_running_loop().call_later(OPENING_AT_THE_LATEST,
                                                                            self.recorder.writer.start)
            except RuntimeError:  # built outside an event loop: nothing to wait for
                self.recorder.writer.start()

    # -- rollout ------------------------------------------------------------------------------------

    def _stop_reason_of_cancel(self) -> StopReason:
        """Why a run that did not return stopped: the daemon gone, a pause the user ended with a stop, a cancel."""
        channel = self.ctx.channel
        if getattr(channel, "lost", False) or getattr(channel, "cancel_reason", None) == StopReason.INTERRUPTED:
            return StopReason.INTERRUPTED
        if getattr(channel, "cancelled_while_paused", False):
            return StopReason.PAUSED
        return StopReason.CANCELLED

    def _rollout_problem(self, text: str) -> None:
        self.ctx.log.warning("%s", text)
        self.ctx.emit(EventType.LOG, event_data.log("warning", f"{self.ctx.spec.agent}: {text}"))

    def _begin_rollout(self, messages: list[Message]) -> None:
        if self.recorder is not None:  # its context is made once the first request is out (`on_first_request`)
            self.recorder.begin_soon(self._turn_context, messages, surface=self._surface_context)

    def _turn_context(self) -> dict[str, Any]:
        context = turn_context(model=self.engine.model, tier=self.engine.tier or "", cwd=str(self.ctx.project_root),
                               yolo=self.yolo.value, **self._surface_context())
        if self.signature:  # what a follow-up compares its own with before it continues this conversation
            context["payload"]["signature"] = self.signature
            context["payload"]["configuration"] = self.configuration_parts
        return context

    def _surface_context(self) -> dict[str, Any]:
        """The turn context's tool fields: what the model is offered now, the agents it can delegate to, and the
        skills it has loaded, and the MCP servers whose tools it holds (a resume waits for them before it
        restores loaded tools)."""
        names = self.surface.names()
        delegates = sorted(n for n in names if n.startswith("delegate_"))
        return {"loaded_tools": self.surface.loaded_names(),
                "roster": [{"agent": name.removeprefix("delegate_"), "state": "available"} for name in delegates],
                "loaded_skills": self.skills.loaded_record() if self.skills is not None else [],
                "mcp_servers": mcp_servers_of(names)}

    # -- skills -------------------------------------------------------------------------------------

    def _open_skills(self) -> SkillShelf | None:
        """The run's skills, when its surface holds `use_skill`; the account goes to the log, and a root run's
        problems (a skill not read, a bad front matter) and cut catalogue to its task's events."""
        if self.surface.resolve(USE_SKILL) is None:
            return None
        ctx = self.ctx
        try:
            account = load_skill_account(yagent_home=ctx.home, project_root=ctx.project_root,
                                         settings=self.settings.skills)
        except Exception as exc:  # a defect in reading skills must cost the run its skills, not the run
            ctx.log.exception("the skills could not be read")
            ctx.emit(EventType.LOG, event_data.log("warning", f"skills are left out of this run: reading them "
                                                              f"failed ({type(exc).__name__}: {exc})"))
            account = SkillAccount(project_root=str(ctx.project_root))
        shelf = SkillShelf(account, model=self.engine.model)
        if ctx.spec.parent_run is not None:  # the whole account once per turn, by its root run
            ctx.log.info("skills: %s", ", ".join(s.name for s in account.skills) or "none")
            return shelf
        ctx.log.info("skills account:\n%s", "\n".join(account_lines(account)))
        problems = account.problems
        if problems:
            shown = "; ".join(problems[:3]) + (f"; and {len(problems) - 3} more" if len(problems) > 3 else "")
            ctx.emit(EventType.LOG, event_data.log(
                "warning", f"{len(problems)} skill problem{'s' if len(problems) != 1 else ''} — {shown} "
                           "(`yagent skills` shows the whole account)"))
        if shelf.catalogue.note:
            ctx.log.info("%s", shelf.catalogue.note)
            ctx.emit(EventType.LOG, event_data.log("info", shelf.catalogue.note))
        return shelf

    def with_blueprint(self, prompt: str) -> str:
        """`prompt` followed by the repository's modules-and-edges shape, for the agents `[blueprint] inject_into`
        names: derived from the files now, so it is never out of date; a project that cannot be read adds nothing."""
        if self.blueprint is None:
            return prompt
        try:
            shape = self.blueprint.shape(self.role)
        except OSError as exc:
            self.ctx.log.warning("the repository map was left out of the prompt: %s", exc)
            return prompt
        return f"{prompt}\n\n{shape}" if shape else prompt

    def blueprint_prose(self, task: str) -> str:
        """What the blueprint records of the modules a delegated task names ("" for none)."""
        if self.blueprint is None:
            return ""
        try:
            return self.blueprint.prose_for(task)
        except OSError as exc:
            self.ctx.log.warning("the blueprint's notes were left out of the task: %s", exc)
            return ""

    def with_skills(self, prompt: str) -> str:
        """`prompt` followed by the skills catalogue, when the run has skills: in the system prompt, so the
        catalogue sits in the part of the prompt that stays the same from step to step."""
        section = self.skills.prompt_section() if self.skills is not None else ""
        return f"{prompt}\n\n{section}" if section else prompt

    def restore_skills(self, record: Any, history: list[Message]) -> None:
        """Take back what a stopped run had loaded, as far as `history` still holds it."""
        if self.skills is not None:
            restored = self.skills.restore(record, history)
            if restored:
                self.ctx.log.info("skills the stopped run had loaded: %s", ", ".join(restored))

    # -- external tools (MCP) -------------------------------------------------------------------------

    async def attach_mcp(self, wait_for: list[str] | None = None) -> None:
        """Join the project's MCP tools to the surface, after the daemon saw its required servers (and
        `wait_for`: those a resumed turn used) come up; `McpRequiredMissing` when a required one did not."""
        if self._mcp is None:
            return
        try:
            reply = await self._mcp.list_mcp_tools(list(wait_for or []))
        except RemoteError as exc:
            if exc.code == ErrorCode.MCP_UNAVAILABLE:
                raise McpRequiredMissing(str(exc)) from None
            self._mcp_problem(f"cannot list the project's MCP tools ({exc}); going on without them")
            return
        except Exception as exc:  # the daemon gone, the channel broken: the run notices at its next step
            self._mcp_problem(f"cannot list the project's MCP tools ({type(exc).__name__}: {exc}); going on "
                              "without them")
            return
        self._apply_mcp(reply)

    async def refresh_mcp(self) -> None:
        """At a step boundary: a tool list the daemon announced as changed reaches the surface now."""
        port = self._mcp
        if port is None or getattr(port, "mcp_generation", 0) <= self.mcp_generation:
            return
        before = set(self.surface.names())
        try:
            reply = await port.list_mcp_tools([])
        except Exception as exc:  # not CancelledError: a cancelled run stops here as anywhere
            self._mcp_problem(f"cannot list the project's MCP tools again ({exc}); keeping the previous list")
            self.mcp_generation = getattr(port, "mcp_generation", self.mcp_generation)  # not again every step
            return
        self._apply_mcp(reply)
        now = set(self.surface.names())
        self.mcp_added = sorted((set(self.mcp_added) | (now - before)) & now)

    def _apply_mcp(self, reply: McpToolsReply) -> None:
        specs = mcp_specs(reply.tools)
        try:
            self.surface.rejoin(MCP_PREFIX, specs)
        except ToolDeclarationError as exc:  # one tool the rules refuse costs only that tool
            self._mcp_problem(f"some MCP tools were left out: {exc}")
            kept = []
            for spec in specs:
                try:
                    self.surface.join([spec])
                    kept.append(spec)
                except ToolDeclarationError:
                    continue
            self.surface.rejoin(MCP_PREFIX, kept)
        self.mcp_generation = reply.generation
        self.mcp_servers = list(reply.servers)

    def _mcp_problem(self, text: str) -> None:
        self.ctx.log.warning("%s", text)
        self.ctx.emit(EventType.LOG, event_data.log("warning", f"{self.ctx.spec.agent}: {text}"))

    def mcp_note(self) -> list[Message]:
        """For one model call: the MCP tools that joined after the system prompt was written (its catalogue
        cannot name them)."""
        added = [n for n in self.mcp_added if self.surface.resolve(n) is not None and not self.surface.is_loaded(n)]
        if not added:
            return []
        lines = "\n".join(f"- {self.surface.resolve(n).catalogue_line()}" for n in added)  # type: ignore[union-attr]
        return [Message.user("MCP tools that became available during this run (deferred: call load_tool with "
                             f"their names first):\n{lines}")]

    # -- configuration ------------------------------------------------------------------------------

    def configuration(self, prompt: str) -> SubagentConfiguration:
        """What this run is made of, for its configuration signature: `prompt` is the stable prompt text it is
        given (its role's, with its sections); MCP tools and what is rebuilt per call are not part of it."""
        surface = self.surface
        specs = [spec for spec in surface.specs() if not spec.name.startswith(MCP_PREFIX)]
        deferred = [spec.name for spec in surface.deferred()]
        provider = self.engine.provider
        table = self._llm_config.providers.get(provider)
        profile = surface.profile
        return SubagentConfiguration(
            prompt=prompt, provider=provider, model=self.engine.model,
            reasoning_effort=table.reasoning_effort if table is not None else "",
            tools=tool_entries([spec.definition() for spec in specs], deferred),
            profile=f"{profile.agent} grant={'|'.join(profile.grant.names())} deny={'|'.join(profile.deny.names())}",
            switches={"lang": self.lang, "yolo": self.yolo.value, "blackboard": str(blackboard_enabled()),
                      "artifacts": str(artifacts_enabled())})

    def sign(self, prompt: str) -> None:
        """Take what this run is made of, given the stable prompt `prompt`, for its configuration signature: now,
        before a follow-up or replay changes its surface; the digest is made when first read (`signature`), which
        for a new sub-agent is once its first request is out."""
        self._configuration = self.configuration(prompt)
        self._signed = None

    @property
    def signature(self) -> str:
        """The configuration signature ("" before `sign`)."""
        return self._digested()[0]

    @property
    def configuration_parts(self) -> dict[str, str]:
        """A short digest per input of the signature, for a refused follow-up to say what changed."""
        return self._digested()[1]

    def _digested(self) -> tuple[str, dict[str, str]]:
        if self._signed is None:
            self._signed = signed(self._configuration) if self._configuration is not None else ("", {})
        return self._signed

    def breakers(self) -> ProviderBreakers | None:
        """The breakers, one per provider: the loop picks the one of the provider each call resolves to,
        after routing — never the provider the engine pointed at when this run was assembled."""
        if self.settings.circuit_breaker_threshold <= 0:
            return None
        return ProviderBreakers(self.settings.circuit_breaker_threshold, self.settings.circuit_breaker_reset,
                                directory=breaker_dir(self.ctx.home))

    def _engine_for_tool(self, tool: str) -> Engine:
        engine = self._tool_engines.get(tool)
        if engine is None:
            engine = build_engine(self._llm_config, agent=self.model_role, tool=tool, gate=self.ctx.channel,
                                  factory=self._factory)
            self._tool_engines[tool] = engine
        return engine

    # -- running ------------------------------------------------------------------------------------

    def compactor(self, messages: list[Any], *, request: str | None = None,
                  request_heading: str = "The task you were given",
                  instructions: ProjectInstructions | None = None) -> ContextCompactor:
        """The run's context compactor; `request` (by default the last user message) is put back word for word
        after a compaction, under `request_heading`."""
        if request is None:
            request = next((m.content for m in reversed(messages) if m.role == "user"), "")
        return ContextCompactor(self.settings.compression, self.thinklink, request=request,
                                request_heading=request_heading, instructions=instructions,
                                priority_of=lambda name: result_priority(self.surface.resolve(name)),
                                requested=self.ctx.compaction_requested, on_compacted=self._after_compaction)

    def _after_compaction(self, messages: list[Any]) -> None:
        """A skill whose text the compaction took away may be loaded again (else it is "already loaded")."""
        if self.skills is not None:
            forgotten = self.skills.retain(messages)
            if forgotten:
                self.ctx.log.info("skills no longer in the context after a compaction: %s", ", ".join(forgotten))

    def loop_config(self, messages: list[Any], policy: LoopPolicy, *, route_task: str = "",
                    compactor: ContextCompactor | None = None) -> LoopConfig:
        return LoopConfig(
            agent=self.ctx.spec.agent,
            engine=self.engine,
            surface=self.surface,
            tool_ctx=self.tool_ctx,
            messages=messages,
            max_steps=self.settings.max_steps_for(self.role),
            emit=self.ctx.emit,
            step_boundary=self.ctx.step_boundary,
            policy=policy,
            step_retries=self.settings.step_retries,
            max_parallel_readonly=self.settings.max_parallel_readonly_tools,
            breaker=self.breakers() if self.role == "director" else None,
            route_task=route_task,
            cost_of=self.cost_of,
            **({"recorder": self.recorder} if self.recorder is not None else {}),
            call_context=self._call_context,
            thinklink=self.thinklink,
            compactor=compactor if compactor is not None else self.compactor(messages),
            refresh_tools=self.refresh_mcp if self._mcp is not None else None,
            lease_ahead=getattr(self.ctx.channel, "lease_ahead", None),
            on_first_request=self.recorder.begin_now if self.recorder is not None else None,
            hold_events=getattr(self.ctx.channel, "hold_events", None),
            release_events=getattr(self.ctx.channel, "flush", None),
        )

    def _call_context(self) -> list[Message]:
        """What one model call gets besides the messages: the board's index (Director) and new MCP tools."""
        extra = self.board.index_messages() if self.role == "director" else []
        return [*extra, *self.mcp_note()]

    def cost_of(self, provider: str, model: str, usage: Usage) -> float | None:
        return call_cost(self._llm_config, provider, model, usage)

    async def run_loop(self, config: LoopConfig, *, rollout: bool | None = None) -> RunOutcome:
        """Run the loop; `rollout` opens this run's rollout with the loop's starting messages (by default
        when the config's recorder is this run's own; a caller that wraps it says True)."""
        opening = None
        if rollout if rollout is not None else config.recorder is self.recorder:
            self._begin_rollout(config.messages)
            if self.recorder is not None:  # a first request that waits (a slot, a pause) does not keep it unwritten
                opening = asyncio.get_running_loop().call_later(OPENING_AT_THE_LATEST, self.recorder.begin_now)
        try:
            return await run_agent_loop(config)
        finally:
            if opening is not None:
                opening.cancel()
            self.tool_ctx.processes.kill_all()

    async def close(self) -> None:
        if self._writer_start is not None:
            self._writer_start.cancel()
        if self.recorder is not None:
            self.recorder.finish_returned()  # the rollout's end, when it was left for after the result
            self.recorder.writer.close(1.0)  # a run whose loop never started still lets its writer go
        await self._factory.aclose()


def result_priority(spec: ToolSpec | None) -> int | None:
    """How early the first compression tier cuts a tool's results: cheap to fetch again first, then costly;
    None for results a model made and short control results, which are never cut. An unknown tool (a dynamic
    one gone) counts as cheap."""
    if spec is None:
        return CHEAP
    if spec.effects & _MADE_BY_A_MODEL or spec.truncation is Truncation.NEVER:
        return None
    return CHEAP if spec.truncation is Truncation.EARLY else COSTLY


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
