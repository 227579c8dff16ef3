"""Starting a worker waits for the forkserver; the daemon goes on serving meanwhile."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.daemon_harness import arun, collect_turn, of_type, script, submit
from yagent.ipc.messages import DaemonStatus, StatusRequest
from yagent.ipc.vocabulary import EventType

pytestmark = pytest.mark.e2e


def test_the_daemon_answers_while_the_forkserver_is_still_importing(make_daemon, project: Path,
                                                                     tmp_path: Path) -> None:
    # Before the fix the submit's reply waited for the forkserver's first answer, on the event loop: a slow
    # preload (an overloaded machine) left `yagent run` and `yagent daemon status` without a reply.
    gate = tmp_path / "gate"
    daemon = make_daemon('[daemon]\nagent_modules = ["tests.agents.scripted", "tests.agents.gated_import"]\n',
                         env={"YAGENT_TEST_IMPORT_GATE": str(gate)})

    async def go():
        async with daemon.client(timeout=10) as c:
            first = await submit(c, project, script({"mark": "one"}, output="first"))
            second = await submit(c, project, script({"mark": "two"}, output="second"))
            status = await c.request(StatusRequest(id=0), DaemonStatus)
            assert status.runs_started == 0, "a worker started although the forkserver cannot have answered"
            gate.write_text("open")
            return [await collect_turn(c, s.task) for s in (first, second)]

    results = arun(go(), timeout=120)
    outputs = [of_type(evs, EventType.TURN_FINISHED)[0].data for evs in results]
    assert [o["status"] for o in outputs] == ["done", "done"], outputs
    assert [of_type(evs, EventType.RUN_FINISHED)[0].data["output"] for evs in results] == ["first", "second"]
