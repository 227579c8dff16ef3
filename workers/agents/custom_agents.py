"""Custom agents the Meta agent designed, registered per task in `tasks/{task}/agents.json`.

The registry outlives the run that wrote it: every later Director turn of the task offers each
design as its own `delegate_<name>` tool, and the `custom:<name>` worker reads its design from here.
"""

from __future__ import annotations

import errno
import json
import logging
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from yagent.ipc.atomic_file import write_atomic
from yagent.ipc.state_files import StateFileError, read_state_bytes
from yagent.ipc.state_layout import AGENTS_FILE, task_dir
from yagent.workers.tools import ToolSpec, custom_delegate_spec, palette

__all__ = ["BUILTIN_AGENTS", "CustomAgentRegistry", "Design", "DesignError", "parse_design"]

BUILTIN_AGENTS = frozenset({"director", "coding", "repo", "chat", "devops", "meta", "browser", "custom"})
_NAME = re.compile(r"^[a-z][a-z0-9_]{1,39}$")


class DesignError(ValueError):
    """The Meta agent's design cannot be used; the message says what to fix."""


@dataclass
class Design:
    name: str
    description: str
    system_prompt: str
    tools: list[str] = field(default_factory=list)
    task: str = ""
    created_at: float = 0.0


def _extract_json(text: str) -> dict[str, Any]:
    start = text.find("{")
    end = text.rfind("}")
    if start < 0 or end <= start:
        raise DesignError("the reply contains no JSON object")
    try:
        value = json.loads(text[start:end + 1])
    except json.JSONDecodeError as exc:
        raise DesignError(f"the JSON object does not parse: {exc.msg} at character {exc.pos}") from None
    if not isinstance(value, dict):
        raise DesignError("the JSON value is not an object")
    return value


def parse_design(text: str, fallback_task: str) -> Design:
    data = _extract_json(text)
    raw_name = str(data.get("name", "")).strip().lower()
    name = re.sub(r"[^a-z0-9]+", "_", raw_name).strip("_")
    if not _NAME.match(name):
        raise DesignError(f"name {raw_name!r} must be 2–40 characters of snake_case starting with a letter")
    if name in BUILTIN_AGENTS:
        raise DesignError(f"name {name!r} is taken by a built-in agent; choose another")
    description = str(data.get("description", "")).strip()
    prompt = str(data.get("system_prompt", "")).strip()
    if not description or not prompt:
        raise DesignError("description and system_prompt must both be non-empty")
    tools = data.get("tools", [])
    if not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
        raise DesignError("tools must be a list of tool names")
    available = {spec.name for spec in palette("custom")}
    unknown = sorted(set(tools) - available)
    if unknown:
        raise DesignError(f"unknown or unavailable tools {unknown}; choose from {sorted(available)}")
    task = str(data.get("task", "")).strip() or fallback_task
    return Design(name=name, description=description, system_prompt=prompt, tools=list(dict.fromkeys(tools)),
                  task=task, created_at=time.time())


log = logging.getLogger(__name__)

# Designs are a name, a description, a prompt and a tool list each: a registry past this was not written by Meta.
MAX_REGISTRY_BYTES = 8 << 20


class CustomAgentRegistry:
    def __init__(self, home: Path, task: str) -> None:
        self.path = task_dir(home, task) / AGENTS_FILE
        self._designs: dict[str, Design] = {}
        self._too_large: StateFileError | None = None
        self.reload()

    def reload(self) -> None:
        self._too_large = None
        try:
            data = json.loads(read_state_bytes(self.path, MAX_REGISTRY_BYTES))
        except StateFileError as exc:  # not yagent's (a link, a pipe): the Director goes on without custom agents
            log.warning("custom agents not loaded: %s", exc.strerror)
            self._too_large = exc if exc.errno == errno.EFBIG else None
            data = {}
        except (OSError, ValueError):
            data = {}
        designs = {}
        for name, entry in (data.items() if isinstance(data, dict) else []):
            try:
                designs[name] = Design(**{k: entry[k] for k in Design.__dataclass_fields__ if k in entry})
            except (TypeError, KeyError):
                continue
        self._designs = designs

    def get(self, name: str) -> Design | None:
        return self._designs.get(name)

    def designs(self) -> list[Design]:
        return [self._designs[n] for n in sorted(self._designs)]

    def add(self, design: Design) -> Design | None:
        """Register `design` for the rest of the task; returns the earlier design of that name it replaces. A link or
        a pipe at the registry's name is replaced; a registry too large to read is not (what it holds would be lost):
        its `StateFileError` says what to do."""
        self.reload()
        if self._too_large is not None:
            raise self._too_large
        earlier = self._designs.get(design.name)
        self._designs[design.name] = design
        self.path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps({n: asdict(d) for n, d in self._designs.items()}, ensure_ascii=False, indent=1)
        write_atomic(self.path, text.encode("utf-8"))
        return earlier

    def specs(self) -> list[ToolSpec]:
        return [custom_delegate_spec(d.name, d.description) for d in self.designs()]

    def describe(self) -> str:
        return "\n".join(f"- delegate_{d.name}: {d.description}" for d in self.designs())
