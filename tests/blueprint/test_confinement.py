"""Who may touch a project's persisted blueprint, as the kernel enforces it: every run's worker reads it, a Repo
run's worker alone writes it, no run's commands see it (it lies in the state home), and the view process for
`yagent blueprint` reads it and writes nothing."""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

import pytest

from yagent.ipc.confinement import ConfinementSpec, landlock_abi
from yagent.workers.sandbox._landlock import restrict_self
from yagent.workers.sandbox.policy import blueprint_view_rules, shell_rules, worker_rules

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
    rules = {"worker": lambda: worker_rules(spec, spec.agent == "coding"),
             "shell": lambda: shell_rules(spec, spec.agent == "coding"),
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


def _in_child(*args: object) -> object:
    ctx = multiprocessing.get_context("fork")
    reader, writer = ctx.Pipe(duplex=False)

    def run() -> None:
        writer.send(_try(*args))  # type: ignore[arg-type]
        os._exit(0)

    child = ctx.Process(target=run)
    child.start()
    writer.close()
    assert reader.poll(60)
    got = reader.recv()
    child.join(10)
    return got


@pytest.mark.parametrize("agent, rules, expected", [
    ("repo", "worker", ("ok", "ok")),
    ("coding", "worker", ("ok", "PermissionError")),
    ("director", "worker", ("ok", "PermissionError")),
    ("coding", "shell", ("PermissionError", "PermissionError")),
    ("repo", "view", ("ok", "PermissionError")),
])
def test_the_blueprint_directory_is_read_by_workers_written_by_repo_alone_and_hidden_from_commands(
        tmp_path: Path, agent: str, rules: str, expected: tuple[str, str]) -> None:
    assert _in_child(rules, _spec(tmp_path, agent)) == expected
