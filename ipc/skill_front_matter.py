"""A skill file's front matter: the block between a first line `---` and the next `---` line, JSON or YAML.

    ---
    name: review
    description: >
      How this team reviews a change:
      what to read first and what to check.
    allowed-tools: Read, Grep
    ---
    # Review
    ...

A block that starts with `{` is read as JSON, any other as YAML — the way `.claude/skills` files write it
(folded and quoted descriptions included) — by PyYAML's safe loader only (`SafeLoader`, or its libyaml build
`CSafeLoader`: never a loader that builds Python objects). The block is bounded
(`MAX_FRONT_MATTER_CHARS`, `MAX_YAML_NODES`, `MAX_YAML_DEPTH`) and YAML aliases are refused before anything is
built: an alias is how a small document expands into billions of values (the "billion laughs"). A file
without front matter, or whose front matter is refused, takes its first line as its description; a refused
front matter is a `problem` the account shows, never skipped silently.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "MAX_DESCRIPTION_CHARS",
    "MAX_FRONT_MATTER_CHARS",
    "MAX_YAML_DEPTH",
    "MAX_YAML_NODES",
    "UNCLOSED",
    "FrontMatter",
    "one_line",
    "read_front_matter",
]

MAX_FRONT_MATTER_CHARS = 32 * 1024
MAX_YAML_NODES = 4096
MAX_YAML_DEPTH = 32
MAX_DESCRIPTION_CHARS = 1024  # what the catalogue may show of one description; the rest is marked as cut
_FENCE = "---"
UNCLOSED = "the front matter opened by `---` on line 1 is never closed"
_YAML_END = "..."


@dataclass(frozen=True, slots=True)
class FrontMatter:
    fields: dict[str, Any] = field(default_factory=dict)  # the block's mapping ({} when none, or refused)
    body: str = ""  # the text after the block (the whole text when there is none)
    problem: str = ""  # why the block was refused: said in the account, the description then from the body
    first_body_line: int = 1  # the file's line number of the body's first line

    @property
    def description(self) -> str:
        """The `description` field as one line, else the body's first line without its heading marks."""
        value = self.fields.get("description")
        if isinstance(value, str) and value.strip():
            return one_line(value)
        for line in self.body.splitlines():
            text = line.strip().lstrip("#").strip()
            if text:
                return one_line(text)
        return ""


def one_line(text: str, limit: int = MAX_DESCRIPTION_CHARS) -> str:
    """`text` with its whitespace runs (newlines of a folded description included) as single spaces and control
    characters escaped (a terminal escape in a cloned project's skill must not reach the user's terminal), cut to
    `limit` characters with a mark."""
    flat = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii")
                   for c in " ".join(text.split()))
    return flat if len(flat) <= limit else flat[:limit - 1].rstrip() + "…"


def read_front_matter(text: str) -> FrontMatter:
    """Split `text` into its front matter and body; a block that cannot be used is a `problem`, never an error."""
    text = text.removeprefix("\ufeff")
    lines = text.split("\n")
    if lines[0].rstrip() != _FENCE:
        return FrontMatter(body=text)
    end = next((i for i in range(1, len(lines)) if lines[i].rstrip() in (_FENCE, _YAML_END)), None)
    if end is None:
        return FrontMatter(body=text, problem=f"{UNCLOSED} by a `---` line; close it, or remove the first line")
    block = "\n".join(lines[1:end])
    body = "\n".join(lines[end + 1:])
    if len(block) > MAX_FRONT_MATTER_CHARS:
        return FrontMatter(body=body, first_body_line=end + 2,
                           problem=f"the front matter is {len(block)} characters long; at most "
                                   f"{MAX_FRONT_MATTER_CHARS} are read — keep the long text in the body")
    try:
        fields = _parse_block(block)
    except _Refused as refused:
        return FrontMatter(body=body, first_body_line=end + 2, problem=str(refused))
    problem = ""
    description = fields.get("description")
    if description is not None and not isinstance(description, str):
        problem = f"`description` must be text, not {_kind(description)}; the body's first line is used instead"
    return FrontMatter(fields=fields, body=body, problem=problem, first_body_line=end + 2)


class _Refused(Exception):
    """The front matter cannot be used; the message says why and where."""


def _parse_block(block: str) -> dict[str, Any]:
    if not block.strip():
        return {}
    if block.lstrip().startswith("{"):
        try:
            value = json.loads(block)
        except json.JSONDecodeError as exc:
            raise _Refused(f"the front matter is not valid JSON: {exc.msg} (line {exc.lineno + 1} of the file, "
                           f"column {exc.colno})") from None
        except RecursionError:
            raise _Refused("the front matter's JSON nests too deep to read") from None
        except ValueError as exc:  # a number past what Python converts (4300 digits), say
            raise _Refused(f"the front matter's JSON holds a value yagent cannot read: {one_line(str(exc), 160)}"
                           ) from None
    else:
        value = _yaml(block)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _Refused(f"the front matter must be a mapping of `key: value` lines, not {_kind(value)}")
    return {str(k): v for k, v in value.items()}


def _yaml(block: str) -> Any:
    import yaml  # only where a skill has YAML front matter: the daemon and clients never pay for it

    # The safe loader (what `safe_load` uses), libyaml's build of it where PyYAML has one: a fifth of the time.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        _check_events(yaml, loader, block)
        return yaml.load(block, Loader=loader)  # a safe loader, never the full one
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        where = f" (line {mark.line + 2} of the file)" if mark is not None else ""
        what = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise _Refused(f"the front matter is not valid YAML: {what}{where}") from None
    except RecursionError:
        raise _Refused("the front matter's YAML nests too deep to read") from None
    except (ValueError, TypeError, OverflowError) as exc:  # a value its constructor refuses (a 13th month, 5000 digits)
        raise _Refused(f"the front matter's YAML holds a value yagent cannot read: {one_line(str(exc), 160)}") from None


def _check_events(yaml: Any, loader: Any, block: str) -> None:
    """Refuse aliases, more than MAX_YAML_NODES nodes and nesting past MAX_YAML_DEPTH, from the parser's events —
    before a single value is built."""
    nodes = depth = 0
    for event in yaml.parse(block, Loader=loader):
        if isinstance(event, yaml.AliasEvent):
            raise _Refused(f"the front matter uses a YAML alias (*{event.anchor}), which yagent does not expand "
                           "(a few aliases can stand for billions of values); write the value out")
        if isinstance(event, yaml.NodeEvent):
            nodes += 1
            if nodes > MAX_YAML_NODES:
                raise _Refused(f"the front matter has more than {MAX_YAML_NODES} YAML values; a skill's front "
                               "matter needs a handful")
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_YAML_DEPTH:
                raise _Refused(f"the front matter nests more than {MAX_YAML_DEPTH} levels deep")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int | float):
        return "a number"
    return type(value).__name__
