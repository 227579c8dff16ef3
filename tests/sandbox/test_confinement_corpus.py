"""Real workers, real run_bash, the real kernel: what a confined agent can and cannot touch.

One daemon for the module; each agent kind's worker runs the probe kind (`tests/agents/sandbox_probe.py`) in
its place, so the worker is confined exactly as that kind's profile says, and does what a model talked into
anything would: the shell-escape corpus through run_bash (`shell_escapes.py`), and file operations from the
worker itself. Each case then asserts its own outside target is unchanged.
"""

from __future__ import annotations

import base64
import errno
import json
import os
import subprocess
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.daemon_harness import DaemonProcess, arun, collect_turn, submit, wait_until
from tests.sandbox.shell_escapes import ALLOWED, OUTSIDE_WRITES
from yagent.ipc.confinement import landlock_abi, user_namespaces
from yagent.ipc.vocabulary import ErrorCode, EventType, YoloLevel

pytestmark = pytest.mark.skipif(landlock_abi() < 1, reason="this kernel has no Landlock")

ORIGINAL = "original\n"
SECRET = "SEKRIT-4711"
PROBE = "probe"  # the probe kind's event type (tests/agents/sandbox_probe.py)
BACKGROUND_MARKERS = ("bg_", "nohup_", "setsid_")


@dataclass
class World:
    base: Path
    project: Path
    outside: Path
    other_project: Path
    userhome: Path
    daemon: DaemonProcess
    results: dict[str, dict[str, Any]] = field(default_factory=dict)  # case id -> the probe's answer
    scratch: dict[str, Path] = field(default_factory=dict)  # agent -> its run's scratch dir
    config_bytes: bytes = b""
    control: Path = Path()  # the same corpus, unconfined (--full-yolo), on a copy of the layout


def _fill(template: str, w: World, name: str, *, control: bool = False) -> str:
    outside, project = (w.control / "outside", w.control / "project") if control else (w.outside, w.project)
    target = outside / name
    rel = target.relative_to(project.parent)
    return (template.replace("<T>", str(target)).replace("<N>", str(outside / f"{name}.new"))
            .replace("<D>", str(outside)).replace("<n>", name).replace("<REL>", str(rel))
            .replace("<UP>", f"../{rel}").replace("<B64T>", base64.b64encode(str(target).encode()).decode())
            .replace("<REVT>", str(target)[::-1]))


def _state_attacks(w: World) -> list[tuple[str, str]]:
    """(name, command) trying to rewrite the run's own state, approve itself, read what is yagent's."""
    home, cfg = w.daemon.home, w.daemon.home / "config" / "config.toml"
    raw_submit = _RAW_SUBMIT.format(endpoint=w.daemon.runtime / "control.sock", yolo=YoloLevel.FULL.value)
    return [
        ("grants", "echo '[\"run_bash:pwned\"]' > <TASKDIR>/grants.json"),
        ("grants_py", "python3 -c \"open('<TASKDIR>/grants.json', 'w').write('pwned')\""),
        ("memory_append", "echo pwned >> <TASKDIR>/memory.jsonl"),
        ("memory_rm", "rm -f <TASKDIR>/memory.jsonl; echo pwned > <TASKDIR>/memory.jsonl"),
        ("agents", "echo pwned > <TASKDIR>/agents.json"),
        ("approvals", f"mkdir -p {home}/approvals; echo pwned > {home}/approvals/settings.json"),
        ("config_write", f"echo pwned >> {cfg}"),
        ("config_replace", f"mv {cfg} {cfg}.old; echo pwned > {cfg}"),
        ("breaker", f"echo pwned > {home}/breaker/p.json"),
        ("state_db", f"echo pwned >> {home}/state.db"),
        ("home_new", f"echo pwned > {home}/pwned"),
        ("read_config", f"cat {cfg}"),
        ("grep_home", f"grep -r {SECRET} {home}"),
        ("list_tasks", f"ls {home}/tasks"),
        ("read_other_task", f"cat {home}/tasks/tother/memory.jsonl"),
        ("list_runtime", f"ls -a {w.daemon.runtime}"),
        ("read_ssh", f"cat {w.userhome}/.ssh/id_test"),
        ("python_read_config", f"python3 -c \"print(open('{cfg}').read())\""),
        ("read_other_project", f"cat {w.other_project}/secret.txt"),
        ("signal_daemon", f"kill -0 {w.daemon.proc.pid if w.daemon.proc else 1}"),
        ("signal_worker", "kill -0 $PPID"),
        # Landlock does not mediate connect() to control.sock: the client token the shell cannot read does.
        ("drive_daemon_ps", f"{sys.executable} -m yagent.client.cli ps"),
        ("drive_daemon_run", f"{sys.executable} -m yagent.client.cli run --full-yolo 'echo pwned > {home}/pwned'"),
        ("drive_daemon_raw", f"{sys.executable} -c \"{raw_submit}\""),
    ]


