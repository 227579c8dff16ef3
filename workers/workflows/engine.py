"""The workflow engine: the root run of a workflow task, and the role nodes it runs.

Why here: a workflow is a task like any other, so attach, detach, pause, continue and cancel act on it unchanged;
its root run (agent kind `workflow`) holds no model — before every decision it loads the facts, asks the pure
router, says what it chose and why (a `workflow_decision` event), and runs the step as a delegation to the role's
node kind (`node:<workflow>:<role>`) kept under the role's name, so every role is one continuable sub-agent the
daemon's reuse table keeps across steps, turns and restarts. The engine's limits are a run's: its step budget
(`[agent] workflow_max_steps`) counts decisions; a pause holds it at the next decision; a stop interrupts it, and
`continue` (or running the workflow again) goes on from the facts on disk.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from yagent.ipc import event_data
from yagent.ipc.errors import RemoteError
from yagent.ipc.messages import RunOutcome
from yagent.ipc.vocabulary import EventType, QuestionKind, RunStatus, StopReason
from yagent.ipc.workflows import WORKFLOW_AGENT, WORKFLOW_OPTION, workflow_dir
from yagent.workers.agents.subagents import DELIVER_NOW, AgentSpec, run_subagent
from yagent.workers.kinds import RunContext, agent_kind

from .definition import FactError, Instruction, NoStep, OnNone, WorkflowDefinition
from .fiction import FICTION

__all__ = ["NODE_PREFIX", "WORKFLOWS", "node_kind"]

NODE_PREFIX = "node:"
WORKFLOWS: dict[str, WorkflowDefinition[Any]] = {FICTION.name: FICTION}


def node_kind(workflow: str, role: str) -> str:
    return f"{NODE_PREFIX}{workflow}:{role}"


@agent_kind(NODE_PREFIX, model_loop=True)
async def role_node(ctx: RunContext) -> RunOutcome:
    """A workflow's role node: a delegated agent whose prompt and model are its role's."""
    _, workflow, role = [*ctx.spec.agent.split(":", 2), "", ""][:3]
    definition = WORKFLOWS.get(workflow)
    spec = definition.roles.get(role) if definition is not None else None
    if spec is None:
        return RunOutcome(status=RunStatus.FAILED, stop_reason=StopReason.PANIC,
                          error=f"no role {role!r} in a workflow {workflow!r}; known: "
                                + ", ".join(f"{n}:{r}" for n, d in WORKFLOWS.items() for r in d.roles))
    return await run_subagent(ctx, AgentSpec("node", "node", DELIVER_NOW, 1, model_role=spec.model_role),
                              system_prompt=spec.prompt)


@agent_kind(WORKFLOW_AGENT)
async def workflow_engine(ctx: RunContext) -> RunOutcome:
    name = str(ctx.spec.options.get(WORKFLOW_OPTION) or ctx.spec.input.removeprefix("workflow").strip())
    definition = WORKFLOWS.get(name)
    if definition is None:
        return RunOutcome(status=RunStatus.FAILED, stop_reason=StopReason.PANIC,
                          error=f"there is no workflow {name!r}; built in: {', '.join(sorted(WORKFLOWS))}")
    directory = workflow_dir(ctx.project_root, name)
    try:
        definition.prepare(directory)
    except OSError as exc:
        return RunOutcome(status=RunStatus.FAILED, stop_reason=StopReason.PANIC,
                          error=f"cannot make the workflow's directory {directory}: {exc}")
    return await _Engine(ctx, definition, directory).run()


class _Engine:
    def __init__(self, ctx: RunContext, definition: WorkflowDefinition[Any], directory: Path) -> None:
        self.ctx = ctx
        self.definition = definition
        self.directory = directory
        self.steps = 0

    async def run(self) -> RunOutcome:
        limit = self.ctx.settings.max_steps_for(WORKFLOW_AGENT)
        previous: tuple[Instruction, Any] | None = None
        while self.steps < limit:
            await self.ctx.step_boundary()  # a pause holds here; a cancel raises here
            self.steps += 1
            try:
                state = self.definition.load(self.directory)
                instruction = self.definition.route(state)
                if instruction is None:
                    ended = await self._no_step(state, self.definition.no_step(state))
                    if ended is not None:
                        return ended
                    continue
                if previous == (instruction, state):
                    raise FactError(f"the {instruction.agent} step left the facts as they were, so the same step would "
                                    f"run again ({instruction.reason}); check what it should have written in "
                                    f"{self.directory}, then run the workflow again")
                previous = (instruction, state)
                held = self.definition.hold(self.directory, state, instruction)
                if held is not None:
                    self._decided(state, situation="hold", action=OnNone.FINISH.value, reason=held)
                    return self._done(f"The {self.definition.name} workflow {held}. Run it again to go on.")
                self._decided(state, instruction=instruction)
                outcome = await self._run_node(instruction.agent, instruction.task)
                if outcome.status != RunStatus.DONE:
                    return self._stopped(instruction.agent, outcome)
                self.definition.commit(self.directory, instruction, outcome)
            except FactError as exc:
                self._decided(None, error=str(exc))
                return RunOutcome(status=RunStatus.FAILED, stop_reason=StopReason.PANIC,
                                  error=f"{self.definition.name} workflow: {exc}")
        return RunOutcome(status=RunStatus.FAILED, stop_reason=StopReason.MAX_STEPS,
                          error=f"made {limit} decisions in this run ([agent] workflow_max_steps); run the workflow "
                                "again to go on from where it is")

    async def _no_step(self, state: Any, none: NoStep) -> RunOutcome | None:
        self._decided(state, situation=none.situation, action=none.action.value, reason=none.reason)
        if none.action is OnNone.FINISH:
            return self._done(f"The {self.definition.name} workflow is {none.situation}: "
                              f"{self.definition.progress(state)}.")
        if none.action is OnNone.ASK_USER:
            answer = await self.ctx.ask_user(QuestionKind.INPUT, self.definition.question(none.situation))
            value = str(answer.get("value", "")).strip() if not answer.get("cancelled") else ""
            if not value:
                return self._done(f"The {self.definition.name} workflow waits for you ({none.situation}); run it "
                                  "again and answer, or edit its facts.")
            self.definition.answered(self.directory, none.situation, value)
            return None
        planner = self.definition.planner
        instruction = Instruction(planner, self.definition.planner_task(state), none.reason)
        outcome = await self._run_node(planner, instruction.task)
        if outcome.status != RunStatus.DONE:
            return self._stopped(planner, outcome)
        self.definition.commit(self.directory, instruction, outcome)
        return None

    async def _run_node(self, role: str, task: str) -> RunOutcome:
        call_id = f"wf{self.steps}-{uuid.uuid4().hex[:8]}"
        try:
            return await self.ctx.channel.run_child(node_kind(self.definition.name, role), task, call_id, "",
                                                    reuse_key=role)
        except RemoteError as exc:
            return RunOutcome(status=RunStatus.FAILED, stop_reason=StopReason.PANIC, agent=role,
                              error=f"yagentd refused the step: {exc}")

    def _decided(self, state: Any, *, instruction: Instruction | None = None, situation: str = "", action: str = "",
                 reason: str = "", error: str = "") -> None:
        progress = self.definition.progress(state) if state is not None else ""
        if instruction is not None:
            reason = instruction.reason
        data = event_data.workflow_decision(
            workflow=self.definition.name, step=self.steps, agent=instruction.agent if instruction else "",
            task=instruction.task if instruction else "", reason=reason, situation=situation, action=action,
            progress=progress, error=error)
        self.ctx.log.info("workflow %s decision %d: %s", self.definition.name, self.steps,
                          error or (f"{instruction.agent} — {reason}" if instruction else f"{situation}: {action}"))
        self.ctx.emit(EventType.WORKFLOW_DECISION, data)

    def _done(self, text: str) -> RunOutcome:
        return RunOutcome(status=RunStatus.DONE, stop_reason=StopReason.PLAIN_TEXT, output=text, steps=self.steps)

    def _stopped(self, role: str, outcome: RunOutcome) -> RunOutcome:
        if outcome.status == RunStatus.INTERRUPTED:
            return RunOutcome(status=RunStatus.INTERRUPTED, stop_reason=StopReason.INTERRUPTED, steps=self.steps,
                              error=f"yagentd stopped during the {role} step; `yagent continue` goes on")
        return RunOutcome(status=RunStatus.FAILED, stop_reason=outcome.stop_reason, steps=self.steps,
                          error=f"the {role} step did not finish ({outcome.stop_reason}): "
                                f"{outcome.error or outcome.output[:500]}; run the workflow again to retry it")
