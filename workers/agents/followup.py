"""A follow-up to a continuable sub-agent: go on with its conversation, or say why not.

The daemon names the sub-agent's newest run (`FOLLOWUP_OPTION`); that run's rollout holds the whole conversation
(every run of a sub-agent opens its rollout with all it was given), read back with the replay reader exactly as
it was. It is continued only when the configuration signature recorded there is the one this run has: a changed
role prompt, model, tool list... is another agent, and the old conversation is not put in its mouth. Then:

- `fresh_if_changed` (a workflow's node, whose every task is whole): the run starts anew on its task;
- otherwise (an agent's `send_followup`, whose message may lean on what came before): nothing runs, and the
  parent reads why, in a result yagent writes (`handoff.status` error) — it delegates anew with the whole task.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from yagent.ipc.messages import FOLLOWUP_OPTION, RunOutcome
from yagent.ipc.state_layout import task_dir
from yagent.ipc.vocabulary import HandoffStatus, RunStatus, StopReason
from yagent.workers.kinds import RunContext
from yagent.workers.llm import Message
from yagent.workers.memory.replay import load_for_replay, rollout_of_run
from yagent.workers.memory.rollout_reader import RolloutReadError
from yagent.workers.memory.rollout_writer import wait_for_writer

__all__ = ["FollowupStart", "continue_subagent", "not_continued_report"]


@dataclass
class FollowupStart:
    """Where a continued sub-agent goes on from: its conversation with the follow-up appended."""

    messages: list[Message]
    loaded_tools: list[str] = field(default_factory=list)
    loaded_skills: list[Any] = field(default_factory=list)


# The previous run's worker writes its rollout's end after its result (`RunRecorder.end_after_result`), within its
# own bounds (5 s to drain, 5 s to close): a follow-up started meanwhile waits for it at most this long.
ROLLOUT_END_WAIT = 10.0


async def previous_conversation_written(ctx: RunContext, *, timeout: float = ROLLOUT_END_WAIT) -> None:
    """Wait until the rollout a follow-up continues has its end written (its worker may still be writing it)."""
    previous = str(_followup_option(ctx).get("run", ""))
    path = rollout_of_run(task_dir(ctx.home, ctx.spec.task), previous) if previous else None
    if path is not None and not await wait_for_writer(path, timeout):
        ctx.log.warning("the rollout of run %s was still being written after %.0fs; continuing from what it holds",
                        previous, timeout)


def _followup_option(ctx: RunContext) -> dict[str, Any]:
    """What the daemon said of the follow-up (the sub-agent, its previous run, `fresh_if_changed`); {} for none."""
    option = ctx.spec.options.get(FOLLOWUP_OPTION)
    return option if isinstance(option, dict) else {}


def continue_subagent(ctx: RunContext, signature: str, parts: dict[str, str], system: Message,
                      followup: str) -> FollowupStart | RunOutcome | None:
    """The conversation to go on with, or — when it cannot be continued — None to start anew
    (`fresh_if_changed`), else the report saying why."""
    info = _followup_option(ctx)
    subagent, previous = str(info.get("subagent", "")), str(info.get("run", ""))
    reason, start = _conversation(ctx, previous, signature, parts, system, followup)
    if start is not None:
        ctx.log.info("continuing sub-agent %s from run %s", subagent, previous)
        return start
    if info.get("fresh_if_changed"):
        ctx.log.info("sub-agent %s starts anew: %s", subagent, reason)
        return None
    ctx.log.info("sub-agent %s is not continued: %s", subagent, reason)
    return not_continued_report(ctx.spec.agent, subagent, reason)


def _conversation(ctx: RunContext, previous: str, signature: str, parts: dict[str, str], system: Message,
                  followup: str) -> tuple[str, FollowupStart | None]:
    path = rollout_of_run(task_dir(ctx.home, ctx.spec.task), previous) if previous else None
    if path is None:
        return (f"its conversation is not on disk (no rollout of its run {previous or '(none)'}: resume switched "
                "off, or removed by [resume] rollout_retention)"), None
    try:
        replay = load_for_replay(path)
    except (OSError, RolloutReadError, ValueError) as exc:
        return f"its conversation cannot be read back ({exc})", None
    context = replay.turn_context or {}
    then = context.get("signature")
    if then != signature:
        recorded = context.get("configuration")
        changed = _changed_parts(recorded, parts) if isinstance(recorded, dict) else []
        what = ", ".join(changed) if changed else "its configuration"
        return f"{what} changed since its conversation was written (configuration signature {str(then)[:12]} then, " \
               f"{signature[:12]} now)", None
    history = [m for m in replay.messages if m.role != "system"]
    if not history:
        return "its conversation is empty", None
    loaded, skills = context.get("loaded_tools"), context.get("loaded_skills")
    return "", FollowupStart([system, *history, Message.user(followup)],
                             [str(n) for n in loaded] if isinstance(loaded, list) else [],
                             skills if isinstance(skills, list) else [])


def _changed_parts(then: dict[str, Any], now: dict[str, Any]) -> list[str]:
    return [key for key in sorted(set(then) | set(now)) if then.get(key) != now.get(key)]


def not_continued_report(agent: str, subagent: str, reason: str) -> RunOutcome:
    """yagent's own result for a follow-up that did not run: why, and what to do instead."""
    text = (f"[Sub-agent {subagent} ({agent}) was not continued: {reason}. Nothing was run. Delegate the work "
            f"anew with the whole task (delegate_{agent.split(':', 1)[-1]} or spawn_agent): a new sub-agent does "
            "not know this one's conversation.]")
    return RunOutcome(status=RunStatus.DONE, stop_reason=StopReason.AGENT_EXIT, output=text,
                      handoff={"conclusion": f"not continued: {reason}", "facts": [], "open_questions": [],
                               "status": HandoffStatus.ERROR.value},
                      data={"not_continued": reason})
