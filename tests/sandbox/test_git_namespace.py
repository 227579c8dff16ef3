"""A writing run sees the project's .git hooks and config read-only (a private mount namespace of its worker).

End to end: a real daemon, a real confined Coding worker (the probe kind in its place), the real run_bash, a
real git outside. Units: `protect_git` in a child process (it changes the namespaces of its caller) on every
shape of `.git` a project can have.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.daemon_harness import arun, collect_turn, submit, wait_until
from yagent.ipc.confinement import USERNS_ENV, landlock_abi, user_namespaces

pytestmark = pytest.mark.skipif(not user_namespaces(), reason="no unprivileged user namespaces here")

IDENTITY = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
GIT_ID = "git -c user.name=t -c user.email=t@t"
PROBE = "probe"  # the probe kind's event type (tests/agents/sandbox_probe.py)


def _repo(where: Path) -> Path:
    project = where / "project"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    (project / ".git" / "hooks" / "keep.sample").write_text("#!/bin/sh\nexit 0\n")
    (project / "a.txt").write_text("one\n")
    subprocess.run(["git", "-C", str(project), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(project), "commit", "-qm", "init"], check=True, env={**os.environ, **IDENTITY})
    return project


def _state(project: Path) -> dict[str, tuple[bytes, int]]:
    """Every entry of .git/hooks and .git/config with its content (or link target) and mode."""
    git = project / ".git"
    found = {}
    for path in [git / "config", git / "hooks", *sorted((git / "hooks").rglob("*"))]:
        info = os.lstat(path)
        content = os.readlink(path).encode() if path.is_symlink() else path.read_bytes() if path.is_file() else b""
        found[str(path.relative_to(git))] = (content, info.st_mode)
    return found


def _attacks(pwned: Path) -> list[list[str]]:
    umount = ("python3 -c \"import ctypes,sys; l=ctypes.CDLL(None,use_errno=True); "
              "sys.exit(0 if l.umount2(b'.git/{}', 2) == 0 else 1)\"")
    return [
        ["bash", f"printf '#!/bin/sh\\ntouch {pwned}\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit"],
        ["bash", "echo 'touch pwned' >> .git/hooks/keep.sample"],
        ["bash", f"git config core.hooksPath {pwned.parent}/planted"],
        ["bash", f"printf '[core]\\n\\tfsmonitor = touch {pwned}\\n' >> .git/config"],
        ["bash", "mv .git/hooks .git/hooks.old"],
        ["bash", "mv .git/config .git/config.old"],
        ["bash", "rm -f .git/config"],
        ["bash", "rm -rf .git/hooks"],
        ["bash", "chmod 777 .git/hooks/keep.sample"],
        ["bash", "chmod 777 .git/hooks"],
        ["bash", "touch -d 2000-01-01 .git/config"],
        ["bash", "ln -sf /bin/true .git/hooks/pre-commit"],
        ["bash", "mv .git .git.old && mkdir .git"],
        ["bash", umount.format("hooks")],
        ["bash", umount.format("config")],
        ["bash", "umount -l .git/hooks"],
        ["bash", "mount -o remount,rw,bind .git/hooks"],
        ["bash", "mount --bind <SCRATCH> .git/hooks"],
        ["bash", f"unshare -Urm sh -c 'umount -l .git/hooks; printf \"touch {pwned}\" > .git/hooks/pre-commit'"],
        # Another process's root is its mount namespace, where no read-only view exists: the daemon's, the
        # forkserver's, the user's shells.
        ["bash", f"for p in /proc/[0-9]*; do printf 'touch {pwned}' > $p/root$PWD/.git/hooks/pre-commit "
                 f"2>/dev/null && echo via $p && exit 0; done; exit 1"],
        ["bash", "for p in /proc/[0-9]*; do (cd $p/cwd 2>/dev/null && echo x >> .git/config 2>/dev/null) && exit 0;"
                 " done; exit 1"],
        ["write", ".git/hooks/pre-commit"],
        ["write", ".git/config"],
        ["append", ".git/hooks/keep.sample"],
    ]


@pytest.mark.skipif(landlock_abi() < 1, reason="this kernel has no Landlock")
def test_a_coding_run_cannot_touch_hooks_or_config_and_git_still_works(make_daemon, tmp_path: Path) -> None:
    project = _repo(tmp_path)
    pwned = tmp_path / "pwned"
    before = _state(project)
    attacks = _attacks(pwned)
    work = [["bash", f"echo two >> a.txt && git add -A && {GIT_ID} commit -qm 'from the run' && git status --short"
                     " && git branch feature && git diff HEAD~1 --stat && git log --oneline -1"]]
    daemon = make_daemon('[daemon]\nagent_modules = ["tests.agents.scripted", "tests.agents.sandbox_probe"]\n'
                         "[sandbox]\nwritable_roots = []\n")

    async def go() -> list:
        async with daemon.client() as c:
            sub = await submit(c, project, json.dumps(attacks + work), agent="coding")
            return await collect_turn(c, sub.task)

    probes = [e.data for e in arun(go(), 180) if e.type == PROBE]
    assert len(probes) == len(attacks) + 1, probes
    got_through = [(attacks[p["i"]][1], p) for p in probes[:len(attacks)] if p["ok"]]
    assert got_through == [], got_through
    assert probes[-1]["ok"] and "from the run" in probes[-1]["out"], probes[-1]  # the agent's git work is done
    assert _state(project) == before
    assert not (project / ".git.old").exists()
    log = daemon.log_path.read_text()
    assert "read-only inside the run" in log
    assert "put back as it was before the run" not in log  # nothing changed: the backstop found nothing
    branches = subprocess.run(["git", "-C", str(project), "branch"], capture_output=True, text=True, check=True)
    assert "feature" in branches.stdout
    subprocess.run(["git", "-C", str(project), "commit", "-q", "--allow-empty", "-m", "outside"], check=True,
                   env={**os.environ, **IDENTITY})
    assert not pwned.exists()


_CHILD = """
import ctypes, json, os, subprocess, sys
from yagent.workers.sandbox.git_namespace import protect_git
ns = os.readlink("/proc/self/ns/user")
out = {"bound": protect_git(sys.argv[1])}
out["new_namespace"] = os.readlink("/proc/self/ns/user") != ns
results = {}
for name, op in json.loads(sys.argv[2]).items():
    try:
        if op[0] == "write":
            with open(op[1], "a") as fh:
                fh.write("x")
        elif op[0] == "umount":
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.umount2(op[1].encode(), 2) != 0:
                raise OSError(ctypes.get_errno(), "umount2")
        elif op[0] == "mkdir":
            os.mkdir(op[1])
        elif op[0] == "shell" and subprocess.run(["sh", "-c", op[1]], capture_output=True).returncode != 0:
            raise OSError(1, "the command failed")
        results[name] = 0
    except OSError as exc:
        results[name] = exc.errno
