"""A daemon started with a certificate store that cannot be loaded (an `SSL_CERT_FILE` naming nothing, as a stale
systemd environment can leave it): the worker forkserver still starts, a run that needs no model works, and a run
that needs one fails saying which setting to fix — not "could not start a worker process: unexpected EOF" for
every run, as when the forkserver's warm-up raised and took it down. Real daemon, real workers."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.agent_harness import llm_config
from tests.daemon_harness import arun, collect_turn, script, submit
from tests.fake_provider import FakeProvider
from yagent.ipc.vocabulary import EventType

pytestmark = pytest.mark.e2e


def test_a_certificate_store_that_cannot_be_loaded_fails_model_runs_with_the_setting_to_fix(
        make_daemon, fake: FakeProvider, project: Path, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-bundle.pem"
    daemon = make_daemon(llm_config(fake), env={"SSL_CERT_FILE": str(missing)})

    async def go() -> tuple[dict, dict]:
        async with daemon.client() as c:
            plain = await submit(c, project, script(output="no model needed"))
            plain_end = [e for e in await collect_turn(c, plain.task, turn=plain.turn)
                         if e.type == EventType.TURN_FINISHED]
            modelled = await submit(c, project, "hello", agent="director")
            model_end = [e for e in await collect_turn(c, modelled.task, turn=modelled.turn)
                         if e.type == EventType.TURN_FINISHED]
            return plain_end[0].data, model_end[0].data

    plain, modelled = arun(go(), 90)
    assert plain["state"] == "done", plain
    assert plain["output"] == "no model needed"
    assert modelled["state"] == "failed", modelled
    assert "TLS certificate store cannot be loaded" in modelled["error"], modelled
    assert f"SSL_CERT_FILE={str(missing)!r}" in modelled["error"], modelled
    assert not fake.requests  # nothing reached the model
    log = daemon.log_path.read_text(errors="replace")
    # The forkserver said once, in the daemon's log, what it left to the runs; its warm workers waited for their
    # runs (a warm worker that made its provider client ahead and raised would have died before its hello).
    assert "the TLS context not warmed ahead" in log
    assert "exited before its hello" not in log, log
