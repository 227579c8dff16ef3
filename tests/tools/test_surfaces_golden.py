"""Pins every agent's tool surface. A change to a surface must be an explicit update of the golden file.

To accept a deliberate change, review the diff this test prints, then run:

    YAGENT_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/tools/test_surfaces_golden.py

The golden is rendered from `build_surface()`, the same construction path production uses.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

from yagent.workers.tools import AGENTS, Surface, build_surface

GOLDEN = Path(__file__).parent / "golden" / "tool_surfaces.golden"
UPDATE_COMMAND = "YAGENT_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/tools/test_surfaces_golden.py"


def _render_surface(surface: Surface) -> list[str]:
    surface.materialize(s.name for s in surface.deferred())  # parallel admission as seen once loaded
    lines = [f"[{surface.agent}]"]
    for spec in surface.specs():
        mode = "read-only" if spec.is_read_only else "serial"
        auth = spec.auth.value if spec.auth else "undecided"
        parallel = "yes" if surface.is_parallelizable(spec.name) else "no"
        effects = "|".join(spec.effects.names())
        lines.append(
            f"{spec.name:<24} {effects:<18} {spec.frequency.value:<4} {mode:<9} auth={auth:<9} parallel={parallel}"
        )
    if len(lines) == 1:
        lines.append("(no tools)")
    return lines


def render_golden() -> str:
    out = [
        "# Tool surface per agent, rendered from build_surface() (yolo level: none).",
        "# columns: name  effects  hot/cold  read-only/serial  auth policy  parallel admission on this surface",
        f"# Update on purpose only: {UPDATE_COMMAND}",
    ]
    for agent in AGENTS:
        out.append("")
        out.extend(_render_surface(build_surface(agent)))
    return "\n".join(out) + "\n"


def test_agent_surfaces_match_golden() -> None:
    actual = render_golden()
    if os.environ.get("YAGENT_UPDATE_GOLDEN") == "1":
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(actual, encoding="utf-8")
    expected = GOLDEN.read_text(encoding="utf-8") if GOLDEN.exists() else ""
    if actual != expected:
        diff = "".join(difflib.unified_diff(
            expected.splitlines(keepends=True), actual.splitlines(keepends=True), "golden", "actual"
        ))
        raise AssertionError(
            f"tool surfaces drifted from {GOLDEN.name}:\n{diff}\n"
            f"If the change is intended, review it and run: {UPDATE_COMMAND}"
        )
