"""What skills cost a run's start: reading the account (every skills directory, each skill's front matter) and
rendering its catalogue, for 0 skills (the baseline, measured in the same run), 20 and 200 skills with YAML front
matter, and 200 whose catalogue must be shortened to its budget. YAML is imported first, as the forkserver does.

Usage: python bench/skills_start.py [N]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml  # noqa: F401 - preloaded by the forkserver; its import is not a run's cost

from yagent.ipc.skill_account import load_skill_account
from yagent.ipc.skills_settings import SkillsSettings
from yagent.workers.skills import SkillShelf


def _tree(root: Path, skills: int, words: int) -> Path:
    state = root / f"state-{skills}-{words}"
    for i in range(skills):
        folder = state / "skills" / f"skill-{i:03d}"
        folder.mkdir(parents=True)
        description = " ".join(f"word{j}" for j in range(words))
        (folder / "SKILL.md").write_text(f"---\nname: skill-{i:03d}\ndescription: >\n  {description}\n"
                                         "allowed-tools: Read, Grep\n---\n# Steps\n" + "Do the thing.\n" * 200)
    state.mkdir(exist_ok=True)
    return state


def _measure(state: Path, project: Path, user: Path, runs: int, budget: int | None) -> tuple[float, int, str]:
    times = []
    shelf = None
    for _ in range(runs):
        t = time.perf_counter()
        account = load_skill_account(yagent_home=state, project_root=project, settings=SkillsSettings(),
                                     user_home=str(user))
        shelf = SkillShelf(account, model="gpt-4o", budget=budget)
        times.append((time.perf_counter() - t) * 1000)
    assert shelf is not None
    return statistics.median(times), len(shelf.account.skills), shelf.catalogue.note or "whole"


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    root = Path(tempfile.mkdtemp(prefix="ygsk-", dir="/tmp"))
    project, user = root / "project", root / "user"
    project.mkdir()
    user.mkdir()
    cases = [("no skills (baseline)", _tree(root, 0, 0), None), ("20 skills", _tree(root, 20, 12), None),
             ("200 skills", _tree(root, 200, 12), None), ("200 skills, tight budget", _tree(root, 200, 40), 600)]
    base = None
    for label, state, budget in cases:
        p50, count, note = _measure(state, project, user, runs, budget)
        base = base if base is not None else p50
        print(f"{label:<26} skills={count:<4} p50={p50:7.2f} ms  +{p50 - base:6.2f} ms over the baseline "
              f"(ratio {p50 / base:5.1f})  catalogue: {note[:80]}")


if __name__ == "__main__":
    main()