# A client of its own, past the CLI and its token file: a hello with no token, then a full-yolo submit. Exits 0
# only if the daemon took the submit.
_RAW_SUBMIT = ("import os, sys, zmq; from yagent.ipc.messages import PROTOCOL_VERSION, Hello, Submit, Submitted; "
               "from yagent.ipc.records import decode, encode; s = zmq.Context().socket(zmq.DEALER); "
               "s.setsockopt(zmq.IDENTITY, b'x' + os.urandom(16)); s.setsockopt(zmq.RCVTIMEO, 10000); "
               "s.connect('ipc://{endpoint}'); s.send(encode(Hello(id=1, version=PROTOCOL_VERSION))); "
               "s.send(encode(Submit(id=2, project=os.getcwd(), text='pwned', yolo='{yolo}'))); "
               "replies = [decode(s.recv()) for _ in range(2)]; print(replies); "
               "sys.exit(0 if any(isinstance(r, Submitted) for r in replies) else 1)")


STATE_ATTACKS = ("grants", "grants_py", "memory_append", "memory_rm", "agents", "approvals", "config_write",
                 "config_replace", "breaker", "state_db", "home_new", "read_config", "grep_home", "list_tasks",
                 "read_other_task", "list_runtime", "read_ssh", "python_read_config", "read_other_project",
                 "signal_daemon", "signal_worker", "drive_daemon_ps", "drive_daemon_run", "drive_daemon_raw")
# Reads that must fail: their output must not carry the secret, and they must not succeed.
_MUST_FAIL = {"read_config", "grep_home", "list_tasks", "read_other_task", "list_runtime", "read_ssh",
              "python_read_config", "read_other_project", "signal_daemon", "signal_worker", "drive_daemon_ps",
              "drive_daemon_run", "drive_daemon_raw"}

_PROJECT_WRITES = (
    "echo x > README.md", "echo x >> README.md", "rm README.md", "touch new_<n>", "mkdir dir_<n>",
    "python3 -c \"open('README.md', 'w')\"", "sed -i s/a/b/ README.md", "mv README.md moved_<n>",
    "ln -s /etc/passwd link_<n>", "git init -q sub_<n>", "cp /etc/hostname copy_<n>", "truncate -s 0 README.md",
)


def _turn(w: World, agent: str, ops: list[list[Any]], *, project: Path | None = None,
          yolo: str = "none") -> list[dict[str, Any]]:
    async def go() -> list[dict[str, Any]]:
        async with w.daemon.client() as c:
            sub = await submit(c, project or w.project, json.dumps(ops), agent=agent, yolo=yolo)
            events = await collect_turn(c, sub.task)
        finished = [e for e in events if e.type == EventType.RUN_FINISHED]
        assert finished and finished[-1].data["status"] == "done", (agent, finished, w.daemon.log_tail())
        return [e.data for e in events if e.type == PROBE]

    answers = arun(go(), 240)
    assert [a["i"] for a in answers] == list(range(len(ops))), f"{agent}: not every probe answered"
    return answers


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    base = tmp_path_factory.mktemp("sandbox")
    project, outside, other, userhome, cache = (base / n for n in ("project", "outside", "other-project",
                                                                    "userhome", "cache"))
    for d in (project, outside, other, userhome / ".ssh", cache):
        d.mkdir(parents=True)
    (project / "README.md").write_text("a project\n")
    (project / "appendable.txt").write_text("")
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    (other / "main.py").write_text(ORIGINAL)
    (other / "secret.txt").write_text(SECRET)
    (userhome / ".ssh" / "id_test").write_text(SECRET)
    (userhome / "notes.txt").write_text("the user's own notes\n")
    config = (f"# {SECRET}\n[daemon]\nagent_modules = [\"tests.agents.scripted\", \"tests.agents.sandbox_probe\"]\n"
              f"[sandbox]\nwritable_roots = [{json.dumps(str(cache))}]\ndeny_read = [\"~/.ssh\"]\n")
    daemon = DaemonProcess(base / "d", config, env={"HOME": str(userhome)})
    other_task = daemon.home / "tasks" / "tother"
    other_task.mkdir(parents=True)
    (other_task / "memory.jsonl").write_text(SECRET)
    w = World(base, project, outside, other, userhome, daemon, control=base / "control")
    for d in ("project", "outside"):
        (w.control / d).mkdir(parents=True)
    (w.control / "project" / "README.md").write_text("a project\n")
    subprocess.run(["git", "init", "-q", str(w.control / "project")], check=True)
    for i, _ in enumerate(OUTSIDE_WRITES):
        (w.control / "outside" / f"open{i}").write_text(ORIGINAL)
    w.config_bytes = (daemon.home / "config" / "config.toml").read_bytes()
    for agent in ("coding", "devops"):
        for i, _ in enumerate(OUTSIDE_WRITES):
            (outside / f"{agent}{i}").write_text(ORIGINAL)
    daemon.start()
    try:
        _run_everything(w)
        yield w
    finally:
        daemon.close()


