"""Who may touch the project approvals, as the kernel enforces it: every run's worker reads them and none writes
them (the daemon does, from the answers it relayed), and no run's commands even read them. The circuit breakers
beside them stay writable by workers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.forked_child import in_forked_child
from yagent.ipc.confinement import ConfinementSpec, landlock_abi
from yagent.workers.sandbox import writes_project
from yagent.workers.sandbox._landlock import restrict_self
from yagent.workers.sandbox.policy import shell_rules, worker_rules

pytestmark = pytest.mark.skipif(landlock_abi() < 1, reason="the kernel has no Landlock")


def _spec(tmp_path: Path, agent: str) -> ConfinementSpec:
    home = tmp_path / "home"
    dirs = {name: home / name for name in ("tasks/t1", "scratch/r1", "approvals", "breaker")}
    for d in (*dirs.values(), tmp_path / "project", tmp_path / "run"):
        d.mkdir(parents=True, exist_ok=True)
    (dirs["approvals"] / "settings.json").write_text('{"authorized_projects": {}}')
    return ConfinementSpec(abi=landlock_abi(), agent=agent, project_root=str(tmp_path / "project"), home=str(home),
                           runtime_dir=str(tmp_path / "run"), task_dir=str(dirs["tasks/t1"]),
                           scratch_dir=str(dirs["scratch/r1"]), shared_dirs=[str(dirs["breaker"])],
                           approvals_dir=str(dirs["approvals"]))


def _attempt(action) -> str:
    try:
        action()
        return "ok"
    except OSError as exc:
        return type(exc).__name__


def _probe(spec: ConfinementSpec, rules_of: str) -> dict[str, str]:
    rules = (worker_rules if rules_of == "worker" else shell_rules)(spec, writes_project(spec.agent))
    restrict_self(spec.abi, rules)
    approvals, breaker = Path(spec.approvals_dir), Path(spec.shared_dirs[0])
    temp = approvals / "settings.json.tmp"

    def replace() -> None:  # as a run would grant itself everything: a new file renamed over the old one
        temp.write_text('{"authorized_projects": {"/": ["outside:/"]}}')
        os.replace(temp, approvals / "settings.json")

    return {
        "read": _attempt(lambda: (approvals / "settings.json").read_text()),
        "list": _attempt(lambda: os.listdir(approvals)),
        "overwrite": _attempt(lambda: (approvals / "settings.json").write_text("{}")),
        "replace": _attempt(replace),
        "remove": _attempt(lambda: (approvals / "settings.json").unlink()),
        "link": _attempt(lambda: os.symlink("/etc/passwd", approvals / "planted")),
        "breaker": _attempt(lambda: (breaker / "a.json").write_text("{}")),
    }


@pytest.mark.parametrize("agent", ["coding", "director", "repo", "chat"])
def test_a_worker_reads_the_approvals_and_cannot_change_them(tmp_path: Path, agent: str) -> None:
    spec = _spec(tmp_path, agent)
    got = in_forked_child(_probe, spec, "worker")
    assert got == {"read": "ok", "list": "ok", "overwrite": "PermissionError", "replace": "PermissionError",
                   "remove": "PermissionError", "link": "PermissionError", "breaker": "ok"}
    assert (Path(spec.approvals_dir) / "settings.json").read_text() == '{"authorized_projects": {}}'
    assert sorted(os.listdir(spec.approvals_dir)) == ["settings.json"]


def test_a_commands_domain_does_not_even_read_the_approvals(tmp_path: Path) -> None:
    got = in_forked_child(_probe, _spec(tmp_path, "coding"), "shell")
    assert {k: v for k, v in got.items() if k != "breaker"} == dict.fromkeys(
        ("read", "list", "overwrite", "replace", "remove", "link"), "PermissionError")
    assert got["breaker"] == "PermissionError"
