"""The Landlock module over the real kernel: each confinement runs in a child process (it cannot be undone)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from yagent.ipc.confinement import ABI_ENV, ConfinementSpec, landlock_abi
from yagent.workers.sandbox import _landlock as ll
from yagent.workers.sandbox import policy, writes_project

needs_landlock = pytest.mark.skipif(landlock_abi() < 1, reason="this kernel has no Landlock")


def test_each_abi_handles_the_rights_it_introduced() -> None:
    assert ll.handled_for(0) == 0
    assert ll.handled_for(1) == (1 << 13) - 1
    assert ll.handled_for(2) == ll.handled_for(1) | ll.REFER
    assert ll.handled_for(3) == ll.handled_for(2) | ll.TRUNCATE
    assert ll.handled_for(4) == ll.handled_for(3)  # ABI 4 added network rights, not filesystem ones
    assert ll.handled_for(5) == ll.handled_for(3) | ll.IOCTL_DEV
    assert ll.handled_for(7) == ll.handled_for(5)
    assert ll.scopes_for(5) == 0
    assert ll.scopes_for(6) == ll.SCOPE_ABSTRACT_UNIX_SOCKET | ll.SCOPE_SIGNAL


def test_the_abi_can_be_lowered_from_outside_but_never_raised() -> None:
    kernel = landlock_abi({})
    assert landlock_abi({ABI_ENV: "0"}) == 0
    assert landlock_abi({ABI_ENV: "5"}) == min(5, kernel)
    assert landlock_abi({ABI_ENV: "99"}) == kernel
    assert landlock_abi({ABI_ENV: "garbage"}) == kernel


def test_only_a_kind_whose_profile_writes_files_may_write_the_project() -> None:
    assert writes_project("coding")
    for kind in ("director", "repo", "chat", "devops", "meta", "custom:reviewer", "scripted", "unknown"):
        assert not writes_project(kind), kind


def _spec(tmp_path: Path, **kw: object) -> ConfinementSpec:
    home = tmp_path / "home"
    dirs = {"project_root": tmp_path / "project", "home": home, "runtime_dir": tmp_path / "run",
            "task_dir": home / "tasks" / "t1", "scratch_dir": home / "scratch" / "r1"}
    for d in dirs.values():
        d.mkdir(parents=True, exist_ok=True)
    (home / "config").mkdir()
    (home / "config" / "config.toml").write_text("secret")
    fields = {k: str(v) for k, v in dirs.items()}
    return ConfinementSpec(abi=landlock_abi(), agent="coding", **{**fields, **kw})  # type: ignore[arg-type]


def test_the_read_set_lists_around_what_stays_hidden(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    rules = policy.worker_rules(spec, writes_project=True, home=str(tmp_path))
    paths = {r.path for r in rules}
    assert str(tmp_path) not in paths  # it holds the state home: listed entry by entry instead
    assert str(tmp_path / "project") in paths
    assert not any(p == spec.home or p.startswith(spec.home + "/config") or p == spec.runtime_dir for p in paths)
    writable = {r.path for r in rules if r.access & ll.WRITE_FILE}
    assert {spec.task_dir, spec.scratch_dir, spec.project_root} <= writable
    shell = {r.path for r in policy.shell_rules(spec, writes_project=False, home=str(tmp_path))
             if r.access & ll.WRITE_FILE}
    assert spec.task_dir not in shell and spec.project_root not in shell and spec.scratch_dir in shell


def test_no_path_entry_widens_the_read_set_to_a_system_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/bin:/usr/bin:/tmp/bin:/home/me/bin:/home/me/.pyenv/shims:/opt/tool/bin")
    trees = policy._command_trees("/home/me")
    assert {"/", "/tmp", "/home", "/home/me"}.isdisjoint(trees)
    assert {"/home/me/.pyenv", "/opt/tool", "/tmp/bin"} <= set(trees)


def _minimal_by_dirname(rules: list[ll.Rule]) -> list[ll.Rule]:
    """The rule `policy.minimal` must keep to, written the plain way."""
    merged: dict[str, int] = {}
    for rule in rules:
        merged[rule.path] = merged.get(rule.path, 0) | rule.access
    kept = []
    for path, access in merged.items():
        parent, above = os.path.dirname(path), path
        while parent != above and not (parent in merged and access & ~merged[parent] == 0):
            parent, above = os.path.dirname(parent), parent
        if parent == above:
            kept.append(ll.Rule(path, access))
    return kept


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.lists(st.sampled_from(["a", "b", "ab", "a.b"]), max_size=4),
                          st.integers(min_value=1, max_value=7)), max_size=12))
def test_minimal_drops_exactly_the_rules_an_enclosing_rule_already_grants(entries: list) -> None:
    rules = [ll.Rule("/" + "/".join(parts), access) for parts, access in entries]
    assert policy.minimal(rules) == _minimal_by_dirname(rules)


def test_the_shared_read_rules_are_reused_until_a_directory_listed_for_them_changes(tmp_path: Path) -> None:
    spec = _spec(tmp_path)  # the state home lies in tmp_path, taken as the user's home: it is listed around
    (tmp_path / "tool").mkdir()
    settled = time.time_ns() - 60 * 10**9  # a home last changed a minute ago (a listing of a fresher one is
    os.utime(tmp_path, ns=(settled, settled))  # not kept: an entry made in the same clock tick would not show)
    first = policy.worker_rules(spec, writes_project=True, home=str(tmp_path))
    assert str(tmp_path / "tool") in {r.path for r in first}
    hidden = [os.path.realpath(p) for p in (spec.home, spec.runtime_dir)]
    shared = policy._shared_read(str(tmp_path), hidden)
    assert policy._shared_read(str(tmp_path), hidden) is shared  # nothing listed changed: the same list
    (tmp_path / "later").mkdir()  # an entry made after the listing reaches the next run
    again = {r.path for r in policy.worker_rules(spec, writes_project=True, home=str(tmp_path))}
    assert str(tmp_path / "later") in again and policy._shared_read(str(tmp_path), hidden) is not shared
    assert spec.home not in again and spec.runtime_dir not in again


def test_a_listing_of_a_directory_changed_moments_ago_is_not_kept(tmp_path: Path) -> None:
    spec = _spec(tmp_path)  # tmp_path changed just now: same-tick changes would not move its mtime
    hidden = [os.path.realpath(p) for p in (spec.home, spec.runtime_dir)]
    shared = policy._shared_read(str(tmp_path), hidden)
    assert policy._shared_read(str(tmp_path), hidden) is not shared


def _confined(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    script = textwrap.dedent(code)
    repo = str(Path(__file__).resolve().parents[2])
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          cwd=str(tmp_path), env={**os.environ, "PYTHONPATH": repo})


@needs_landlock
def test_a_link_in_a_listed_home_grants_nothing_where_it_points_outside_the_read_set(tmp_path: Path) -> None:
    home = tmp_path / "home"  # listed entry by entry: it holds the state home
    spec = _spec(tmp_path / "h", project_root=str(tmp_path / "project"))
    (tmp_path / "project").mkdir()
    other = tmp_path / "other-project"
    other.mkdir()
    (other / "secret.txt").write_text("another project's")
    home.mkdir()
    (home / ".yagent").mkdir()
    (home / "notes.txt").write_text("mine")
    (home / "other").symlink_to(other)  # the user's own link to another project
    (home / "system").symlink_to("/usr/share")  # a link into the read set
    spec = ConfinementSpec.read({**spec.to_wire(), "home": str(home / ".yagent")})
    script = textwrap.dedent(f"""
        from yagent.ipc.confinement import ConfinementSpec
        from yagent.workers.sandbox import confine_worker
        state = confine_worker(ConfinementSpec.read({spec.to_wire()!r}), "repo")
        assert state is not None and not state.error, state
        def tried(path):
            try:
                open(path).read(); return "read"
            except IsADirectoryError:
                return "read"
            except OSError as e:
                return e.errno
        import os
        print(tried({str(home / 'notes.txt')!r}), tried({str(home / 'other' / 'secret.txt')!r}),
              tried({str(other / 'secret.txt')!r}), len(os.listdir({str(home / 'system')!r})) > 0)
        """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                            cwd=str(tmp_path), env={**os.environ, "HOME": str(home),
                                                    "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["read", "13", "13", "True"]  # EACCES through the link and directly


@needs_landlock
def test_restrict_self_allows_beneath_its_rules_and_denies_writes_truncation_and_refer_elsewhere(
        tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "f").write_text("original")
    (tmp_path / "in" / "g").write_text("original")
    result = _confined(f"""
        import os
        from yagent.workers.sandbox import _landlock as ll
        ll.restrict_self(ll.kernel_abi(), [ll.Rule("/", ll.READ), ll.Rule({str(tmp_path / 'in')!r}, ll.READ | ll.WRITE),
                                           ll.Rule("/dev/null", ll.WRITE_FILE)])
        def tried(f):
            try:
                f(); return "ok"
            except OSError as e:
                return e.errno
        print(tried(lambda: open({str(tmp_path / 'in' / 'new')!r}, "w").write("x")))
        print(tried(lambda: open({str(tmp_path / 'out' / 'f')!r}, "a").write("x")))
        print(tried(lambda: os.truncate({str(tmp_path / 'out' / 'f')!r}, 0)))
        print(tried(lambda: os.rename({str(tmp_path / 'in' / 'g')!r}, {str(tmp_path / 'out' / 'g')!r})))
        print(tried(lambda: os.link({str(tmp_path / 'out' / 'f')!r}, {str(tmp_path / 'in' / 'link')!r})))
        print(tried(lambda: open({str(tmp_path / 'out' / 'f')!r}).read()))
        """, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["ok", "13", "13", "13", "18", "ok"]  # EACCES; EXDEV: a link across domains
    assert (tmp_path / "out" / "f").read_text() == "original"


@needs_landlock
@pytest.mark.skipif(landlock_abi() < ll.ABI_SCOPES, reason="scopes came with Landlock ABI 6")
def test_the_scopes_keep_a_confined_process_from_signalling_out_or_reaching_abstract_sockets(tmp_path: Path) -> None:
    import socket

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(f"\0yagent-test-{os.getpid()}")
    listener.listen(1)
    try:
        result = _confined(f"""
            import os, signal, socket, subprocess
            from yagent.workers.sandbox import _landlock as ll
            ll.restrict_self(ll.kernel_abi(), [ll.Rule("/", ll.READ)])
            try:
                os.kill({os.getpid()}, 0); print("signalled")
            except PermissionError:
                print("denied")
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect("\\0yagent-test-{os.getpid()}"); print("connected")
            except PermissionError:
                print("denied")
            child = subprocess.Popen(["sleep", "30"])  # its own children: still signalled
            child.send_signal(signal.SIGKILL); print(child.wait())
            """, tmp_path)
    finally:
        listener.close()
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["denied", "denied", "-9"]


@needs_landlock
def test_no_new_privileges_is_set_before_the_domain(tmp_path: Path) -> None:
    result = _confined("""
        from yagent.workers.sandbox import _landlock as ll
        ll.restrict_self(ll.kernel_abi(), [ll.Rule("/", ll.READ)])
        print(open("/proc/self/status").read().split("NoNewPrivs:")[1].split()[0])
        """, tmp_path)
    assert result.stdout.strip() == "1", result.stderr


def test_a_helper_given_malformed_arguments_runs_nothing(tmp_path: Path) -> None:
    helper = Path(policy.__file__).with_name("shell_exec.py")
    marker = tmp_path / "ran"
    for args in (["x"], ["7", "2", "1", "/"], ["7", "0", "touch", str(marker)], ["7", "0", "--"]):
        result = subprocess.run([sys.executable, "-E", "-s", "-S", str(helper), *args], capture_output=True,
                                text=True, timeout=30)
        assert result.returncode == 2 and "bad arguments" in result.stderr, (args, result)
    assert not marker.exists()


@needs_landlock
def test_an_approved_write_outside_the_rules_fails_saying_it_was_approved_and_how_to_allow_it(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    result = _confined(f"""
        import json
        from yagent.ipc.confinement import ConfinementSpec
        from yagent.workers import sandbox
        from tests.tools.doubles import ScriptedAuthorizer, call_tool, make_ctx
        from pathlib import Path
        spec = ConfinementSpec.read({spec.to_wire()!r})
        state = sandbox.confine_worker(spec, "coding")
        assert state is not None and not state.error, state
        approve = ScriptedAuthorizer()
        ctx = make_ctx(Path(spec.project_root), Path({str(tmp_path)!r}), authorizer=approve,
                       scratch_dir=Path(spec.scratch_dir), settings_path=None)
        inside = call_tool(ctx, "create_file", {{"path": "ok.txt", "content": "x"}})
        out = call_tool(ctx, "create_file", {{"path": {str(outside / 'f.txt')!r}, "content": "x"}})
        print(json.dumps([inside.is_error, len(approve.requests), out.is_error, out.content]))
        """, tmp_path)
    assert result.returncode == 0, result.stderr
    inside_failed, asked, refused, text = json.loads(result.stdout.strip().splitlines()[-1])
    assert not inside_failed and asked == 1 and refused  # the user was asked once, for the outside path
    assert "the user approved this, but the sandbox refused it" in text
    assert "[sandbox] writable_roots" in text and "--full-yolo" in text
    assert not (outside / "f.txt").exists() and (tmp_path / "project" / "ok.txt").exists()


def _probe_after_confining(tmp_path: Path, spec: ConfinementSpec, agent: str, *, prepare: bool, abi: int = 0,
                           between: str = "", extra: dict[str, tuple[str, Path]] | None = None,
                           path_env: str = "") -> dict:
    """In a fresh process whose $HOME holds the state home (so the home is listed around it): warm the shared rules
    as the forkserver does, fill a ruleset ahead as a warm worker does (`prepare`), run `between` (a change made while
    it waits), confine for `spec` (under `abi` when given) and try each path. Returns what each try gave, the rules
    added ahead, and whether the ruleset's descriptor was closed."""
    home = Path(spec.home).parent
    probes = {"home_file": ("read", home / "notes.txt"), "home_later": ("read", home / "later" / "f"),
              "config": ("read", Path(spec.home) / "config" / "config.toml"),
              "runtime": ("read", Path(spec.runtime_dir) / "control"),
              "project_read": ("read", Path(spec.project_root) / "main.py"),
              "project_write": ("write", Path(spec.project_root) / "new.py"),
              "scratch_write": ("write", Path(spec.scratch_dir) / "s"),
              "task_write": ("write", Path(spec.task_dir) / "t"),
              "outside_read": ("read", tmp_path / "outside" / "secret"), "devnull": ("write", Path("/dev/null")),
              "usr": ("read", Path(os.path.realpath(sys.executable))), **(extra or {})}
    wire = spec.to_wire() if not abi else {**spec.to_wire(), "abi": abi}
    paths = {name: (how, str(path)) for name, (how, path) in probes.items()}
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
        import json, os
        from yagent.ipc.confinement import ConfinementSpec
        from yagent.workers import sandbox
        from yagent.workers.sandbox import policy
        policy.warm({spec.home!r}, {spec.runtime_dir!r}, [])
        if {prepare!r}:
            sandbox.prepare_shared_rules()
            assert sandbox._prepared is not None, "nothing was prepared"
            fd = sandbox._prepared.ruleset
        {between}
        state = sandbox.confine_worker(ConfinementSpec.read({wire!r}), {agent!r})
        assert state is not None and not state.error, state
        closed = True
        if {prepare!r}:
            try:
                os.fstat(fd); closed = False
            except OSError:
                pass
        def tried(how, path):
            try:
                if how == "read":
                    open(path, "rb").read()
                else:
                    open(path, "ab").write(b"x")
                return "ok"
            except OSError as e:
                return e.errno
        probes = {{name: tried(how, path) for name, (how, path) in {paths!r}.items()}}
        print(json.dumps({{"probes": probes, "ahead": state.ahead, "closed": closed}}))
        """)], capture_output=True, text=True, timeout=60, cwd=str(tmp_path),
        env={**os.environ, "HOME": str(home), "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
             **({"PATH": path_env} if path_env else {})})
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def _listed_home(tmp_path: Path) -> ConfinementSpec:
    """A spec whose state home lies in the user's home (`tmp_path/u`), that home last changed a minute ago (a listing
    of a fresher one is not kept), with a file in each place the probes try."""
    spec = _spec(tmp_path / "u", project_root=str(tmp_path / "project"))
    (tmp_path / "project").mkdir(exist_ok=True)
    (tmp_path / "project" / "main.py").write_text("print()")
    (tmp_path / "u" / "notes.txt").write_text("mine")
    Path(spec.runtime_dir, "control").write_text("credential")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret").write_text("not for runs")
    spec = ConfinementSpec.read({**spec.to_wire(), "project_root": str(tmp_path / "project")})
    settled = time.time_ns() - 60 * 10**9
    os.utime(tmp_path / "u", ns=(settled, settled))
    return spec


@needs_landlock
@pytest.mark.parametrize("agent", ["chat", "coding"])
def test_a_ruleset_filled_while_the_worker_waited_confines_exactly_as_one_built_whole(tmp_path: Path,
                                                                                       agent: str) -> None:
    spec = _listed_home(tmp_path)
    whole = _probe_after_confining(tmp_path, spec, agent, prepare=False)
    ahead = _probe_after_confining(tmp_path, spec, agent, prepare=True)
    assert whole["ahead"] == 0 and ahead["ahead"] >= 10 and ahead["closed"]  # the shared read set went in ahead
    assert ahead["probes"] == whole["probes"]
    probes = ahead["probes"]
    assert probes["home_file"] == probes["project_read"] == probes["usr"] == "ok"
    assert probes["scratch_write"] == probes["task_write"] == probes["devnull"] == "ok"
    assert probes["config"] == probes["runtime"] == probes["outside_read"] == 13  # EACCES
    assert probes["project_write"] == ("ok" if agent == "coding" else 13)


@needs_landlock
def test_a_home_changed_while_the_worker_waited_makes_it_build_its_ruleset_whole(tmp_path: Path) -> None:
    spec = _listed_home(tmp_path)
    later = tmp_path / "u" / "later"
    between = f"os.mkdir({str(later)!r}); open({str(later / 'f')!r}, 'w').write('new')"
    seen = _probe_after_confining(tmp_path, spec, "chat", prepare=True, between=between)
    # The rules filled ahead predate the new entry: not used, and the entry is readable as in a run built whole.
    assert seen["ahead"] == 0 and seen["closed"]
    assert seen["probes"]["home_later"] == "ok" and seen["probes"]["config"] == 13


@needs_landlock
def test_a_shared_tree_moved_into_the_state_home_while_the_worker_waited_grants_nothing_there(tmp_path: Path) -> None:
    spec = _listed_home(tmp_path)
    tools = tmp_path / "tools"  # a $PATH tool root: in the read set every run shares, granted whole
    (tools / "bin").mkdir(parents=True)
    (tools / "bin" / "secret").write_text("moved into hiding")
    moved = Path(spec.home) / "moved"
    # Renamed into the state home (no directory listed for the shared rules changes) and replaced by a new tree.
    between = f"os.rename({str(tools)!r}, {str(moved)!r}); os.makedirs({str(tools / 'bin')!r})"
    probes = {"moved": ("read", moved / "bin" / "secret")}
    seen = _probe_after_confining(tmp_path, spec, "chat", prepare=True, between=between, extra=probes,
                                  path_env=f"{tools / 'bin'}:{os.environ.get('PATH', '')}")
    # Its rule was added on the tree's old directory, which now lies in hiding: the ruleset is built whole instead.
    assert seen["ahead"] == 0 and seen["closed"]
    assert seen["probes"]["moved"] == 13 and seen["probes"]["home_file"] == "ok"


@needs_landlock
@pytest.mark.skipif(landlock_abi() < 2, reason="needs a lower Landlock ABI to ask for")
def test_a_run_under_another_abi_than_the_ruleset_filled_ahead_builds_its_own(tmp_path: Path) -> None:
    spec = _listed_home(tmp_path)
    seen = _probe_after_confining(tmp_path, spec, "chat", prepare=True, abi=landlock_abi() - 1)
    assert seen["ahead"] == 0 and seen["closed"] and seen["probes"]["config"] == 13


def test_an_unconfined_run_closes_the_ruleset_filled_ahead(tmp_path: Path) -> None:
    from yagent.ipc.vocabulary import Unconfined
    from yagent.workers import sandbox

    read, write = os.pipe()
    os.close(write)
    sandbox._prepared = sandbox._Prepared(read, 1, [], ())  # any descriptor stands for the ruleset here
    spec = ConfinementSpec.read({**_spec(tmp_path).to_wire(), "unconfined": Unconfined.FULL_YOLO.value})
    try:
        state = sandbox.confine_worker(spec, "chat")
        assert state is not None and state.unconfined == Unconfined.FULL_YOLO and sandbox._prepared is None
        with pytest.raises(OSError):
            os.fstat(read)
    finally:
        sandbox._prepared = None
        sandbox._current = None


@needs_landlock
@pytest.mark.parametrize("failing", ["listing", "adding"])
def test_a_ruleset_that_cannot_be_filled_ahead_leaves_none_behind(monkeypatch: pytest.MonkeyPatch,
                                                                  failing: str) -> None:
    from yagent.workers import sandbox

    def broken(*_args: object) -> None:
        raise (PermissionError(13, "listing the home") if failing == "listing" else RuntimeError("a defect"))

    if failing == "listing":
        monkeypatch.setattr(sandbox, "warmed_shared_rules", broken)
    else:
        monkeypatch.setattr(sandbox, "warmed_shared_rules", lambda: [ll.Rule("/usr", ll.READ)])
        monkeypatch.setattr(sandbox, "add_rules", broken)
    before = sorted(os.listdir("/proc/self/fd"))
    sandbox.prepare_shared_rules()  # a head start only: the warm worker goes on waiting, its run builds whole
    assert sandbox._prepared is None and sorted(os.listdir("/proc/self/fd")) == before