out["results"] = results
print(json.dumps(out))
"""


def _in_child(project: Path, ops: dict[str, list[str]]) -> dict:
    done = subprocess.run([sys.executable, "-c", _CHILD, str(project), json.dumps(ops)], capture_output=True,
                          text=True, cwd=project, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_mounts_are_locked_without_landlock_too(tmp_path: Path) -> None:
    """The worker keeps no capability to unmount with, and a namespace of a command's own inherits them locked."""
    project = _repo(tmp_path)
    before = _state(project)
    nested = "unshare -Urm sh -c 'umount -l .git/{0} && echo x >> .git/{0}{1}'"
    out = _in_child(project, {"umount hooks": ["umount", ".git/hooks"], "umount config": ["umount", ".git/config"],
                              "umount git": ["umount", ".git"], "hook": ["write", ".git/hooks/pre-commit"],
                              "config": ["write", ".git/config"], "object": ["write", ".git/objects/x"],
                              "as root": ["shell", "umount -l .git/hooks && echo x > .git/hooks/pre-commit"],
                              "nested hooks": ["shell", nested.format("hooks", "/pre-commit")],
                              "nested config": ["shell", nested.format("config", "")]})
    assert out["bound"] == [".git/hooks", ".git/config"] and out["new_namespace"]
    results = out["results"]
    assert results.pop("object") == 0  # the rest of .git stays writable: git needs it
    assert all(code != 0 for code in results.values()), results
    assert _state(project) == before


def test_a_gitlink_file_is_bound_read_only_itself(tmp_path: Path) -> None:
    project = tmp_path / "wt"
    project.mkdir()
    (project / ".git").write_text("gitdir: /somewhere/else\n")
    out = _in_child(project, {"pointer": ["write", ".git"]})
    assert out["bound"] == [".git"] and out["results"]["pointer"] != 0
    assert (project / ".git").read_text() == "gitdir: /somewhere/else\n"


def test_no_git_dir_makes_no_namespace(tmp_path: Path) -> None:
    out = _in_child(tmp_path, {"create": ["mkdir", ".git"]})
    assert out == {"bound": [], "new_namespace": False, "results": {"create": 0}}


