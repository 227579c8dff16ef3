"""What a workflow is made of: role nodes, a loader of facts, a pure router, and what to do when the router has
no step to give.

The engine (`engine.py`) drives any definition the same way: before each decision the definition's loader
reads the facts from the workflow's directory once (impure: files), the router maps them to the next step
(pure: no I/O, same facts → same step), the step runs as a role node — a continuable sub-agent kept under the
role's name — and the definition commits what the step made. `None` from the router is legal: the facts
name a situation (`situation`), and the definition says for each whether the engine finishes, asks the user or
hands the decision to a named planner node (`on_none`). A fact that is missing, damaged or unknown is a
`FactError` saying which file and what to do, never a silent "keep going".
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from yagent.ipc.messages import RunOutcome

__all__ = ["FactError", "Instruction", "NoStep", "OnNone", "RoleSpec", "WorkflowDefinition"]


class FactError(Exception):
    """A fact the router needs is missing, damaged or unknown: which file, what is wrong, what to do."""


@dataclass(frozen=True)
class Instruction:
    """The next step: the role node to run, its task (whole: the node may be new), and why."""

    agent: str  # a role of the definition
    task: str
    reason: str
    chapter: int = 0  # the chapter the step writes or rewrites; 0 for none (a workflow's own coordinate)


class OnNone(enum.StrEnum):
    """What the engine does when the router has no step, per situation."""

    FINISH = "finish"
    ASK_USER = "ask_user"
    PLANNER = "planner"  # hand the decision to the definition's planner node


@dataclass(frozen=True)
class NoStep:
    """The router gave no step: the situation the facts are in, and the definition's action for it."""

    situation: str
    action: OnNone
    reason: str


@dataclass(frozen=True)
class RoleSpec:
    """A role node: its prompt (the stable part of its system prompt) and the model role its engine is configured
    under (`[global.llm.agents] <model_role>`)."""

    prompt: str
    model_role: str


S = TypeVar("S")


@dataclass(frozen=True)
class WorkflowDefinition(Generic[S]):
    """One workflow. `load(dir)` reads the facts (raises `FactError`); `route(state)` is the pure router;
    `situation(state)` names why it gave None; `on_none` maps situations to actions; `planner` is the role the
    PLANNER action runs with `planner_task(state)`; `commit(dir, instruction, outcome)` records what a step made
    (raises `FactError` when it did not make it); `answered(dir, situation, answer)` records the user's answer;
    `hold(dir, state, instruction)` is a one-shot stop asked for before `instruction` (None: go on);
    `prepare(dir)` makes the directory of a new workflow; `progress(state)` is a one-line account."""

    name: str
    roles: Mapping[str, RoleSpec]
    load: Callable[[Path], S]
    route: Callable[[S], Instruction | None]
    situation: Callable[[S], str]
    on_none: Mapping[str, OnNone]
    planner: str
    planner_task: Callable[[S], str]
    commit: Callable[[Path, Instruction, RunOutcome], None]
    answered: Callable[[Path, str, str], None]
    hold: Callable[[Path, S, Instruction], str | None]
    prepare: Callable[[Path], None]
    progress: Callable[[S], str]
    question: Callable[[str], str]  # what the user is asked in a situation whose action is ASK_USER

    def no_step(self, state: S) -> NoStep:
        situation = self.situation(state)
        action = self.on_none.get(situation)
        if action is None:
            raise FactError(f"the {self.name} workflow has no action for the situation {situation!r}")
        return NoStep(situation, action, f"no deterministic next step: {situation}")


def described(value: Any) -> str:
    """A fact's value as an error names it: short, on one line."""
    text = " ".join(repr(value).split())
    return text if len(text) <= 80 else text[:79] + "…"
