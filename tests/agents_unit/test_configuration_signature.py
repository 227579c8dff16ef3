"""The configuration signature: a pure function that every input of a sub-agent's make-up moves."""

from __future__ import annotations

import copy
import dataclasses

import pytest

from yagent.workers.agents.configuration_signature import (
    SubagentConfiguration,
    configuration_parts,
    configuration_signature,
    signed,
    tool_entries,
)

READ = {"name": "read_file", "description": "Read a file.", "parameters": {"type": "object", "properties": {}}}
EXIT = {"name": "agent_exit", "description": "Finish.", "parameters": {"type": "object", "properties": {}}}
BASE = SubagentConfiguration(
    prompt="You are the yagent Repo agent.", provider="fake", model="m-1", reasoning_effort="",
    tools=tool_entries([READ, EXIT], []), profile="repo grant=FS_READ deny=FS_WRITE",
    switches={"lang": "English", "yolo": "none", "blackboard": "True", "artifacts": "True"})

CHANGES = {
    "the role prompt": dict(prompt=BASE.prompt + " Be brief."),
    "the provider": dict(provider="other"),
    "the model": dict(model="m-2"),
    "the reasoning effort": dict(reasoning_effort="high"),
    "a tool's description": dict(tools=tool_entries([{**READ, "description": "Read a text file."}, EXIT], [])),
    "a tool's parameters": dict(tools=tool_entries([{**READ, "parameters": {"type": "object", "properties": {
        "path": {"type": "string"}}}}, EXIT], [])),
    "a tool more": dict(tools=tool_entries([READ, EXIT, {**READ, "name": "list_dir"}], [])),
    "a tool less": dict(tools=tool_entries([EXIT], [])),
    "a tool deferred": dict(tools=tool_entries([READ, EXIT], ["read_file"])),
    "the profile": dict(profile="repo grant=FS_READ|DELEGATE deny=FS_WRITE"),
    "the language switch": dict(switches={**BASE.switches, "lang": "Deutsch"}),
    "the yolo switch": dict(switches={**BASE.switches, "yolo": "yolo"}),
    "the board switch": dict(switches={**BASE.switches, "blackboard": "False"}),
    "a switch more": dict(switches={**BASE.switches, "new": "on"}),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_every_input_moves_the_signature(change: str) -> None:
    changed = dataclasses.replace(BASE, **CHANGES[change])
    assert configuration_signature(changed) != configuration_signature(BASE), change
    assert configuration_parts(changed) != configuration_parts(BASE), change  # and a refusal can name what


def test_the_signature_is_a_pure_function_of_its_input() -> None:
    before = copy.deepcopy(BASE)
    first = configuration_signature(BASE)
    # An equal configuration built anew, tools in another order: the same digest; the input is untouched.
    again = SubagentConfiguration(prompt=BASE.prompt, provider="fake", model="m-1", reasoning_effort="",
                                  tools=tool_entries([EXIT, READ], []), profile=BASE.profile,
                                  switches=dict(reversed(list(BASE.switches.items()))))
    assert configuration_signature(again) == first == configuration_signature(BASE)
    assert before == BASE
    assert len(first) == 32 and int(first, 16) >= 0


def test_the_parts_name_what_changed() -> None:
    changed = configuration_parts(dataclasses.replace(BASE, model="m-2", prompt="other"))
    base = configuration_parts(BASE)
    assert sorted(k for k in base if base[k] != changed[k]) == ["model", "role prompt"]


def test_a_signature_written_by_an_earlier_version_is_the_one_made_now() -> None:
    # Pinned: a sub-agent recorded with this signature is continued only while the same make-up gives the same one.
    # A change of what the signature covers bumps its version instead of moving this silently.
    signature, parts = signed(BASE)
    assert signature == configuration_signature(BASE) == "164b867eb39c3ec5fcc99db5d441b21a"
    assert parts == configuration_parts(BASE)
    assert (parts["role prompt"], parts["tool list"]) == ("072a4bf6811d", "58da2b95bbcc")
