"""System prompts: one `<agent>.prompt.md` file per agent, next to this module.

Two passages several prompts share are written once here and placed with a placeholder, so they cannot
drift apart: `{thought_contract}` (the `<thought>` block as `workers/context/thought.py` parses it) and
`{handoff_contract}` (the `agent_exit` arguments as the loop and `workers/tools/handoff.py` check them).
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

__all__ = ["SHARED_PASSAGES", "code_tools_passage", "load_prompt", "render_prompt", "warm_prompts"]

THOUGHT_CONTRACT = """\
# The thought block
Every reply that calls tools starts with exactly one `<thought>` block, before the calls. Keep this shape: \
each key in lowercase at the start of its own line, one plan item per line; keys, markers and tags in \
English, values in {lang}.

<thought>
goal: the objective you are working towards
step: what your last step did and what came of it
reason: why the next action is the right one
plan:
- [x] an item that is finished
- [>] the item you are on now
- [ ] an item still to come
</thought>

`goal` and `reason` must not be empty, and at most one item may be `[>]`. A block out of this shape is \
misread without any error telling you."""

HANDOFF_CONTRACT = """\
Finish with one reply whose text is your complete report — that text is what the agent that delegated \
to you receives — and which calls `agent_exit` with:
- `summary` (required): one or two sentences; the report itself stays in the reply text.
- `handoff`: `conclusion` (required), the answer in one or two sentences; `status` (required): `ok` \
(done), `partial` (some of it) or `error` (could not be done); `facts`, a list (may be empty) of objects \
each with a `claim` and the `where` it can be checked (file:line, the command you ran, or a URL); \
`open_questions`, a list of texts."""

SHARED_PASSAGES = {"thought_contract": THOUGHT_CONTRACT, "handoff_contract": HANDOFF_CONTRACT}

# `{code_tools}`: when to use which code-intelligence tool, for a run whose surface holds them (the caller fills it
# with `code_tools_passage`; "" when `[codeseek] enabled = false` took them away).
_CODE_TOOLS = """\
# Code intelligence
- Before reading a whole file, get its outline with `query_code_skeleton` (a directory works too), then read only \
the definition you need with `query_code_snippet`, or `read_file` with a line range.
- When you do not know where something is done, ask `semantic_search` (ranked keyword search over functions, \
classes and text); for exact text use `search_by_regex`.
- Before changing a function, look up its callers with `find_function_caller` and bring along every caller the \
change affects. `find_function_callee` and `query_call_graph` show what a function depends on{cold_note}.
- Each answer says how it tied a call to a definition: exact, by import, or by name only. Read a by-name-only hit \
before you rely on it.
- While the index is still being built these tools say so instead of answering: use `search_by_regex` and \
`read_file` meanwhile."""


def code_tools_passage(held: set[str], cold: set[str]) -> str:
    """The code-intelligence passage for a surface holding `held` tools (`cold` of them deferred); "" without them."""
    if "semantic_search" not in held:
        return ""
    waiting = sorted(cold & {"find_function_callee", "query_call_graph"})
    note = f" ({' and '.join(waiting)}: deferred, call `load_tool` with the name first)" if waiting else ""
    return _CODE_TOOLS.replace("{cold_note}", note)

_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")
_SUFFIX = ".prompt.md"


@cache
def load_prompt(agent: str) -> str:
    return resources.files(__package__).joinpath(f"{agent}{_SUFFIX}").read_text(encoding="utf-8")


@cache
def _with_shared_passages(agent: str) -> str:
    return _fill(load_prompt(agent), SHARED_PASSAGES)


def warm_prompts() -> list[str]:
    """Read every agent's prompt and place its shared passages, once, in the forkserver: a run's prompt is then
    filled from memory (its file read and first pass cost a fresh worker ~0.15 ms on its way to its first request).
    The agents whose prompts it holds: one that cannot be read is left out (an exception here would take the
    forkserver down), and fails only its own agent's runs, which read it again."""
    held = []
    for entry in resources.files(__package__).iterdir():
        if entry.name.endswith(_SUFFIX):
            agent = entry.name.removesuffix(_SUFFIX)
            try:
                _with_shared_passages(agent)
            except (OSError, UnicodeError):
                continue
            held.append(agent)
    return held


def _fill(text: str, values: dict[str, str]) -> str:
    # One pass: text that a value brings in (a Meta design's instructions) is never searched again.
    return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), text)


def render_prompt(agent: str, **values: str) -> str:
    """Fill `{name}` placeholders: the shared passages first, then the caller's values.

    Other braces in the text (the Meta prompt's JSON example) are left alone.
    """
    return _fill(_with_shared_passages(agent), values)
