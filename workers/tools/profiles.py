"""Capability profiles: which effects each agent is granted or denied. Surfaces are derived from these.

A tool lands on an agent's surface when all of its effects are granted, none is denied, and (for a
delegation tool) the agent is in the tool's declared audience. `deny` is the mechanical guarantee that
also holds for dynamic tools: no MCP tool with FS_WRITE can reach the Director, whatever it declares.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .spec import Effect, ToolSpec


@dataclass(frozen=True)
class Profile:
    agent: str
    grant: Effect
    deny: Effect = Effect.NONE
    # Whether read-only delegations from this agent may run side by side (the Director's fan-out).
    parallel_delegations: bool = False
    # A palette profile offers tools for someone else (the Meta agent) to pick from.
    palette: bool = False

    def admits(self, spec: ToolSpec) -> bool:
        """True when `spec` belongs on this agent's surface."""
        if spec.effects & self.deny or spec.effects & ~self.grant:
            return False
        return not spec.is_delegation or self.agent in spec.audience


_READ_ANALYSE = Effect.FS_READ | Effect.LLM | Effect.CONTROL | Effect.EXTERNAL | Effect.BLUEPRINT

PROFILES: Mapping[str, Profile] = {
    p.agent: p
    for p in (
        Profile(
            "director",
            grant=_READ_ANALYSE | Effect.DELEGATE | Effect.INTERACT | Effect.ORCHESTRATE,
            deny=Effect.FS_WRITE | Effect.SHELL,
            parallel_delegations=True,
        ),
        Profile(
            "coding",
            grant=Effect.FS_READ | Effect.FS_WRITE | Effect.SHELL | Effect.REFLECT | Effect.LLM | Effect.DRAFT
            | Effect.INTERACT | Effect.CONTROL | Effect.EXTERNAL | Effect.CODE_INDEX | Effect.CHECKPOINT
            | Effect.BLUEPRINT
            | Effect.DELEGATE  # delegate_browser alone names Coding in its audience: a page its change affects
            | Effect.ORCHESTRATE,  # its own sub-agents: what they did, a follow-up (background work is the root's)
        ),
        # The code-intelligence tools are the explorers' (seed 003 §4): Repo and Coding, not the Director.
        Profile("repo", grant=_READ_ANALYSE | Effect.DELEGATE | Effect.ORCHESTRATE | Effect.CODE_INDEX,
                deny=Effect.FS_WRITE | Effect.SHELL),
        Profile(
            "chat",
            grant=Effect.REFLECT | Effect.LLM | Effect.INTERACT | Effect.CONTROL | Effect.BLUEPRINT,
            deny=Effect.FS_READ | Effect.FS_WRITE | Effect.SHELL,
        ),
        Profile(
            "devops",
            grant=Effect.FS_READ | Effect.SHELL | Effect.INTERACT | Effect.CONTROL | Effect.EXTERNAL | Effect.BLUEPRINT,
            deny=Effect.FS_WRITE,
        ),
        # Browser drives the project's browser and asks the user; it reads and writes no file and runs nothing (seed
        # 003 §4: browser actions only, no shell, no file writes). Like every run it reads the repository blueprint
        # (the modules and the notes on them, never a file's text).
        Profile(
            "browser",
            grant=Effect.BROWSER | Effect.INTERACT | Effect.CONTROL | Effect.BLUEPRINT,
            deny=Effect.FS_READ | Effect.FS_WRITE | Effect.SHELL | Effect.DELEGATE,
        ),
        # Meta answers with one JSON document from a single LLM call; it holds no tools at all.
        Profile("meta", grant=Effect.NONE),
        # A workflow's role node (`node:<workflow>:<role>`): it reads and writes the project's files (the book,
        # the workflow's facts) and the blueprint, and nothing else — no commands, no delegation, nobody to ask (it
        # runs unattended).
        Profile(
            "node",
            grant=Effect.FS_READ | Effect.FS_WRITE | Effect.LLM | Effect.REFLECT | Effect.DRAFT | Effect.CONTROL
            | Effect.BLUEPRINT,
            deny=Effect.SHELL | Effect.DELEGATE | Effect.INTERACT | Effect.EXTERNAL | Effect.ORCHESTRATE,
        ),
        # A workflow's engine holds no model and calls no tool: this says what its process may touch — it writes
        # the project, where the workflow keeps its facts (every run may read), and reads the blueprint as every run
        # may.
        Profile(
            "workflow",
            grant=Effect.FS_WRITE | Effect.CONTROL | Effect.BLUEPRINT,
            deny=Effect.SHELL | Effect.DELEGATE | Effect.INTERACT | Effect.EXTERNAL | Effect.ORCHESTRATE | Effect.LLM,
        ),
        # Custom agents designed by Meta pick from this palette; it never exceeds what the Director holds
        # and never includes third-party (MCP) tools.
        Profile(
            "custom",
            grant=Effect.FS_READ | Effect.LLM | Effect.INTERACT | Effect.CONTROL | Effect.BLUEPRINT,
            deny=Effect.FS_WRITE | Effect.SHELL | Effect.DELEGATE | Effect.EXTERNAL,
            palette=True,
        ),
    )
}

AGENTS: tuple[str, ...] = tuple(PROFILES)
