"""Skills through a real daemon and confined workers: the catalogue is in the Director's system prompt, use_skill
reads the user's skill from `$YAGENT_HOME/skills` (inside yagent's state, which a confined run otherwise cannot
read), a skill already loaded is not given twice, the run records what it loaded, and a broken skill is shown."""

from __future__ import annotations

import json
from pathlib import Path

import psutil
import pytest

from tests.agent_harness import MARKERS, llm_config, run_turn, tool_messages
from tests.daemon_harness import arun, collect_turn, of_type, submit
from tests.fake_provider import Step, ToolCallSpec
from yagent.ipc.messages import Ack, TaskControl
from yagent.ipc.state_layout import rollout_dir
from yagent.ipc.vocabulary import ControlAction, EventType

pytestmark = pytest.mark.e2e


def test_a_confined_director_sees_the_catalogue_loads_a_user_skill_once_and_is_told_of_a_broken_one(
        fake, make_daemon, project: Path, tmp_path: Path) -> None:
    user_home = tmp_path / "user"
    (user_home / ".claude" / "skills").mkdir(parents=True)
    (user_home / ".claude" / "skills" / "release.md").write_text("# Cut a release from main\nTag it.\n")
    daemon = make_daemon(llm_config(fake) + "\n[sandbox]\nwritable_roots = []\n", start=False,
                         env={"HOME": str(user_home)})
    deploy = daemon.home / "skills" / "deploy"
    (deploy / "scripts").mkdir(parents=True)
    (deploy / "SKILL.md").write_text("---\ndescription: >\n  Deploy the service\n  to staging.\n---\n"
                                     "1. Run scripts/ship.sh.\n2. Watch the health check.\n")
    (deploy / "scripts" / "ship.sh").write_text("echo ship\n")
    broken = project / ".claude" / "skills" / "broken"
    broken.mkdir(parents=True)
    (broken / "SKILL.md").write_text("---\ndescription: [never closed\n---\nBody.\n")
    daemon.start()
    fake.script("director", MARKERS["director"], [
        Step(tool_calls=[ToolCallSpec("use_skill", {"name": "deploy"}, id="s1")]),
        Step(tool_calls=[ToolCallSpec("use_skill", {"name": "deploy"}, id="s2")]),
        Step(text="Deployed by the skill."),
        Step(text="Deployed by the skill."),  # the same answer again after the delegation reminder: final
    ])

    task, events = run_turn(daemon, project, "Deploy it, the usual way.")
    assert of_type(events, EventType.TURN_FINISHED)[0].data["output"] == "Deployed by the skill."
    fake.assert_no_problems()

    first, second, third, _ = fake.requests_for("director")
    system = first.system
    assert "# Skills" in system and "- deploy: Deploy the service to staging." in system
    assert "- release: Cut a release from main" in system and "- broken:" in system
    assert system.index("# Skills") < len(system)  # in the system prompt, the part every step repeats as it is
    assert second.system == system  # the catalogue does not move between steps
    loaded = tool_messages(second)[0]["content"]
    assert loaded.startswith("Skill: deploy (user, ")
    assert "1. Run scripts/ship.sh." in loaded and "scripts/ship.sh" in loaded.split("Instructions")[0]
    assert "cannot be read" not in loaded  # the confined worker may read $YAGENT_HOME/skills
    again = tool_messages(third)[1]["content"]
    assert "already loaded in this run" in again and "Run scripts/ship.sh" not in again

    warnings = [e.data["message"] for e in of_type(events, EventType.LOG) if e.data.get("level") == "warning"]
    assert any("broken/SKILL.md" in w and "not valid YAML" in w and "yagent skills" in w for w in warnings)

    rollout = next(rollout_dir(daemon.home, task).glob("*.jsonl"))
    contexts = [r["payload"] for r in map(json.loads, rollout.read_text().splitlines())
                if r["type"] == "turn_context"]
    assert contexts[0]["loaded_skills"] == []
    assert [s["name"] for s in contexts[-1]["loaded_skills"]] == ["deploy"]
    assert contexts[-1]["loaded_skills"][0]["offsets"] == [0]


def test_a_confined_run_still_cannot_read_the_state_home_through_a_skills_link(fake, make_daemon, project: Path,
                                                                                 tmp_path: Path) -> None:
    # No writable root around the state home (the harness's default grants the whole test directory).
    daemon = make_daemon(llm_config(fake) + "\n[sandbox]\nwritable_roots = []\n", start=False,
                         env={"HOME": str(tmp_path / "user")})
    (daemon.home / "skills").symlink_to(daemon.home / "config")
    daemon.start()
    fake.script("director", MARKERS["director"], [
        Step(tool_calls=[ToolCallSpec("read_file", {"path": str(daemon.home / "skills" / "config.toml")}, id="r1")]),
        Step(text="done"),
        Step(text="done"),
    ])
    _task, events = run_turn(daemon, project, "Read it.", yolo="yolo")
    result = tool_messages(fake.requests_for("director")[1])[0]["content"]
    assert "[global.llm]" not in result  # the config, with its keys, stays out of reach
    warnings = [e.data["message"] for e in of_type(events, EventType.LOG) if e.data.get("level") == "warning"]
    assert any("is a link; yagent reads its own skills directory only as a real directory" in w for w in warnings)
    fake.assert_no_problems()


def test_a_resumed_turn_still_holds_the_skill_it_loaded_and_is_not_given_it_again(fake, make_daemon,
                                                                                   project: Path) -> None:
    daemon = make_daemon(llm_config(fake))
    skill_file = daemon.home / "skills" / "deploy" / "SKILL.md"
    skill_file.parent.mkdir(parents=True)
    skill_file.write_text("---\ndescription: Deploy the service\n---\nShip with care.\n")
    fake.script("director", MARKERS["director"], [
        Step(tool_calls=[ToolCallSpec("use_skill", {"name": "deploy"}, id="s1")]),
        Step(text="never delivered", latency=120),  # the step in flight when the daemon stops
        Step(tool_calls=[ToolCallSpec("use_skill", {"name": "deploy"}, id="s2")]),
        Step(text="Deployed."),
        Step(text="Deployed."),
    ])

    async def start() -> str:
        async with daemon.client() as c:
            return (await submit(c, project, "Deploy it.", agent="director")).task

    task = arun(start(), 30)
    fake.wait_for_requests(2, timeout=60, identity="director")
    workers = [p for p in psutil.Process(daemon.proc.pid).children(recursive=True) if "yagent" in " ".join(p.cmdline())]
    assert daemon.terminate() == 0
    psutil.wait_procs(workers, timeout=30)
    daemon.start()

    async def resume() -> list:
        async with daemon.client() as c:
            await c.request(TaskControl(id=0, task=task, action=ControlAction.CONTINUE), Ack)
            return await collect_turn(c, task, turn=2)

    events = arun(resume(), 90)
    assert of_type(events, EventType.TURN_FINISHED)[-1].data["output"] == "Deployed."
    after_resume = fake.requests_for("director")[2]
    held = [m["content"] for m in tool_messages(after_resume) if m["tool_call_id"] == "s1"]
    assert held and "Ship with care." in held[0]  # the resumed run still has the skill's text
    again = [m["content"] for m in tool_messages(fake.requests_for("director")[3]) if m["tool_call_id"] == "s2"]
    assert again and "already loaded in this run" in again[0] and "Ship with care." not in again[0]
    fake.assert_no_problems()
