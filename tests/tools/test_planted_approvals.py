"""Project approvals when something was planted at the approvals file's name (an unconfined run could have): the
worker grants nothing from it, never hangs on it, never writes there, and its log says once which file to remove."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from tests.planted_files import plant, untouched
from yagent.ipc.approval_grants import SETTINGS_LIMIT
from yagent.workers.tools import AuthDecision

from .doubles import ScriptedAuthorizer, call_tool, make_ctx

# A planted pipe that hangs must fail the test well before the suite's own timeout.
pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("kind", ["link", "dangling", "fifo", "directory", "huge"])
def test_a_planted_approvals_file_grants_nothing_and_the_worker_writes_nothing_there(
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
        again = call_tool(ctx, "create_file", {"path": str(outside / "one.txt"), "content": "3", "overwrite": True})

    # Asked for each new path (the planted file granted nothing); the answer holds for the run: not asked again.
    assert [r.outside_paths for r in auth.requests] == [(str(outside / "one.txt"),), (str(outside / "two.txt"),)]
    assert not result.is_error and not again.is_error and (outside / "one.txt").read_text() == "3"
    assert untouched(target, kind, granting)
    assert settings.is_symlink() if kind in ("link", "dangling") else settings.exists()  # not replaced either
    assert sorted(p.name for p in settings.parent.iterdir()) == ["settings.json"]  # no lock, no temp file
    warnings = [r.getMessage() for r in caplog.records if r.name == "yagent.workers.tools.authorization"]
    assert len(warnings) == 1 and "were not read" in warnings[0] and str(settings) in warnings[0]  # once


def test_an_approvals_file_that_does_not_parse_grants_nothing_and_says_so_once(
        project: Path, outside: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    settings = tmp_path / "home" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(f'{{"authorized_projects": {{"{project}": ["outside:{outside}"]')  # cut short
    auth = ScriptedAuthorizer(AuthDecision.DENY)
    ctx = make_ctx(project, tmp_path, authorizer=auth, settings_path=settings)
    with caplog.at_level(logging.WARNING, logger="yagent.workers.tools.authorization"):
        for name in ("one.txt", "two.txt"):
            assert call_tool(ctx, "create_file", {"path": str(outside / name), "content": "1"}).is_error
    assert len(auth.requests) == 2 and not (outside / "one.txt").exists()
    warnings = [r.getMessage() for r in caplog.records if r.name == "yagent.workers.tools.authorization"]
    assert len(warnings) == 1 and "is not valid JSON" in warnings[0] and str(settings) in warnings[0]
