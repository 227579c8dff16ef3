"""System prompts checked against the code that reads the model's output.

A prompt that names a tool the agent does not hold, a deferred tool without saying how to load it, an
exit contract the loop would refuse, or a thought block the parser drops fails here — not in a model run.
"""

from __future__ import annotations

import json
import re

import pytest

from yagent.ipc.vocabulary import WRITABLE_HANDOFF_STATUSES
from yagent.workers.agents import prompts
from yagent.workers.agents.director import FIRST_REMINDER, LATER_REMINDER
from yagent.workers.agents.prompts import code_tools_passage, load_prompt, render_prompt, warm_prompts
from yagent.workers.agents.subagents import AGENT_SPECS
from yagent.workers.context.thought import parse_thought
from yagent.workers.tools import REGISTRY, Effect, build_surface, palette

# The placeholders each agent's caller fills (director.py, subagents.py, meta.py).
RENDER_VALUES = {
    "director": {"lang": "English"},
    "coding": {"lang": "English"},
    "repo": {"lang": "English"},
    "chat": {"lang": "English"},
    "devops": {"lang": "English"},
    "browser": {"lang": "English"},
    "meta": {"lang": "English", "palette": "- read_file: Read a file."},
    "custom": {"name": "doc_writer", "description": "Writes docs.", "instructions": "Write docs.", "lang": "English"},
}
for _agent in ("coding", "repo"):  # as subagents.py fills it: from the agent's surface
    _surface = build_surface(_agent)
    RENDER_VALUES[_agent]["code_tools"] = code_tools_passage(set(_surface.names()),
                                                             {s.name for s in _surface.deferred()})
PROMPTS = tuple(RENDER_VALUES)
TOOL_NAMES = frozenset(s.name for s in REGISTRY.specs())
# Prompts whose agent must write the `<thought>` block (seed 003 §10.2: Director, Coding and Browser).
THOUGHT_PROMPTS = ("director", "coding", "browser")


def _rendered(agent: str) -> str:
    """The prompt as the model reads it (shared passages and the caller's values filled in)."""
    return render_prompt(agent, **RENDER_VALUES[agent])


def _named_tools(text: str) -> set[str]:
    """Tool names a text tells the model about: `backticked` registered names, bare names with an
    underscore (too specific to be prose), and every `delegate_*` except the `delegate_<name>` pattern."""
    named = {w for w in re.findall(r"`([a-z_]+)`", text) if w in TOOL_NAMES}
    named |= {w for w in re.findall(r"\b[a-z]+(?:_[a-z]+)+\b", text) if w in TOOL_NAMES}
    named |= set(re.findall(r"\bdelegate_[a-z0-9_]+\b(?!<)", text))
    return named


def _surface_names(agent: str) -> set[str]:
    # Meta holds no tools; what its prompt names are tools of the agent it designs (the custom palette).
    if agent == "meta":
        return {s.name for s in palette("custom")}
    return set(build_surface(agent).names())


def _reminders(agent: str) -> list[str]:
    if agent == "director":
        return [FIRST_REMINDER, LATER_REMINDER]
    spec = AGENT_SPECS.get(agent)
    return [spec.reminder] if spec and spec.reminder else []


@pytest.mark.parametrize("agent", PROMPTS)
def test_every_tool_a_prompt_or_reminder_names_is_on_that_agents_surface(agent: str) -> None:
    offered = _surface_names(agent)
    for text in [_rendered(agent), *_reminders(agent)]:
        missing = _named_tools(text) - offered
        assert not missing, f"{agent}: names {sorted(missing)}, which its surface does not offer"


def test_the_tool_name_scan_sees_what_it_must() -> None:
    # The scan itself: a bare delegation name and a cold tool are found, prose is not.
    assert _named_tools("use delegate_browser, then `design`; a design, delegate_<name>") == {
        "delegate_browser", "design"}
    assert "delegate_browser" in _surface_names("director")


@pytest.mark.parametrize("agent", [a for a in PROMPTS if a != "meta"])
def test_a_prompt_naming_a_deferred_tool_says_to_load_it_first(agent: str) -> None:
    surface = build_surface(agent)
    text = _rendered(agent)
    cold = sorted(n for n in _named_tools(text) if (spec := surface.resolve(n)) is not None and spec.is_cold)
    if cold:
        assert "`load_tool`" in text, f"{agent}: names deferred {cold} without saying to call load_tool first"


