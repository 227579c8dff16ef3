"""System prompts: one `<agent>.prompt.md` file per agent, next to this module.

Two passages several prompts share are written once here and placed with a placeholder, so they cannot
drift apart: `{thought_contract}` (the `<thought>` block as `workers/context/thought.py` parses it) and
`{handoff_contract}` (the `agent_exit` arguments as the loop and `workers/tools/handoff.py` check them).
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

__all__ = ["SHARED_PASSAGES", "load_prompt", "render_prompt"]

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

_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")


@cache
def load_prompt(agent: str) -> str:
    return resources.files(__package__).joinpath(f"{agent}.prompt.md").read_text(encoding="utf-8")


def _fill(text: str, values: dict[str, str]) -> str:
    # One pass: text that a value brings in (a Meta design's instructions) is never searched again.
    return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), text)


def render_prompt(agent: str, **values: str) -> str:
    """Fill `{name}` placeholders: the shared passages first, then the caller's values.

    Other braces in the text (the Meta prompt's JSON example) are left alone.
    """
    return _fill(_fill(load_prompt(agent), SHARED_PASSAGES), values)
