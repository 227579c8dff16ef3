"""Who may touch a project's persisted blueprint, as the kernel enforces it: every run's worker reads it, a Repo
run's worker alone writes it, no run's commands see it (it lies in the state home), and the view process for
`yagent blueprint` reads it and writes nothing. A Browser run's worker (it holds `read_blueprint` but no file tool)
reads the blueprint as the tool does: the project's structure and the persisted notes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.forked_child import in_forked_child
from yagent.ipc.blueprint_settings import BlueprintSettings
from yagent.ipc.confinement import ConfinementSpec, landlock_abi
from yagent.workers.blueprint.completion import commit_blueprint
from yagent.workers.blueprint.reader import BlueprintReader
from yagent.workers.context.tokens import count_tokens_exact
from yagent.workers.sandbox import writes_project
from yagent.workers.sandbox._landlock import restrict_self
from yagent.workers.sandbox.policy import blueprint_view_rules, shell_rules, worker_rules

from .fixtures import make_project

pytestmark = pytest.mark.skipif(landlock_abi() < 1, reason="the kernel has no Landlock")


def _spec(tmp_path: Path, agent: str) -> ConfinementSpec:
    home = tmp_path / "home"
    task, scratch, blueprint = home / "tasks" / "t1", home / "scratch" / "r1", home / "data" / "blueprint" / "p1"
    for d in (task, scratch, blueprint, tmp_path / "project", tmp_path / "run"):
        d.mkdir(parents=True, exist_ok=True)
    (blueprint / "blueprint.md").write_text("---\n{}\n---\n")
    return ConfinementSpec(abi=landlock_abi(), agent=agent, project_root=str(tmp_path / "project"), home=str(home),
                           runtime_dir=str(tmp_path / "run"), task_dir=str(task), scratch_dir=str(scratch),
                           blueprint_dir=str(blueprint), blueprint_writable=agent == "repo")


def _try(rules_of: str, spec: ConfinementSpec) -> tuple[str, str]:
    rules = {"worker": lambda: worker_rules(spec, writes_project(spec.agent)),  # as `confine_worker` builds them
             "shell": lambda: shell_rules(spec, writes_project(spec.agent)),
             "view": lambda: blueprint_view_rules(spec)}[rules_of]()
    restrict_self(spec.abi, rules)
    seen = []
    for mode, name in (("rb", "blueprint.md"), ("wb", "new.md")):
        try:
            with open(os.path.join(spec.blueprint_dir, name), mode):
                seen.append("ok")
        except OSError as exc:
            seen.append(type(exc).__name__)
    return seen[0], seen[1]


@pytest.mark.parametrize("agent, rules, expected", [
    ("repo", "worker", ("ok", "ok")),
    ("coding", "worker", ("ok", "PermissionError")),
    ("director", "worker", ("ok", "PermissionError")),
    ("browser", "worker", ("ok", "PermissionError")),
    ("node:fiction:writer", "worker", ("ok", "PermissionError")),
    ("coding", "shell", ("PermissionError", "PermissionError")),
    ("repo", "view", ("ok", "PermissionError")),
])
def test_the_blueprint_directory_is_read_by_workers_written_by_repo_alone_and_hidden_from_commands(
        tmp_path: Path, agent: str, rules: str, expected: tuple[str, str]) -> None:
    assert in_forked_child(_try, rules, _spec(tmp_path, agent)) == expected


KEPT = {"section": "module", "module": "shop", "field": "purpose", "claim": "The shop's command line; orders go to "
        "core's ledger.", "where": "shop/cli.py:main"}


def _read_as_browser(spec: ConfinementSpec) -> str:
    restrict_self(spec.abi, worker_rules(spec, writes_project(spec.agent)))
    reader = BlueprintReader(Path(spec.project_root), Path(spec.blueprint_dir), BlueprintSettings())
    return reader.read(section="", module="shop", field="", state="all", offset=0, limit=20)


def test_a_browser_runs_worker_reads_the_blueprint_as_read_blueprint_does(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "browser")
    make_project(Path(spec.project_root))
    os.unlink(os.path.join(spec.blueprint_dir, "blueprint.md"))
    account = commit_blueprint(Path(spec.blueprint_dir), Path(spec.project_root), [KEPT], {"shop/cli.py"}, run="r0")
    assert "written 1" in account
    count_tokens_exact("warm up")  # as the forkserver does before any worker is confined (workers/preload.py)
    got = in_forked_child(_read_as_browser, spec)
    assert isinstance(got, str)
    assert "module shop: 5 files" in got  # the structure, derived from the project's files under the sandbox
    assert KEPT["claim"] in got and "cannot be read" not in got  # the persisted note, from the state home