def _run_everything(w: World) -> None:
    for agent in ("coding", "devops"):
        ops: list[list[Any]] = [["bash", "echo $TMPDIR"]]
        ids = [f"{agent}-scratch"]
        for i, template in enumerate(OUTSIDE_WRITES):
            ops.append(["bash", _fill(template, w, f"{agent}{i}")])
            ids.append(f"{agent}-shell-{i}")
        for i, template in enumerate(ALLOWED):
            ops.append(["bash", _fill(template, w, f"{agent}ok{i}")])
            ids.append(f"{agent}-allowed-{i}")
        attacks = _state_attacks(w)
        assert tuple(n for n, _ in attacks) == STATE_ATTACKS
        for name, command in attacks:
            ops.append(["bash", command])
            ids.append(f"{agent}-state-{name}")
        if agent == "coding":
            ops.append(["bash", "echo ok > written_by_coding && cat written_by_coding"])
            ids.append("coding-writes-project")
            ops.append(["bash", f"echo ok > {w.base / 'cache'}/coding"])
            ids.append("coding-writes-writable-root")
        else:
            for i, command in enumerate(_PROJECT_WRITES):
                ops.append(["bash", command.replace("<n>", f"devops{i}")])
                ids.append(f"devops-project-{i}")
        # The run's end sweeps what its commands left running: on a busy machine that could come before a
        # background case has done its work (a false "confined"), so the run waits for their markers first.
        ops.append(["bash", _waiting_for(f'ls "$TMPDIR"/{p}* >/dev/null 2>&1' for p in BACKGROUND_MARKERS)])
        ids.append(f"{agent}-background-done")
        answers = _turn(w, agent, ops)
        w.scratch[agent] = Path(answers[0]["out"].split("\n")[1].strip())
        w.results.update(zip(ids, answers, strict=True))
    # The control: every case run unconfined, to show it does change its target when nothing stops it.
    unconfined = [["bash", _fill(t, w, f"open{i}", control=True)] for i, t in enumerate(OUTSIDE_WRITES)]
    background = [i for i, t in enumerate(OUTSIDE_WRITES) if _in_background(t)]
    unconfined.append(["bash", _waiting_for(f"grep -qx x {w.control / 'outside'}/open{i}" for i in background)])
    control = _turn(w, "coding", unconfined, project=w.control / "project", yolo=YoloLevel.FULL)
    w.results.update({f"control-{i}": a for i, a in enumerate(control)})
    for i, template in enumerate(OUTSIDE_WRITES):
        if _in_background(template):  # done after the command returned
            wait_until(lambda i=i: _changed(w.control / "outside", f"open{i}"), 30, f"unconfined {template!r}")
    # Background jobs the corpus left: they ran (their marker is in the scratch dir) before we look.
    for agent in ("coding", "devops"):
        for prefix in BACKGROUND_MARKERS:
            wait_until(lambda a=agent, p=prefix: any(w.scratch[a].glob(f"{p}*")), 30,
                       f"the {prefix} background job of the {agent} corpus to run")
    for agent in ("repo", "devops", "director", "coding"):
        ops = _in_process_ops(w, agent)
        answers = _turn(w, agent, [op for _, op in ops])
        w.results.update({f"{agent}-worker-{name}": a for (name, _), a in zip(ops, answers, strict=True)})


def _in_background(template: str) -> bool:
    return template.rstrip().endswith("&") or template.startswith("setsid -f")


def _waiting_for(checks: Iterable[str]) -> str:
    """A command that returns once every one of the shell `checks` holds (two minutes at most)."""
    return f"timeout 120 sh -c 'until {' && '.join(checks)}; do sleep 0.05; done'"


