"""The sub-agent tools: reserved to the root run by two independent lines, and honest about what the daemon says.

The port is scripted (it records what it is asked); the surfaces, the dispatcher and the tools are the real ones.
"""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.tools.doubles import make_ctx
from yagent.ipc.errors import RemoteError
from yagent.ipc.messages import RunOutcome, SubagentInfo, SubagentsReply
from yagent.ipc.vocabulary import ErrorCode, RunStatus, StopReason, SubagentState, TurnEndChoice
from yagent.workers.tools import (
    PROFILES,
    REGISTRY,
    Effect,
    Surface,
    ToolCall,
    ToolContext,
    ToolResult,
    build_surface,
    invoke_tool,
)

ROOT_ONLY = {"spawn_agent", "wait_agents", "cancel_agents"}  # the background: what a turn's end decides on
FOREGROUND = {"agent_status", "send_followup"}  # any agent that delegates, on its own sub-agents


@dataclass
class ScriptedSubagents:
    """A `SubagentPort` that records what it is asked and answers from its script."""

    reply: SubagentsReply = field(default_factory=lambda: SubagentsReply(id=0))
    outcome: RunOutcome | None = None
    refusal: RemoteError | None = None
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    started: dict[str, TurnEndChoice] = field(default_factory=dict)
    seen: set[str] = field(default_factory=set)

    async def follow_up(self, subagent: str, message: str, call_id: str, context: str) -> RunOutcome:
        self.calls.append(("follow_up", {"subagent": subagent, "message": message}))
        if self.refusal is not None:
            raise self.refusal
        assert self.outcome is not None
        return self.outcome

    async def start(self, agent: str, task: str, call_id: str, context: str, *, choice: TurnEndChoice,
                    subagent: str = "") -> tuple[str, str]:
        self.calls.append(("start", {"agent": agent, "task": task, "choice": choice, "subagent": subagent}))
        if self.refusal is not None:
            raise self.refusal
        self.started["a1"] = choice
        return "r1", subagent or "a1"

    async def ask(self, subagents: list[str], *, wait: bool = False, timeout: float = 0.0,
                  cancel: bool = False) -> SubagentsReply:
        self.calls.append(("ask", {"subagents": subagents, "wait": wait, "timeout": timeout, "cancel": cancel}))
        if self.refusal is not None:
            raise self.refusal
        return self.reply

    def started_here(self) -> dict[str, TurnEndChoice]:
        return dict(self.started)

    def read(self, run: str) -> bool:
        first = run not in self.seen
        self.seen.add(run)
        return first


def _call(surface: Surface, ctx: ToolContext, name: str, args: dict[str, Any]) -> ToolResult:
    return asyncio.run(invoke_tool(surface, ToolCall("c1", name, args), ctx))


def _ctx(project: Path, tmp_path: Path, port: ScriptedSubagents, *, delegated: bool = False) -> ToolContext:
    return make_ctx(project, tmp_path, subagents=port, delegated=delegated)


def test_tools_reserved_to_the_root_are_on_no_delegated_surface_whatever_its_profile() -> None:
    assert set(build_surface("director").names()) >= ROOT_ONLY
    assert all(REGISTRY.get(name).root_only for name in ROOT_ONLY)
    for agent in PROFILES:  # the surface line: the Director's own profile, built for a delegated run, too
        assert not ROOT_ONLY & set(build_surface(agent, delegated=True).names()), agent
    delegated = build_surface("director", delegated=True)
    assert delegated.join([dataclasses.replace(REGISTRY.get("spawn_agent"), name="spawn_agent_again")]) == []
    # The agents that delegate are granted them; the others hold none, root or not.
    delegating = [a for a, p in PROFILES.items() if Effect.DELEGATE & p.grant]
    assert [a for a, p in PROFILES.items() if Effect.ORCHESTRATE & p.grant] == delegating == \
        ["director", "coding", "repo"]


def test_an_agent_that_delegates_keeps_its_own_sub_agents_status_and_follow_ups_when_delegated() -> None:
    # "The Director (and any agent that delegates) sees the sub-agents it has and can send a follow-up to one."
    for agent in ("coding", "repo"):
        names = set(build_surface(agent, delegated=True).names())
        assert names >= FOREGROUND, agent
        assert not ROOT_ONLY & names, agent
        assert not any(REGISTRY.get(name).root_only for name in FOREGROUND)
    for agent in ("chat", "devops", "browser", "custom"):
        assert not (FOREGROUND | ROOT_ONLY) & set(build_surface(agent, delegated=True).names()), agent


def test_a_delegated_agent_follows_up_its_sub_agent_in_the_foreground_only(project: Path, tmp_path: Path) -> None:
    port = ScriptedSubagents()
    surface = build_surface("coding", delegated=True)
    background = _call(surface, _ctx(project, tmp_path, port, delegated=True), "send_followup",
                       {"agent_id": "a1", "message": "more", "background": True})
    assert background.is_error and "without background" in background.content and "Nothing was sent" in \
        background.content
    assert port.calls == []
    status = _call(surface, _ctx(project, tmp_path, port, delegated=True), "agent_status", {})
    assert not status.is_error
    followed = _call(surface, _ctx(project, tmp_path, port, delegated=True), "send_followup",
                     {"agent_id": "a1", "message": "more"})
    assert [c[0] for c in port.calls] == ["ask", "follow_up"], followed.content


