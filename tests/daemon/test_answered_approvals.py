"""What the daemon keeps of an answered authorisation prompt: the task's session approvals in the registry (read back
by a daemon started later), a project approval in the approvals file; a forged prompt keeps nothing, and a file or
directory planted at the approvals' names is neither followed nor fatal."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.planted_files import KINDS, plant, untouched
from yagent.daemon.answered_approvals import MAX_KEYS, TaskApprovals, kept_keys
from yagent.daemon.registry import Registry
from yagent.ipc.approval_grants import SETTINGS_LIMIT, project_grants
from yagent.ipc.messages import Question
from yagent.ipc.vocabulary import QuestionKind

# A planted pipe that hangs must fail the test well before the suite's own timeout.
pytestmark = pytest.mark.timeout(60)


def _prompt(tool: Any = "run_bash", dangerous: Any = "it deletes files", paths: Any = None,
            kind: QuestionKind = QuestionKind.AUTHORIZE) -> Question:
    return Question(request_id="r.1", kind=kind, prompt="coding wants to run rm -rf build",
                    details={"tool": tool, "summary": "rm -rf build", "dangerous": dangerous,
                             "outside_paths": [] if paths is None else paths, "project_root": "/elsewhere"})


@pytest.mark.parametrize(("question", "answer", "kept"), [
    (_prompt(), {"value": "session"}, (["inside:run_bash"], False)),
    (_prompt(paths=["/srv/a"]), {"value": " Project "}, (["inside:run_bash", "outside:/srv/a"], True)),
    (_prompt(dangerous=""), {"value": "project"}, None),  # nothing to approve beyond the call
    (_prompt(), {"value": "once"}, None),
    (_prompt(), {"value": "deny"}, None),
    (_prompt(), {"value": "session", "cancelled": True}, None),
    (_prompt(), {"value": float("nan")}, None),
    (_prompt(), {}, None),
    (_prompt(kind=QuestionKind.INPUT), {"value": "session"}, None),  # ask_user_for_help's answer grants nothing
])
def test_what_an_answer_keeps(question: Question, answer: dict, kept: object) -> None:
    assert kept_keys(question, answer) == kept


@pytest.mark.parametrize("question", [
    _prompt(tool=""), _prompt(tool=7), _prompt(dangerous=None), _prompt(paths="/srv/a"),
    _prompt(paths=["relative/path"]), _prompt(paths=[3]), _prompt(paths=["/srv/a\x00b"]),
    _prompt(paths=["/" + "x" * 5000]), _prompt(paths=[f"/srv/{i}" for i in range(MAX_KEYS)]),
])
def test_a_forged_prompt_keeps_nothing_and_says_why(question: Question) -> None:
    assert isinstance(kept_keys(question, {"value": "project"}), str)


def _registry(tmp_path: Path) -> tuple[Registry, str]:
    registry = Registry(tmp_path / "state.db")
    task = registry.create_task(registry.ensure_project(tmp_path / "project"), "t")
    return registry, task.id


def test_a_session_answer_is_kept_for_the_task_and_read_back_by_a_later_daemon(tmp_path: Path) -> None:
    registry, task = _registry(tmp_path)
    file = tmp_path / "home" / "approvals" / "settings.json"
    approvals = TaskApprovals(registry, task, file)
    assert approvals.session() == []
    warnings = [*approvals.keep("/p", _prompt(), {"value": "session"}),
                *approvals.keep("/p", _prompt(paths=["/srv/a"]), {"value": "session"}),
                # asked again by a run that started before the first answer: one key
                *approvals.keep("/p", _prompt(), {"value": "session"})]
    assert approvals.session() == ["inside:run_bash", "outside:/srv/a"]
    assert not file.exists() and warnings == []  # a session answer is not the project's
    registry.close()

    later = Registry(tmp_path / "state.db")
    assert TaskApprovals(later, task, file).session() == ["inside:run_bash", "outside:/srv/a"]
    other = later.create_task(later.ensure_project(tmp_path / "project"), "u")
    assert TaskApprovals(later, other.id, file).session() == []  # another task's are its own
    later.close()


def test_a_project_answer_is_kept_in_the_approvals_file_beside_what_it_held(tmp_path: Path) -> None:
    registry, task = _registry(tmp_path)
    file = tmp_path / "home" / "approvals" / "settings.json"
    file.parent.mkdir(parents=True)
    file.write_text(json.dumps({"theme": "dark", "authorized_projects": {"/q": ["inside:delete_file"]}}))
    approvals = TaskApprovals(registry, task, file)
    warnings = [*approvals.keep("/p", _prompt(paths=["/srv/a"]), {"value": "project"}),
                *approvals.keep("/p", _prompt(), {"value": "project"})]
    assert json.loads(file.read_text()) == {"theme": "dark", "authorized_projects": {
        "/q": ["inside:delete_file"], "/p": ["inside:run_bash", "outside:/srv/a"]}}
    assert file.stat().st_mode & 0o077 == 0 and sorted(os.listdir(file.parent)) == ["settings.json"]
    assert approvals.session() == ["inside:run_bash", "outside:/srv/a"]  # and for the task, as the session's
    assert warnings == []
    registry.close()


@pytest.mark.parametrize("kind", [*KINDS, "huge"])
def test_a_file_planted_at_the_approvals_name_is_not_followed_and_the_answer_still_holds_for_the_task(
        tmp_path: Path, kind: str) -> None:
    registry, task = _registry(tmp_path)
    file = tmp_path / "home" / "approvals" / "settings.json"
    granting = json.dumps({"authorized_projects": {"/p": ["outside:/"]}})
    target = plant(file, kind, tmp_path, granting, huge=SETTINGS_LIMIT + 1)
    approvals = TaskApprovals(registry, task, file)
    warnings = approvals.keep("/p", _prompt(), {"value": "project"})
    assert untouched(target, kind, granting)
    assert file.is_symlink() if kind in ("link", "dangling") else file.exists()  # not replaced either
    assert len(warnings) == 1 and str(file) in warnings[0] and "holds for this task" in warnings[0]
    assert approvals.session() == ["inside:run_bash"]
    registry.close()


def test_a_link_planted_for_the_approvals_directory_is_not_written_through(tmp_path: Path) -> None:
    registry, task = _registry(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "approvals").symlink_to(elsewhere)
    warnings = TaskApprovals(registry, task, tmp_path / "home" / "approvals" / "settings.json").keep(
        "/p", _prompt(), {"value": "project"})
    assert os.listdir(elsewhere) == [] and len(warnings) == 1 and "symbolic link" in warnings[0]
    registry.close()


def test_a_registry_that_fails_costs_the_keeping_not_the_daemon(tmp_path: Path) -> None:
    registry, task = _registry(tmp_path)
    file = tmp_path / "home" / "approvals" / "settings.json"
    approvals = TaskApprovals(registry, task, file)
    registry.close()  # every statement now fails as a damaged or vanished database would
    assert approvals.session() == []
    warnings = approvals.keep("/p", _prompt(), {"value": "project"})
    assert len(warnings) == 1 and "will ask again" in warnings[0]
    assert project_grants(file, "/p") == {"inside:run_bash"}  # the project's file is the daemon's still


def test_a_forged_prompt_is_said_to_the_task_and_kept_nowhere(tmp_path: Path) -> None:
    registry, task = _registry(tmp_path)
    file = tmp_path / "home" / "approvals" / "settings.json"
    approvals = TaskApprovals(registry, task, file)
    warnings = approvals.keep("/p", _prompt(paths=["etc/passwd"]), {"value": "project"})
    assert approvals.session() == [] and not file.exists()
    assert len(warnings) == 1 and "not absolute" in warnings[0] and "holds for the run that asked" in warnings[0]
    registry.close()


@pytest.mark.parametrize("damaged", ['{"authorized_projects": {"/q": ["inside:delete_file"]', "[]", "\xff\xfe"])
def test_an_approvals_file_that_does_not_parse_is_kept_aside_for_a_person_not_replaced_silently(
        tmp_path: Path, damaged: str) -> None:
    registry, task = _registry(tmp_path)
    file = tmp_path / "home" / "approvals" / "settings.json"
    file.parent.mkdir(parents=True)
    file.write_bytes(damaged.encode("latin-1"))  # a hand edit gone wrong, or bytes that are no UTF-8
    warnings = TaskApprovals(registry, task, file).keep("/p", _prompt(), {"value": "project"})
    aside = file.with_name("settings.json.damaged")
    assert aside.read_bytes() == damaged.encode("latin-1")
    assert json.loads(file.read_text()) == {"authorized_projects": {"/p": ["inside:run_bash"]}}
    assert len(warnings) == 1 and str(file) in warnings[0] and "settings.json.damaged" in warnings[0]
    registry.close()