def _in_process_ops(w: World, agent: str) -> list[tuple[str, list[Any]]]:
    home = w.daemon.home
    return [
        ("write-project", ["write", str(w.project / f"by_{agent}")]),
        ("append-project-file", ["append", str(w.project / "appendable.txt")]),
        ("mkdir-project", ["mkdir", str(w.project / f"dir_{agent}")]),
        ("write-git-hook", ["write", str(w.project / ".git" / "hooks" / f"pre-commit-{agent}")]),
        ("write-outside", ["write", str(w.outside / f"worker_{agent}")]),
        ("write-other-project", ["write", str(w.other_project / "main.py")]),
        ("write-tmp", ["write", f"/tmp/yagent-sandbox-{agent}-{os.getpid()}"]),
        ("write-home-root", ["write", str(home / f"by_{agent}")]),
        ("write-own-state", ["write", "<TASKDIR>/probe.txt"]),
        ("write-scratch", ["write", "<SCRATCH>/probe.txt"]),
        ("read-config", ["read", str(home / "config" / "config.toml")]),
        ("read-other-task", ["read", str(home / "tasks" / "tother" / "memory.jsonl")]),
        ("list-runtime", ["listdir", str(w.daemon.runtime)]),
        ("read-ssh", ["read", str(w.userhome / ".ssh" / "id_test")]),
        ("read-user-notes", ["read", str(w.userhome / "notes.txt")]),
        ("read-project", ["read", str(w.project / "README.md")]),
    ]


# -- the corpus -------------------------------------------------------------------------------------------

SHELL_CASES = [(agent, i) for agent in ("coding", "devops") for i in range(len(OUTSIDE_WRITES))]


def _changed(outside: Path, name: str) -> str:
    """What a case did to its target and its directory ("" if nothing)."""
    target = outside / name
    if target.is_symlink() or not target.exists():
        return f"removed or replaced {target}"
    if target.read_text() != ORIGINAL:
        return f"changed {target}"
    made = sorted(p.name for p in outside.iterdir() if p.name.startswith(f"{name}."))
    return f"created {made} beside it" if made else ""


# Cases that do nothing even unconfined here: no sudo or su password, mktemp's names are not the case's own.
INERT_UNCONFINED = {OUTSIDE_WRITES.index(c) for c in (
    "sudo sh -c 'echo x > <T>'", "su -c 'echo x > <T>'", "mktemp -p <D>", "TMPDIR=<D> mktemp", "mktemp -d -p <D>",
    "python3 -c \"import tempfile; tempfile.mkstemp(dir='<D>')\"", "git -C .. init",
    "unshare -rm sh -c 'mount -t tmpfs none <D> && echo x > <D>/<n>'",
    "unshare -rm sh -c 'mount --bind . <D>'; echo x > <T>")}


@pytest.mark.parametrize(("agent", "i"), SHELL_CASES, ids=[f"{a}-{i}" for a, i in SHELL_CASES])
def test_a_shell_escape_leaves_its_outside_target_unchanged(world: World, agent: str, i: int) -> None:
    answer = world.results[f"{agent}-shell-{i}"]
    did = _changed(world.outside, f"{agent}{i}")
    assert not did, f"{OUTSIDE_WRITES[i]!r} {did}: {answer['out']}"
    if i not in INERT_UNCONFINED:  # the case is a real attack: unconfined, it gets through
        assert _changed(world.control / "outside", f"open{i}"), \
            f"{OUTSIDE_WRITES[i]!r} is inert even unconfined: {world.results[f'control-{i}']['out']}"


def test_the_corpus_is_large_enough_and_the_outside_dir_holds_only_its_sentinels(world: World) -> None:
    assert len(SHELL_CASES) + len(STATE_ATTACKS) * 2 + len(_PROJECT_WRITES) >= 150
    expected = {f"{agent}{i}" for agent, i in SHELL_CASES}
    assert {p.name for p in world.outside.iterdir()} == expected, "something was created outside"
    assert sorted(p.name for p in world.other_project.iterdir()) == ["main.py", "secret.txt"]
    assert (world.other_project / "main.py").read_text() == ORIGINAL
    assert not (world.project.parent / ".git").exists()


@pytest.mark.parametrize("agent", ["coding", "devops"])
@pytest.mark.parametrize("i", range(len(ALLOWED)))
def test_what_a_command_may_do_it_can(world: World, agent: str, i: int) -> None:
    answer = world.results[f"{agent}-allowed-{i}"]
    assert answer["ok"], f"{ALLOWED[i]!r} failed under the sandbox: {answer['out']}"