def test_a_symlinked_hooks_dir_is_not_followed_and_a_missing_one_not_made(tmp_path: Path) -> None:
    project = _repo(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    hooks = project / ".git" / "hooks"
    hooks.rename(tmp_path / "old-hooks")
    hooks.symlink_to(elsewhere)
    out = _in_child(project, {"outside": ["write", str(elsewhere / "f")]})
    assert out["bound"] == [".git/config"]  # the link's target is outside the project: left alone (the backstop)
    assert out["results"]["outside"] == 0 and hooks.is_symlink()
    hooks.unlink()
    out = _in_child(project, {"made later": ["mkdir", ".git/hooks"]})
    assert out["bound"] == [".git/config"] and out["results"]["made later"] == 0  # not protected: the backstop's


def test_the_seam_turns_user_namespaces_off() -> None:
    assert user_namespaces({USERNS_ENV: "0"}) is False
    assert user_namespaces({}) is True  # this machine has them (the module is skipped otherwise)


_WORKER_STEP = """
import os, sys, threading
from yagent.ipc.confinement import ConfinementSpec
from yagent.workers import sandbox
agent, asked, threaded = sys.argv[2], sys.argv[3] == "1", sys.argv[4] == "1"
if threaded:  # the worker got the order wrong: unshare refuses a process with more than one thread
    stop = threading.Event()
    threading.Thread(target=stop.wait, daemon=True).start()
ns = os.readlink("/proc/self/ns/mnt")
spec = ConfinementSpec(abi=1, agent=agent, project_root=sys.argv[1], home="/nonexistent", runtime_dir="/nonexistent",
                       task_dir="/nonexistent", scratch_dir="/nonexistent", git_namespace=asked)
refusal = sandbox.protect_git_dir(spec)
print(repr(refusal), os.readlink("/proc/self/ns/mnt") != ns)
"""


@pytest.mark.parametrize(("agent", "asked", "threaded", "private"), [
    ("coding", True, False, True), ("coding", False, False, False), ("repo", True, False, False),
    ("coding", True, True, False)])
def test_the_worker_step_applies_only_when_asked_and_otherwise_leaves_the_backstop(
        tmp_path: Path, agent: str, asked: bool, threaded: bool, private: bool) -> None:
    project = _repo(tmp_path)
    done = subprocess.run([sys.executable, "-c", _WORKER_STEP, str(project), agent, str(int(asked)),
                           str(int(threaded))], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["''", str(private)]  # the run goes on either way
    # A namespace that could not be made is said, with what still protects the run.
    assert ("checked and put back after it" in done.stderr) is threaded, done.stderr


@pytest.mark.skipif(landlock_abi() < 1, reason="this kernel has no Landlock")
def test_the_daemon_still_stops_a_namespaced_run_and_its_commands(make_daemon, tmp_path: Path) -> None:
    """Signals, the tree sweep and /proc reads reach a worker in its own user namespace as any other."""
    psutil = pytest.importorskip("psutil")
    project = _repo(tmp_path)
    # The probe stands in for the coding kind; the CLI only sees a built-in agent name, so a provider is named
    # (never called) to get past its check that one is usable.
    daemon = make_daemon('[daemon]\nagent_modules = ["tests.agents.scripted", "tests.agents.sandbox_probe"]\n'
                         "[sandbox]\nwritable_roots = []\n"
                         '[global.llm]\nuse_provider = "unused"\n[global.llm.providers.unused]\n'
                         'api_base_url = "http://127.0.0.1:9/v1"\napi_key = "none"\nmodel = "gpt-4o"\n')
    sub = daemon.cli("--json", "run", "--detach", "--agent", "coding", json.dumps([["bash", "sleep 29.125"]]),
                     cwd=project)
    assert sub.returncode == 0, sub.stderr
    task = json.loads(sub.stdout)["task"]

    def sleeper() -> list:
        return [p for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"] == ["sleep", "29.125"]]

    found = wait_until(sleeper, 60, "the run's command to start")
    assert os.readlink(f"/proc/{found[0].pid}/ns/user") != os.readlink("/proc/self/ns/user")  # it is namespaced
    assert daemon.cli("cancel", task).returncode == 0
    wait_until(lambda: json.loads(daemon.cli("--json", "ps").stdout)[0]["state"] == "cancelled", 60,
               "the task to be cancelled")
    wait_until(lambda: not sleeper(), 30, "the run's command to be killed")
