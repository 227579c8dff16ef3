"""WorkspaceGuard: path resolution, traversal and symlink escapes, yolo levels, remembered approvals."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from yagent.ipc.approval_grants import add_project_grants
from yagent.workers.tools import AuthDecision, WorkspaceGuard, YoloLevel

from .doubles import ScriptedAuthorizer, call_tool, make_ctx


def test_resolve_follows_dotdot_and_symlinks(project: Path, outside: Path) -> None:
    guard = WorkspaceGuard(project)
    (project / "src").mkdir()
    (project / "escape").symlink_to(outside)
    assert guard.resolve("src/../a.txt") == project / "a.txt"
    assert guard.is_inside(guard.resolve("src/../a.txt"))
    assert not guard.is_inside(guard.resolve("../outside/x"))
    assert not guard.is_inside(guard.resolve("src/../../outside/x"))
    assert guard.resolve("escape/x") == outside / "x"
    assert not guard.is_inside(guard.resolve("escape/x"))
    assert guard.is_inside(guard.resolve(".")) and guard.display(project) == "."


def test_a_root_given_through_a_symlink_is_resolved(project: Path, tmp_path: Path) -> None:
    alias = tmp_path / "alias"
    alias.symlink_to(project)
    guard = WorkspaceGuard(alias)
    assert guard.root == project and guard.is_inside(guard.resolve(project / "f"))


def test_path_traversal_write_needs_authorisation(project: Path, outside: Path, tmp_path: Path) -> None:
    auth = ScriptedAuthorizer(AuthDecision.DENY)
    ctx = make_ctx(project, tmp_path, authorizer=auth)
    result = call_tool(ctx, "create_file", {"path": "../outside/evil.txt", "content": "x"})
    assert result.is_error and "denied" in result.content
    assert not (outside / "evil.txt").exists()
    assert auth.requests[0].outside_paths == (str(outside / "evil.txt"),)


def test_symlink_escape_write_needs_authorisation(project: Path, outside: Path, tmp_path: Path) -> None:
    (project / "link").symlink_to(outside)
    auth = ScriptedAuthorizer(AuthDecision.DENY)
    ctx = make_ctx(project, tmp_path, authorizer=auth)
    result = call_tool(ctx, "create_file", {"path": "link/evil.txt", "content": "x"})
    assert result.is_error and not (outside / "evil.txt").exists()
    assert len(auth.requests) == 1

    auth.decision = AuthDecision.ALLOW_ONCE
    result = call_tool(ctx, "create_file", {"path": "link/evil.txt", "content": "x"})
    assert not result.is_error and (outside / "evil.txt").read_text() == "x"


def test_symlinked_file_inside_pointing_outside_is_outside(project: Path, outside: Path, tmp_path: Path) -> None:
    target = outside / "secret.txt"
    target.write_text("old\n")
    (project / "innocent.txt").symlink_to(target)
    auth = ScriptedAuthorizer(AuthDecision.DENY)
    ctx = make_ctx(project, tmp_path, authorizer=auth)
    result = call_tool(ctx, "search_replace_in_file", {"path": "innocent.txt", "search": "old", "replace": "new"})
    assert result.is_error and target.read_text() == "old\n"


def test_in_workspace_writes_do_not_prompt(project: Path, tmp_path: Path) -> None:
    auth = ScriptedAuthorizer(AuthDecision.DENY)
    ctx = make_ctx(project, tmp_path, authorizer=auth)
    assert not call_tool(ctx, "create_file", {"path": "a/b.txt", "content": "x"}).is_error
    assert auth.requests == []


def test_reads_outside_the_workspace_are_not_gated(project: Path, outside: Path, tmp_path: Path) -> None:
    (outside / "notes.txt").write_text("hello\n")
    ctx = make_ctx(project, tmp_path)  # no authorizer at all
    result = call_tool(ctx, "read_file", {"path": str(outside / "notes.txt")})
    assert not result.is_error and "hello" in result.content


@pytest.mark.parametrize(
    ("yolo", "prompted"),
    [(YoloLevel.NONE, True), (YoloLevel.YOLO, False), (YoloLevel.FULL, False)],
)
def test_dangerous_in_workspace_delete_by_yolo_level(
    project: Path, tmp_path: Path, yolo: YoloLevel, prompted: bool
) -> None:
    (project / "old.txt").write_text("x")
    auth = ScriptedAuthorizer(AuthDecision.DENY)
    ctx = make_ctx(project, tmp_path, authorizer=auth, yolo=yolo)
    result = call_tool(ctx, "delete_file", {"path": "old.txt"})
    assert bool(auth.requests) is prompted
    assert (project / "old.txt").exists() is prompted
    assert result.is_error is prompted
    if prompted:
        assert auth.requests[0].dangerous_inside and auth.requests[0].outside_paths == ()


@pytest.mark.parametrize(
    ("yolo", "prompted"),
    [(YoloLevel.NONE, True), (YoloLevel.YOLO, True), (YoloLevel.FULL, False)],
)
def test_outside_delete_by_yolo_level(
    project: Path, outside: Path, tmp_path: Path, yolo: YoloLevel, prompted: bool
) -> None:
    victim = outside / "victim.txt"
    victim.write_text("x")
    auth = ScriptedAuthorizer(AuthDecision.DENY)
    ctx = make_ctx(project, tmp_path, authorizer=auth, yolo=yolo)
    call_tool(ctx, "delete_file", {"path": str(victim)})
    assert bool(auth.requests) is prompted
    assert victim.exists() is prompted
    if yolo is YoloLevel.YOLO:
        # --yolo drops the in-workspace part of the question, not the outside part.
        assert not auth.requests[0].dangerous_inside and auth.requests[0].outside_paths == (str(victim),)


@pytest.mark.parametrize(
    ("yolo", "prompted"),
    [(YoloLevel.NONE, True), (YoloLevel.YOLO, False), (YoloLevel.FULL, False)],
)
def test_bash_is_dangerous_flag_by_yolo_level(project: Path, tmp_path: Path, yolo: YoloLevel, prompted: bool) -> None:
    auth = ScriptedAuthorizer(AuthDecision.DENY)
    ctx = make_ctx(project, tmp_path, authorizer=auth, yolo=yolo)
    call_tool(ctx, "run_bash", {"command": "touch marker", "is_dangerous": True})
    assert bool(auth.requests) is prompted
    assert (project / "marker").exists() is not prompted


def test_bash_without_danger_flag_inside_does_not_prompt(project: Path, tmp_path: Path) -> None:
    auth = ScriptedAuthorizer(AuthDecision.DENY)
    ctx = make_ctx(project, tmp_path, authorizer=auth)
    result = call_tool(ctx, "run_bash", {"command": "mkdir -p sub && touch sub/f && ls sub > /dev/null"})
    assert not result.is_error and auth.requests == []


@pytest.mark.parametrize(
    ("yolo", "prompted"),
    [(YoloLevel.NONE, True), (YoloLevel.YOLO, True), (YoloLevel.FULL, False)],
)
def test_bash_naming_an_outside_path_by_yolo_level(
    project: Path, tmp_path: Path, yolo: YoloLevel, prompted: bool
) -> None:
    auth = ScriptedAuthorizer(AuthDecision.DENY)
    ctx = make_ctx(project, tmp_path, authorizer=auth, yolo=yolo)
    result = call_tool(ctx, "run_bash", {"command": "test -e /etc/passwd && echo found-it"})
    assert bool(auth.requests) is prompted
    assert ("found-it\n" in result.content) is not prompted
    if prompted:
        assert auth.requests[0].outside_paths == ("/etc/passwd",)
        assert auth.requests[0].summary == "test -e /etc/passwd && echo found-it"


@pytest.mark.parametrize(
    ("command", "flagged"),
    [
        ("cat /etc/hosts", ["/etc/hosts"]),
        ("cp a.txt " + "../" * 40 + "etc/shadow", ["/etc/shadow"]),
        ("gcc -I/opt/include x.c", ["/opt/include"]),
        ("make PREFIX=/opt/tool install", ["/opt/tool"]),
        ("cat ~/.bashrc", ["<home>/.bashrc"]),
        ("echo hi > /dev/null 2>/dev/stderr", []),
        ("/usr/bin/env python3 -c 'print(1)'", []),
        ("mktemp -p /tmp", []),
        ("ls src/../README.md", []),
        ("cat <scratch>/run_bash/out.log", []),
        ("echo 'unbalanced", []),
        ("echo ';' /etc/hosts", ["/etc/hosts"]),
        ("cd && rm -rf build", ["<home>"]),
        ("cd; ls", ["<home>"]),
        ("cd - && make clean", ["/etc"]),
        ("cd /etc && cat hosts ../root/x", ["/etc", "/root/x"]),
        ("cd src", []),
        ("grep -rn 'a/b' .", []),
    ],
)
def test_command_tokens_outside_the_workspace(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str, flagged: list[str]
) -> None:
    monkeypatch.setenv("HOME", "/home/yagent-test-user")  # a home outside /tmp, wherever the suite runs
    monkeypatch.setenv("OLDPWD", "/etc")
    monkeypatch.delenv("CDPATH", raising=False)
    (project / "src").mkdir()
    ctx = make_ctx(project, tmp_path)
    command = command.replace("<scratch>", str(ctx.scratch_dir))
    expected = [f.replace("<home>", os.path.expanduser("~")) for f in flagged]
    found = [str(p) for p in ctx.guard.command_outside_paths(command)]
    assert found == [os.path.realpath(e) for e in expected]


def test_relative_words_through_an_inside_symlink_to_outside_are_outside(project: Path, tmp_path: Path) -> None:
    (project / "conf").symlink_to("/etc")
    auth = ScriptedAuthorizer(AuthDecision.DENY)
    ctx = make_ctx(project, tmp_path, authorizer=auth)
    assert [str(p) for p in ctx.guard.command_outside_paths("cat conf/hostname")] == ["/etc/hostname"]
    result = call_tool(ctx, "run_bash", {"command": "cat conf/hostname > copy.txt"})
    assert result.is_error and "denied" in result.content and not (project / "copy.txt").exists()
    assert auth.requests[0].outside_paths == ("/etc/hostname",)


def test_a_program_run_through_an_inside_symlink_is_not_a_path_it_touches(project: Path, tmp_path: Path) -> None:
    (project / "bin").mkdir()
    (project / "bin" / "python").symlink_to("/usr/lib/python3-not-there")
    ctx = make_ctx(project, tmp_path)
    assert ctx.guard.command_outside_paths("bin/python -c pass") == []


def test_a_prompt_about_a_link_names_the_link_and_where_it_points(project: Path, tmp_path: Path) -> None:
    (project / "data").mkdir()
    (project / "data" / "keep.txt").write_text("keep\n")
    (project / "alias.txt").symlink_to("data/keep.txt")
    auth = ScriptedAuthorizer(AuthDecision.DENY)
    ctx = make_ctx(project, tmp_path, authorizer=auth)
    assert call_tool(ctx, "delete_file", {"path": "alias.txt"}).is_error
    assert auth.requests[0].summary == "delete_file alias.txt (a link to data/keep.txt)"
    assert (project / "alias.txt").is_symlink() and (project / "data" / "keep.txt").exists()


def test_no_authorizer_means_refusal_with_next_steps(project: Path, outside: Path, tmp_path: Path) -> None:
    ctx = make_ctx(project, tmp_path)
    result = call_tool(ctx, "create_file", {"path": str(outside / "x.txt"), "content": "x"})
    assert result.is_error and "--yolo" in result.content and not (outside / "x.txt").exists()


def test_allow_once_is_not_remembered(project: Path, tmp_path: Path) -> None:
    auth = ScriptedAuthorizer(AuthDecision.ALLOW_ONCE)
    ctx = make_ctx(project, tmp_path, authorizer=auth)
    for name in ("a", "b"):
        (project / name).write_text("x")
        call_tool(ctx, "delete_file", {"path": name})
    assert len(auth.requests) == 2


def test_allow_session_is_remembered_in_memory_only(project: Path, outside: Path, tmp_path: Path) -> None:
    auth = ScriptedAuthorizer(AuthDecision.ALLOW_SESSION)
    ctx = make_ctx(project, tmp_path, authorizer=auth)
    (project / "a").write_text("x")
    (project / "b").write_text("x")
    call_tool(ctx, "delete_file", {"path": "a"})
    call_tool(ctx, "delete_file", {"path": "b"})
    assert len(auth.requests) == 1 and not (project / "b").exists()
    assert ctx.guard.approvals.session_grants() == {"inside:delete_file"}
    assert not ctx.settings_path or not ctx.settings_path.exists()
    fresh = make_ctx(project, tmp_path, authorizer=auth)  # a new session starts without the approval
    (project / "c").write_text("x")
    call_tool(fresh, "delete_file", {"path": "c"})
    assert len(auth.requests) == 2


def test_allow_project_holds_for_the_run_and_the_worker_writes_no_file(project: Path, outside: Path,
                                                                       tmp_path: Path) -> None:
    settings = tmp_path / "home" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps({"theme": "dark"}))
    auth = ScriptedAuthorizer(AuthDecision.ALLOW_PROJECT)
    ctx = make_ctx(project, tmp_path, authorizer=auth, settings_path=settings)
    call_tool(ctx, "create_file", {"path": str(outside / "one.txt"), "content": "1"})
    call_tool(ctx, "create_file", {"path": str(outside / "one.txt"), "content": "2", "overwrite": True})
    assert len(auth.requests) == 1 and (outside / "one.txt").read_text() == "2"
    # Keeping it for later runs is the daemon's, which saw the answer go by (tests/daemon/test_answered_approvals.py).
    assert json.loads(settings.read_text()) == {"theme": "dark"}
    assert sorted(p.name for p in settings.parent.iterdir()) == ["settings.json"]


def test_project_approvals_in_the_file_count_for_that_project_alone(project: Path, outside: Path,
                                                                    tmp_path: Path) -> None:
    settings = tmp_path / "home" / "settings.json"
    settings.parent.mkdir()
    add_project_grants(settings, str(ctx_root(project, tmp_path)), [f"outside:{outside / 'one.txt'}"])
    later = make_ctx(project, tmp_path, authorizer=ScriptedAuthorizer(AuthDecision.DENY), settings_path=settings)
    result = call_tool(later, "create_file", {"path": str(outside / "one.txt"), "content": "2"})
    assert not result.is_error and (outside / "one.txt").read_text() == "2"
    other_root = tmp_path / "other-project"
    other_root.mkdir()
    other = make_ctx(other_root, tmp_path, authorizer=ScriptedAuthorizer(AuthDecision.DENY), settings_path=settings)
    denied = call_tool(other, "create_file", {"path": str(outside / "one.txt"), "content": "3", "overwrite": True})
    assert denied.is_error and (outside / "one.txt").read_text() == "2"  # approvals belong to one project


def ctx_root(project: Path, tmp_path: Path) -> Path:
    """The project root as a run's guard resolves it (the key of its approvals)."""
    return make_ctx(project, tmp_path).guard.root


def test_approving_a_directory_covers_what_lies_beneath(project: Path, outside: Path, tmp_path: Path) -> None:
    auth = ScriptedAuthorizer(AuthDecision.DENY)
    ctx = make_ctx(project, tmp_path, authorizer=auth, session_grants=frozenset({f"outside:{outside}"}))
    result = call_tool(ctx, "create_file", {"path": str(outside / "deep" / "x.txt"), "content": "x"})
    assert not result.is_error and auth.requests == []


def test_a_session_approval_covers_only_the_tool_it_was_given_for(project: Path, tmp_path: Path) -> None:
    auth = ScriptedAuthorizer(AuthDecision.ALLOW_SESSION)
    ctx = make_ctx(project, tmp_path, authorizer=auth)
    (project / "a").write_text("x")
    call_tool(ctx, "delete_file", {"path": "a"})
    auth.decision = AuthDecision.DENY
    result = call_tool(ctx, "run_bash", {"command": "touch b", "is_dangerous": True})
    assert result.is_error and len(auth.requests) == 2 and not (project / "b").exists()
