"""Tool results: what one tool call hands back to the agent loop."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .spec import ResultPaths, ToolSpec, Truncation

# Character caps per truncation class; LATE is higher because re-reading a file costs a whole step.
TRUNCATION_CAPS: Mapping[Truncation, int | None] = {
    Truncation.NEVER: None,
    Truncation.LATE: 64_000,
    Truncation.EARLY: 24_000,
}

# The first words of a call's result when yagentd stopped while the call ran (a delegation's child too): a
# resumed run finds the calls to pick up again by them. Never a failure of the call.
INTERRUPTED_RESULT = "Interrupted:"
# The first words of the result of a call that was running when its run was cancelled (by the user, a timeout).
CANCELLED_RESULT = "Cancelled: the run was stopped while"
INTERRUPTED_ADVICE = ("This is not a failure: continuing the task (`yagent continue TASK` or /continue) resumes "
                      "where it stopped.")

_JSON_PATH_KEYS = frozenset({"path", "paths", "source", "destination", "output_file"})
_RG_LINE = re.compile(r"^(?P<path>[^\n]+?):(?P<line>\d+):")


@dataclass(frozen=True)
class ToolResult:
    """The answer to one tool call.

    `content` is what the model reads. `data` carries structured facts for the agent loop (the diff of an
    edit, the arguments of `agent_exit`); it is never shown to the model. `stop_run` asks the loop to end
    the run after this batch (only `agent_exit` sets it). `images`: image files the result carries (a
    screenshot), sent with it to a model that reads images.
    """

    content: str
    is_error: bool = False
    data: Mapping[str, Any] | None = None
    stop_run: bool = False
    call_id: str = ""
    tool: str = ""
    images: tuple[str, ...] = ()

    @classmethod
    def ok(cls, content: str, data: Mapping[str, Any] | None = None) -> ToolResult:
        return cls(content=content, data=data)

    @classmethod
    def error(cls, content: str, data: Mapping[str, Any] | None = None) -> ToolResult:
        return cls(content=content, is_error=True, data=data)

    def bound(self, call_id: str, tool: str) -> ToolResult:
        """This result labelled with the call it answers."""
        return dataclasses.replace(self, call_id=call_id, tool=tool)


def truncate_for_model(result: ToolResult, spec: ToolSpec | None) -> ToolResult:
    """Cap `result.content` by the spec's truncation class, ending with a marker that says how to page."""
    cap = TRUNCATION_CAPS[spec.truncation if spec else Truncation.EARLY]
    if cap is None or len(result.content) <= cap:
        return result
    hint = spec.page_hint if spec else "narrow the request to see the rest"
    total = len(result.content)
    marker = f"\n[truncated: showing {cap} of {total} characters; {hint}]"
    return dataclasses.replace(result, content=result.content[:cap] + marker)


def extract_result_paths(mode: ResultPaths, content: str) -> list[str]:
    """The file paths a result shows, in order of first appearance, following the declared format."""
    found: list[str] = []
    if mode is ResultPaths.JSON:
        try:
            _collect_json_paths(json.loads(content), found)
        except (ValueError, TypeError):
            return []
    elif mode is ResultPaths.RG:
        for line in content.splitlines():
            m = _RG_LINE.match(line)
            if m:
                found.append(m.group("path"))
    elif mode is ResultPaths.BARE:
        found = [ln.rstrip("/") for ln in content.splitlines() if ln.strip() and not ln.startswith("[")]
    elif mode is ResultPaths.HEADER:
        first = content.split("\n", 1)[0]
        if first.startswith("File: "):
            found.append(first[len("File: ") :].split("  (", 1)[0])
    return list(dict.fromkeys(found))


def _collect_json_paths(value: Any, out: list[str]) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            if key in _JSON_PATH_KEYS and isinstance(item, str):
                out.append(item)
            elif key in _JSON_PATH_KEYS and isinstance(item, list):
                out.extend(x for x in item if isinstance(x, str))
            else:
                _collect_json_paths(item, out)
    elif isinstance(value, list):
        for item in value:
            _collect_json_paths(item, out)