def test_the_dispatcher_refuses_a_reserved_tool_in_a_delegated_run_even_when_its_surface_holds_it(
        project: Path, tmp_path: Path) -> None:
    # The surface line bypassed: a surface built by hand holds the tool; the dispatcher's line still holds.
    surface = Surface(PROFILES["director"], [REGISTRY.get(name) for name in sorted(ROOT_ONLY)])
    port = ScriptedSubagents()
    for name, args in (("wait_agents", {}), ("spawn_agent", {"agent": "repo", "task": "x"}),
                       ("cancel_agents", {"agent_ids": ["a1"]})):
        result = _call(surface, _ctx(project, tmp_path, port, delegated=True), name, args)
        assert result.is_error and "reserved to the agent that talks to the user" in result.content, name
        assert "Nothing was executed" in result.content
    assert port.calls == []
    # The control arm: the same call in a root run reaches the port.
    result = _call(surface, _ctx(project, tmp_path, port), "wait_agents", {})
    assert not result.is_error
    assert port.calls == [("ask", {"subagents": [], "wait": True, "timeout": 300.0, "cancel": False})]


def test_spawn_agent_starts_only_an_agent_the_run_can_delegate_to_and_says_how_to_collect_it(
        project: Path, tmp_path: Path) -> None:
    port = ScriptedSubagents()
    surface = build_surface("director")
    unknown = _call(surface, _ctx(project, tmp_path, port), "spawn_agent", {"agent": "painter", "task": "look"})
    assert unknown.is_error and "no agent 'painter'" in unknown.content and "repo" in unknown.content
    assert port.calls == []
    started = _call(surface, _ctx(project, tmp_path, port), "spawn_agent",
                    {"agent": "delegate_repo", "task": "map it", "at_turn_end": "keep"})
    assert not started.is_error and "sub-agent a1" in started.content and 'wait_agents(["a1"])' in started.content
    assert "works on after this turn" in started.content
    assert port.calls == [("start", {"agent": "repo", "task": "map it", "choice": TurnEndChoice.KEEP,
                                     "subagent": ""})]


def test_a_refusal_from_the_daemon_is_the_tools_error_word_for_word(project: Path, tmp_path: Path) -> None:
    why = "no sub-agent 'a-forged' belongs to you in this task; agent_status lists yours"
    port = ScriptedSubagents(refusal=RemoteError(ErrorCode.UNKNOWN_SUBAGENT, why))
    result = _call(build_surface("director"), _ctx(project, tmp_path, port), "send_followup",
                   {"agent_id": "a-forged", "message": "go on"})
    assert result.is_error and why in result.content and "Nothing was sent" in result.content


@pytest.mark.parametrize("timeout", [float("nan"), float("inf"), -1, 0, True, "soon"])
def test_wait_agents_refuses_a_deadline_that_is_no_number_of_seconds(project: Path, tmp_path: Path,
                                                                     timeout: object) -> None:
    port = ScriptedSubagents()
    surface = build_surface("director")
    ctx = _ctx(project, tmp_path, port)
    result = asyncio.run(invoke_tool(surface, ToolCall("c1", "wait_agents", {"timeout_seconds": timeout}), ctx))
    assert result.is_error and port.calls == [], result.content


def test_wait_agents_caps_a_huge_deadline_and_reads_each_result_once(project: Path, tmp_path: Path) -> None:
    outcome = RunOutcome(status=RunStatus.DONE, stop_reason=StopReason.AGENT_EXIT, output="found it", run="r9",
                         agent="repo", subagent="a1", handoff={"conclusion": "in a.py", "status": "ok"})
    port = ScriptedSubagents(reply=SubagentsReply(id=0, subagents=[
        SubagentInfo(subagent="a1", agent="repo", state=SubagentState.IDLE, run="r9", task="find", outcome=outcome),
        SubagentInfo(subagent="a2", agent="coding", state=SubagentState.WORKING, run="r8", task="fix")],
        timed_out=True))
    surface = build_surface("director")
    ctx = _ctx(project, tmp_path, port)
    result = _call(surface, ctx, "wait_agents", {"timeout_seconds": 1e300})
    assert port.calls == [("ask", {"subagents": [], "wait": True, "timeout": 3600.0, "cancel": False})]
    assert "found it" in result.content and "Still working" in result.content and "deadline" in result.content
    assert port.seen == {"r9"}


def test_agent_status_lists_each_sub_agent_with_its_state_task_and_conclusion(project: Path, tmp_path: Path) -> None:
    port = ScriptedSubagents(reply=SubagentsReply(id=0, subagents=[
        SubagentInfo(subagent="a1", agent="repo", state=SubagentState.IDLE, task="map the cache",
                     conclusion="the cache is in cache.py"),
        SubagentInfo(subagent="a2", agent="coding", state=SubagentState.WORKING, task="fix it",
                     background=TurnEndChoice.KEEP)]))
    result = _call(build_surface("director"), _ctx(project, tmp_path, port), "agent_status", {})
    assert "a1 repo [idle] — task: map the cache — last conclusion: the cache is in cache.py" in result.content
    assert "a2 coding [working, background: keep] — task: fix it" in result.content