@pytest.mark.parametrize("agent", ["coding", "devops"])
@pytest.mark.parametrize("name", STATE_ATTACKS)
def test_a_command_cannot_touch_yagents_state_read_its_secrets_or_signal_outside(
        world: World, agent: str, name: str) -> None:
    answer = world.results[f"{agent}-state-{name}"]
    assert SECRET not in answer["out"].split("\n", 1)[-1], f"{name}: the command read a secret"  # past `$ cmd`
    if name in _MUST_FAIL:
        assert not answer["ok"], f"{name} succeeded: {answer['out']}"
    home = world.daemon.home
    assert (home / "config" / "config.toml").read_bytes() == world.config_bytes
    assert not (home / "pwned").exists()
    for path in [*home.glob("tasks/*/*"), *home.glob("approvals/*"), *home.glob("breaker/*")]:
        assert b"pwned" not in path.read_bytes(), f"{name}: {path} was written by a command"


def test_coding_commands_write_the_project_and_the_writable_roots(world: World) -> None:
    assert world.results["coding-writes-project"]["ok"], world.results["coding-writes-project"]["out"]
    assert (world.project / "written_by_coding").read_text() == "ok\n"
    assert world.results["coding-writes-writable-root"]["ok"]
    assert (world.base / "cache" / "coding").read_text() == "ok\n"


@pytest.mark.parametrize("i", range(len(_PROJECT_WRITES)))
def test_a_devops_command_cannot_write_the_project(world: World, i: int) -> None:
    answer = world.results[f"devops-project-{i}"]
    assert not answer["ok"], f"{_PROJECT_WRITES[i]!r} succeeded for DevOps: {answer['out']}"
    assert (world.project / "README.md").read_text() == "a project\n"
    leftovers = [p.name for p in world.project.iterdir() if p.name.endswith(f"devops{i}")]
    assert not leftovers, f"{_PROJECT_WRITES[i]!r} made {leftovers}"


_WORKER_DENIED = ["write-outside", "write-other-project", "write-tmp", "write-home-root", "read-config",
                  "read-other-task", "list-runtime", "read-ssh"]
_WORKER_ALLOWED = ["write-own-state", "write-scratch", "read-user-notes", "read-project"]
_PROJECT_CHANGES = ["write-project", "append-project-file", "mkdir-project"]


@pytest.mark.parametrize("agent", ["repo", "devops", "director", "coding"])
def test_a_worker_itself_is_held_to_its_profile(world: World, agent: str) -> None:
    got = {name: world.results[f"{agent}-worker-{name}"] for name in
           [*_WORKER_DENIED, *_WORKER_ALLOWED, *_PROJECT_CHANGES, "write-git-hook"]}
    for name in _WORKER_DENIED:
        assert not got[name]["ok"], f"{agent} worker could {name}"
        assert got[name]["errno"] in (1, 13), f"{agent} {name}: refused by something else: {got[name]}"
    for name in _WORKER_ALLOWED:
        assert got[name]["ok"], f"{agent} worker could not {name}: {got[name]}"
    writes = agent == "coding"
    for name in _PROJECT_CHANGES:
        assert got[name]["ok"] is writes, f"{agent} worker {name}: {got[name]}"
    # Coding sees .git/hooks read-only where user namespaces exist (tests/sandbox/test_git_namespace.py);
    # elsewhere it may write it and the daemon puts it back after the run (tests/sandbox/test_git_guard.py).
    hook = got["write-git-hook"]
    assert hook["ok"] is (writes and not user_namespaces()), f"{agent} worker write-git-hook: {hook}"
    assert hook["ok"] or hook["errno"] == (errno.EROFS if writes else errno.EACCES), hook
    assert (world.project / f"by_{agent}").exists() is writes
    assert not (world.outside / f"worker_{agent}").exists()
    assert (world.other_project / "main.py").read_text() == ORIGINAL


@pytest.mark.parametrize("agent", ["coding", "devops"])
def test_a_confined_shell_cannot_drive_the_daemon_for_want_of_the_client_token(world: World, agent: str) -> None:
    # Refused for the right reason: the token file is out of the read set, and the daemon answers no one without it.
    ps, raw = world.results[f"{agent}-state-drive_daemon_ps"], world.results[f"{agent}-state-drive_daemon_raw"]
    assert "cannot read the token" in ps["out"] and "Permission denied" in ps["out"], ps["out"]
    assert raw["out"].count(ErrorCode.UNAUTHENTICATED.value) == 2, raw["out"]  # the hello and the submit
