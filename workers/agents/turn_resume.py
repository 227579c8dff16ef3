"""Resuming a turn that stopped before it finished (`yagent continue`): the Director picks up its own history,
and every delegation that was cut short is asked for again as a replay — without a model call.

The stopped turn's last step is an assistant message whose tool calls got results saying they were
interrupted (`tools.result.INTERRUPTED_RESULT`), or none at all (the worker was killed before it wrote them).
For each of those calls that is a delegation, the delegation tool runs once more for the same call id, the
daemon told it is a replay: the child picks up from what the interrupted child recorded, or reports what
it had done. Its result is appended as a second result of that call, which the pairing repair keeps (last
wins); so the model's next call sees the child's answer where the interruption was. Other interrupted
calls keep their result, which tells the model it may issue them again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from yagent.ipc.messages import RunOutcome
from yagent.workers.llm import Message
from yagent.workers.memory.replay import load_for_replay, rollout_of_run
from yagent.workers.tools import Surface, ToolBatch, ToolCall, ToolContext
from yagent.workers.tools.context import Delegator
from yagent.workers.tools.result import CANCELLED_RESULT, INTERRUPTED_RESULT

__all__ = ["ReplayingDelegator", "StoppedTurn", "delegated_before", "interrupted_calls", "interrupted_delegations",
           "replay_interrupted_delegations", "stopped_turn"]



@dataclass(frozen=True, slots=True)
class StoppedCall:
    call: ToolCall
    answered: bool  # it has a result (saying it was interrupted), not none at all


def interrupted_calls(history: list[Message]) -> list[StoppedCall]:
    """The tool calls of the history's last step that did not get a result of their own."""
    last = next((i for i in range(len(history) - 1, -1, -1) if history[i].role == "assistant"), None)
    if last is None or not history[last].tool_calls:
        return []
    results: dict[str, str] = {}
    for message in history[last + 1:]:
        if message.role == "tool" and message.tool_call_id:
            results[message.tool_call_id] = message.content  # a later result of the same call wins
    stopped = []
    for call in history[last].tool_calls:
        content = results.get(call.id)
        if content is None or content.startswith((INTERRUPTED_RESULT, CANCELLED_RESULT)):
            stopped.append(StoppedCall(ToolCall(id=call.id, name=call.name, arguments=call.arguments),
                                       answered=content is not None))
    return stopped


def interrupted_delegations(history: list[Message], surface: Surface) -> list[ToolCall]:
    """The last step's interrupted calls that are delegations: what a resume asks for again as replays (and what
    a resume inspection reports on)."""
    return [s.call for s in interrupted_calls(history) if _is_delegation(surface, s.call.name)]


class ReplayingDelegator:
    """The run's delegator, asking the daemon for replays of interrupted delegations instead of new ones."""

    def __init__(self, inner: Delegator) -> None:
        self._inner = inner

    async def run_child(self, agent: str, task: str, call_id: str, context: str) -> RunOutcome:
        return await self._inner.run_child(agent, task, call_id, context, replay=True)


async def replay_interrupted_delegations(messages: list[Message], surface: Surface, tool_ctx: ToolContext, *,
                                         max_parallel: int) -> int:
    """Run the stopped step's interrupted delegations again as replays, appending their results to `messages`
    (same call ids; also when this run is cancelled meanwhile). Other calls keep the result they have — the
    resume repair (`memory.resume_repair`) has answered a call left without one as interrupted. Returns the
    number of delegations replayed."""
    delegations = interrupted_delegations(messages, surface)
    if not delegations or tool_ctx.delegator is None:
        return 0
    inner = tool_ctx.delegator
    tool_ctx.delegator = ReplayingDelegator(inner)
    batch = ToolBatch(surface, delegations, tool_ctx, max_parallel=max_parallel)
    try:
        await batch.run()
    finally:
        tool_ctx.delegator = inner
        messages.extend(Message.tool(r.call_id, r.content, name=r.tool, images=r.images) for r in batch.results())
    return len(delegations)


@dataclass(slots=True)
class StoppedTurn:
    history: list[Message]  # the one to go on from: the memory's, or the rollout's when that is further along
    loaded_tools: list[str] = field(default_factory=list)  # the cold tools the stopped run had loaded
    loaded_skills: list[Any] = field(default_factory=list)  # what its use_skill calls had loaded (the record)
    problem: str = ""  # why the rollout could not be used, when it could not
    mcp_servers: list[str] = field(default_factory=list)  # the MCP servers whose tools the stopped run held


def stopped_turn(task_dir: Path, stopped_run: str, history: list[Message]) -> StoppedTurn:
    """The stopped root run's history as its rollout has it, when the memory (`history`, saved every few
    seconds during a turn) is a prefix of it — the rollout is written every few milliseconds, so a `kill -9`
    loses less of it. Never a history that disagrees with the memory: then the memory stands."""
    path = rollout_of_run(task_dir, stopped_run)
    if path is None:
        return StoppedTurn(history)
    try:
        replay = load_for_replay(path)
    except (OSError, ValueError) as exc:
        return StoppedTurn(history, problem=f"the stopped turn's rollout cannot be read ({exc})")
    context = replay.turn_context or {}
    tools, servers = _names(context.get("loaded_tools")), _names(context.get("mcp_servers"))
    skills = context.get("loaded_skills")
    skills = skills if isinstance(skills, list) else []
    recorded = [m for m in replay.messages if m.role != "system"]
    if len(recorded) > len(history) and recorded[:len(history)] == history:
        return StoppedTurn(recorded, tools, skills, mcp_servers=servers)
    return StoppedTurn(history, tools, skills, mcp_servers=servers)


def _names(value: object) -> list[str]:
    """A list of names read from a turn context (a damaged or older record has none)."""
    return [str(n) for n in value] if isinstance(value, list) else []


def delegated_before(history: list[Message], surface: Surface) -> bool:
    """Whether the stopped turn had delegated (its last user message onwards), by what the tools declare."""
    start = next((i for i in range(len(history) - 1, -1, -1) if history[i].role == "user"), 0)
    return any(m.role == "tool" and _is_delegation(surface, m.name) for m in history[start:])


def _is_delegation(surface: Surface, name: str) -> bool:
    spec = surface.resolve(name)
    return spec is not None and spec.is_delegation
