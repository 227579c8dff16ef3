"""Project approvals when something was planted at the approvals file's names (a run's worker may write `approvals/`):
nothing is granted, nothing hangs, nothing is written through a link, and the run is told which file to remove."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from tests.planted_files import plant, untouched
from yagent.workers.tools import AuthDecision
from yagent.workers.tools.authorization import SETTINGS_LIMIT

from .doubles import ScriptedAuthorizer, call_tool, make_ctx

# A planted pipe that hangs must fail the test well before the suite's own timeout.
pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("kind", ["link", "dangling", "fifo", "directory", "huge"])
def test_a_planted_approvals_file_grants_nothing_and_an_approval_is_not_saved_over_it(
        project: Path, outside: Path, tmp_path: Path, kind: str, caplog: pytest.LogCaptureFixture) -> None:
    settings = tmp_path / "home" / "settings.json"
    # The link leads to approvals the run could not write itself: following it would grant them.
    granting = json.dumps({"authorized_projects": {str(project): [f"outside:{outside}"]}, "precious": True})
    target = plant(settings, kind, tmp_path, granting, huge=SETTINGS_LIMIT + 1)
    auth = ScriptedAuthorizer(AuthDecision.ALLOW_PROJECT)
    ctx = make_ctx(project, tmp_path, authorizer=auth, settings_path=settings)
    with caplog.at_level(logging.WARNING, logger="yagent.workers.tools.authorization"):
        result = call_tool(ctx, "create_file", {"path": str(outside / "one.txt"), "content": "1"})
        call_tool(ctx, "create_file", {"path": str(outside / "two.txt"), "content": "2"})

    assert len(auth.requests) == 2  # the user was asked each time: the planted file granted nothing
    # The user's answer stands for the call; only its keeping for later runs failed, and the run's log says why.
    assert not result.is_error and (outside / "one.txt").read_text() == "1" and (outside / "two.txt").exists()
    assert untouched(target, kind, granting)
    assert settings.is_symlink() if kind in ("link", "dangling") else settings.exists()  # not replaced either
    warnings = [r.getMessage() for r in caplog.records if r.name == "yagent.workers.tools.authorization"]
    unread = [w for w in warnings if "were not read" in w]
    unsaved = [w for w in warnings if "was not saved" in w]
    assert len(unread) == 1 and str(settings) in unread[0]  # said once, not at every check
    assert len(unsaved) == 2 and all(str(settings) in w and "holds for this session" in w for w in unsaved)


@pytest.mark.parametrize("kind", ["link", "dangling", "fifo", "directory"])
def test_a_planted_approvals_lock_fails_the_save_without_creating_or_changing_anything(
        project: Path, outside: Path, tmp_path: Path, kind: str, caplog: pytest.LogCaptureFixture) -> None:
    settings = tmp_path / "home" / "settings.json"
    lock = settings.with_name("settings.json.lock")
    target = plant(lock, kind, tmp_path)
    ctx = make_ctx(project, tmp_path, authorizer=ScriptedAuthorizer(AuthDecision.ALLOW_PROJECT),
                   settings_path=settings)
    with caplog.at_level(logging.WARNING, logger="yagent.workers.tools.authorization"):
        result = call_tool(ctx, "create_file", {"path": str(outside / "one.txt"), "content": "1"})
    assert not result.is_error and (outside / "one.txt").exists()  # approved: the call goes ahead
    assert untouched(target, kind) and not settings.exists()
    assert f"{lock} is" in caplog.text and "remove it" in caplog.text and "was not saved" in caplog.text