def _exit_contract_words() -> set[str]:
    """Every name the agent_exit schema requires, from the schema itself, plus the status values."""
    schema = REGISTRY.get("agent_exit").parameters
    handoff = schema["properties"]["handoff"]
    fact = handoff["properties"]["facts"]["items"]
    return ({*schema["required"], "handoff", *handoff["properties"], *fact["required"]}
            | set(WRITABLE_HANDOFF_STATUSES))


@pytest.mark.parametrize("agent", [a for a in PROMPTS if "`handoff`" in _rendered(a)])
def test_a_prompt_describing_the_handoff_names_every_field_the_loop_checks(agent: str) -> None:
    text = _rendered(agent)
    missing = sorted(w for w in _exit_contract_words() if f"`{w}`" not in text)
    assert not missing, f"{agent}: the exit contract leaves out {missing}"


def test_every_delegated_agent_is_told_to_finish_with_a_handoff() -> None:
    for agent in AGENT_SPECS:
        assert "`agent_exit`" in _rendered(agent) and "`handoff`" in _rendered(agent), agent


@pytest.mark.parametrize("agent", THOUGHT_PROMPTS)
def test_the_thought_block_a_prompt_shows_is_one_the_parser_accepts(agent: str) -> None:
    text = _rendered(agent)
    assert text.count("\n<thought>\n") == 1 and text.count("\n</thought>\n") == 1, agent
    plan = parse_thought(text[text.index("\n<thought>\n"):])
    assert plan is not None and plan.valid, (agent, plan)
    assert plan.goal and plan.step and plan.reason
    assert [status for status, _ in plan.plan] == ["done", "doing", "todo"], plan.plan


@pytest.mark.parametrize("agent", PROMPTS)
def test_rendering_fills_every_placeholder_the_caller_passes(agent: str) -> None:
    text = _rendered(agent)
    assert not re.findall(r"\{[a-z_]+\}", text), f"{agent}: placeholders left unfilled"


def test_rendering_does_not_substitute_inside_inserted_values() -> None:
    # A Meta design's instructions are the model's text: a `{lang}` in them is theirs, not a placeholder.
    text = render_prompt("custom", name="fmt", description="Uses {instructions}.",
                         instructions="Print {lang} and {name} literally.", lang="German")
    assert "Print {lang} and {name} literally." in text
    assert "Uses {instructions}." in text


def test_the_meta_prompt_asks_for_exactly_the_fields_the_design_parser_reads() -> None:
    text = load_prompt("meta")
    example = json.loads(text[text.index("{\n"): text.index("\n}") + 2])
    assert set(example) == {"name", "description", "system_prompt", "tools", "task"}


def test_the_code_tools_passage_follows_the_surface() -> None:
    coding = build_surface("coding")
    passage = code_tools_passage(set(coding.names()), {s.name for s in coding.deferred()})
    # Skeleton before whole files, callers before a change, and how to load the deferred ones.
    assert "`query_code_skeleton`" in passage and "`find_function_caller`" in passage and "`load_tool`" in passage
    assert code_tools_passage(set(build_surface("coding", without=Effect.CODE_INDEX).names()), set()) == ""


def test_the_forkservers_warm_up_reads_every_prompt_and_a_value_is_still_placed_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert sorted(warm_prompts()) == sorted(PROMPTS)

    def no_files(*_args: object) -> None:
        raise AssertionError("a prompt file was read after the warm-up")

    monkeypatch.setattr(prompts.resources, "files", no_files)
    for agent in PROMPTS:  # filled from memory from now on, the same text as before
        assert _rendered(agent) == prompts._fill(prompts._fill(load_prompt(agent), prompts.SHARED_PASSAGES),
                                                 RENDER_VALUES[agent])
    # A value that brings placeholder text in keeps it as text: it is never searched again.
    text = render_prompt("custom", name="n", description="{handoff_contract}", instructions="{lang}", lang="en")
    assert "{handoff_contract}" in text and "{lang}" in text


def test_a_prompt_that_cannot_be_read_is_left_out_of_the_warm_up_without_raising(
        monkeypatch: pytest.MonkeyPatch) -> None:
    real = prompts.load_prompt

    def damaged(agent: str) -> str:
        if agent == "chat":
            raise UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")
        return real(agent)

    prompts._with_shared_passages.cache_clear()
    monkeypatch.setattr(prompts, "load_prompt", damaged)
    try:
        assert sorted(warm_prompts()) == sorted(agent for agent in PROMPTS if agent != "chat")
    finally:
        prompts._with_shared_passages.cache_clear()  # nothing of the damaged run stays for the tests after
