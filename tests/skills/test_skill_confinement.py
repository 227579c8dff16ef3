"""What a confined worker may read of skills: `$YAGENT_HOME/skills` (inside the state home it otherwise never
reads) and `[skills] dirs`, each only where it does not lead into what stays hidden. The real kernel's side is
`tests/agents_e2e/test_skills.py` (a confined Director reads a user skill; a skills link to the config grants
nothing)."""

from __future__ import annotations

from pathlib import Path

from yagent.ipc.confinement import ConfinementSpec
from yagent.workers.sandbox import _landlock as ll
from yagent.workers.sandbox import policy


def _spec(tmp_path: Path, skill_dirs: list[Path]) -> ConfinementSpec:
    user = tmp_path / "user"
    state = user / ".yagent"
    for d in (tmp_path / "project", state / "config", state / "tasks" / "t1", state / "scratch" / "r1",
              tmp_path / "run", user / ".ssh"):
        d.mkdir(parents=True, exist_ok=True)
    return ConfinementSpec(abi=7, agent="repo", project_root=str(tmp_path / "project"), home=str(state),
                           runtime_dir=str(tmp_path / "run"), task_dir=str(state / "tasks" / "t1"),
                           scratch_dir=str(state / "scratch" / "r1"), deny_read=[str(user / ".ssh")],
                           skill_dirs=[str(d) for d in skill_dirs])


def _readable(spec: ConfinementSpec, tmp_path: Path) -> set[str]:
    return {r.path for r in policy.worker_rules(spec, writes_project=False, home=str(tmp_path / "user"))
            if r.access & ll.READ_FILE}


def _under(paths: set[str], root: Path) -> set[str]:
    return {p for p in paths if p == str(root) or p.startswith(str(root) + "/")}


def test_the_state_homes_skills_are_readable_and_nothing_else_of_it_but_the_runs_own(tmp_path: Path) -> None:
    state = tmp_path / "user" / ".yagent"
    (state / "skills" / "deploy").mkdir(parents=True)
    spec = _spec(tmp_path, [state / "skills"])
    granted = _under(_readable(spec, tmp_path), state)
    assert granted == {str(state / "skills"), spec.task_dir, spec.scratch_dir}


def test_a_skills_link_into_the_state_home_or_deny_read_grants_nothing_there(tmp_path: Path) -> None:
    state = tmp_path / "user" / ".yagent"
    spec = _spec(tmp_path, [state / "skills", state / "tasks", tmp_path / "team"])
    (state / "skills").symlink_to(state / "config")  # could have led to the config with its keys
    (tmp_path / "team").symlink_to(tmp_path / "user" / ".ssh")
    readable = _readable(spec, tmp_path)
    assert _under(readable, state) == {spec.task_dir, spec.scratch_dir}
    assert not _under(readable, tmp_path / "user" / ".ssh")
    assert str(tmp_path / "team") not in readable


def test_a_configured_directory_is_read_around_what_stays_hidden_in_it(tmp_path: Path) -> None:
    outside = tmp_path / "outside"  # beyond the home, the project and the system: readable only as a skill dir
    (outside / "skills").mkdir(parents=True)
    spec = _spec(tmp_path, [outside / "skills"])
    assert str(outside / "skills") in _readable(spec, tmp_path)
    assert str(outside) not in _readable(spec, tmp_path)
    wide = _spec(tmp_path, [tmp_path / "user"])  # `dirs = ["~"]`: the home, but never the state or ~/.ssh in it
    readable = _readable(wide, tmp_path)
    assert not _under(readable, tmp_path / "user" / ".ssh")
    assert _under(readable, tmp_path / "user" / ".yagent") == {wide.task_dir, wide.scratch_dir}
