"""A root run's sub-agents: the `SubagentPort` over its daemon channel, and what the turn does with background
work at its start and its end.

At the start (`BACKGROUND_OPTION`, filled by the daemon): results of background sub-agents no turn has read are
handed to this one (and kept on the board), those still working are named, and those a stopped daemon
interrupted are started again as background follow-ups with the choice they had. At the end (`before_finish`):
the background sub-agents this run started with `wait` that still work are waited for, and their results given
to the agent before it may answer; those with `keep` work on after the turn (the daemon shows it), those with
`cancel` are cancelled by the daemon with the run.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from yagent.ipc.errors import MalformedMessage
from yagent.ipc.messages import BACKGROUND_OPTION, RunOutcome, SubagentInfo, SubagentsReply
from yagent.ipc.vocabulary import TurnEndChoice
from yagent.workers.tools.handoff import format_for_parent

from ..channel import DaemonChannel

__all__ = ["BACKGROUND_RESULTS_HEADING", "INTERRUPTED_FOLLOWUP", "ChannelSubagents", "background_at_start",
           "wait_before_answering"]

log = logging.getLogger(__name__)

BACKGROUND_RESULTS_HEADING = "# Background sub-agents"
INTERRUPTED_FOLLOWUP = (
    "yagentd stopped while you were working on your task, and has started you again. Go on with your task from "
    "where you were: check what your last steps left behind before you repeat anything, then finish it.")
_MAX_READ = 512  # runs whose results this run has been handed: a bound on the set, the oldest forgotten first


class ChannelSubagents:
    """The tools' `SubagentPort` for one root run."""

    def __init__(self, channel: DaemonChannel) -> None:
        self._channel = channel
        self._started: dict[str, TurnEndChoice] = {}  # background sub-agents this run started, and their choice
        self._read: dict[str, None] = {}  # runs whose results were handed to the model (ordered: oldest first)

    async def follow_up(self, subagent: str, message: str, call_id: str, context: str) -> RunOutcome:
        return await self._channel.run_child("", message, call_id, context, subagent=subagent)

    async def start(self, agent: str, task: str, call_id: str, context: str, *, choice: TurnEndChoice,
                    subagent: str = "") -> tuple[str, str]:
        accepted = await self._channel.start_child(agent, task, call_id, context, choice=choice, subagent=subagent)
        self._started[accepted.subagent] = choice
        return accepted.run, accepted.subagent

    async def ask(self, subagents: list[str], *, wait: bool = False, timeout: float = 0.0,
                  cancel: bool = False) -> SubagentsReply:
        return await self._channel.subagents(subagents, wait=wait, timeout=timeout, cancel=cancel)

    def started_here(self) -> dict[str, TurnEndChoice]:
        return dict(self._started)

    def read(self, run: str) -> bool:
        if run in self._read:
            return False
        self._read[run] = None
        if len(self._read) > _MAX_READ:
            self._read.pop(next(iter(self._read)))
        return True


def _infos(option: Any, key: str) -> list[SubagentInfo]:
    infos = []
    for item in (option.get(key) or []) if isinstance(option, dict) else []:
        try:
            infos.append(SubagentInfo.from_wire(item))
        except MalformedMessage as exc:  # the daemon's own map: a defect there costs that entry only
            log.warning("a background sub-agent the daemon named cannot be read: %s", exc)
    return infos


def _result_text(info: SubagentInfo) -> str:
    outcome = info.outcome
    body = format_for_parent(outcome) if outcome is not None else f"(no result recorded; state {info.state})"
    return f"## Sub-agent {info.subagent} ({info.agent}) — task: {info.task}\n{body}"


async def background_at_start(options: dict[str, Any], port: ChannelSubagents,
                              record: Callable[[RunOutcome, str], None]) -> str:
    """What the turn's agent is told of background work as the turn starts ("" for nothing), the finished
    results kept on the board through `record`; interrupted sub-agents are started again here."""
    option = options.get(BACKGROUND_OPTION)
    finished, running, interrupted = (_infos(option, k) for k in ("finished", "running", "interrupted"))
    parts = []
    for info in finished:
        if info.outcome is not None and port.read(info.outcome.run or info.run):
            record(info.outcome, info.task)
        parts.append(_result_text(info))
    restarted = []
    for info in interrupted:
        choice = info.background or TurnEndChoice.WAIT
        try:
            await port.start("", INTERRUPTED_FOLLOWUP, f"restart-{info.subagent}", "", choice=choice,
                             subagent=info.subagent)
            restarted.append(info)
        except Exception as exc:  # not CancelledError: one that cannot start is said, the others still start
            parts.append(f"## Sub-agent {info.subagent} ({info.agent}) was interrupted and could not be started "
                         f"again: {exc}")
    still = [*running, *restarted]
    if still:
        lines = "\n".join(f"- {i.subagent} ({i.agent}) — task: {i.task}" for i in still)
        parts.append("Still working in the background (wait_agents gives their results):\n" + lines)
    if not parts:
        return ""
    return f"{BACKGROUND_RESULTS_HEADING}\n" + "\n\n".join(parts)


def wait_before_answering(port: ChannelSubagents, record: Callable[[RunOutcome, str], None]
                          ) -> Callable[[], Awaitable[str | None]]:
    """The loop's `before_finish` for a root run: the background sub-agents it started with `wait` that still
    work are waited for (no deadline of the wait's own: the task's limits end them), and their results handed to
    the agent before it answers; each at most once."""
    awaited: set[str] = set()

    async def before_finish() -> str | None:
        pending = [s for s, choice in port.started_here().items() if choice is TurnEndChoice.WAIT and s not in awaited]
        if not pending:
            return None
        awaited.update(pending)
        # One wait for them all, with no deadline of its own: answered at once when none works any more.
        reply = await port.ask(pending, wait=True)
        infos = {i.subagent: i for i in reply.subagents}
        unread = [i for i in infos.values() if i.outcome is not None and port.read(i.outcome.run or i.run)]
        if not unread:
            return None
        for info in unread:
            assert info.outcome is not None
            record(info.outcome, info.task)
        return ("Your background sub-agents started with at_turn_end=wait have ended; you had not read their results "
                "yet, so here they are. Take them into account, then give your final answer.\n\n"
                + "\n\n".join(_result_text(i) for i in unread))

    return before_finish
