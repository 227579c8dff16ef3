"""`[skills]` is parsed by the daemon's one config parser and reaches workers resolved in RunSettings, with the
sandbox's `deny_read`; the daemon hands a run's worker the skill directories it may read beyond its usual set."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from yagent.daemon.run_confinement import confinement_for
from yagent.ipc.config import ConfigError, settings_from_table
from yagent.ipc.messages import RunSpec, StartRun
from yagent.ipc.records import decode, encode
from yagent.ipc.run_settings import RunSettings
from yagent.ipc.sandbox_settings import DEFAULT_DENY_READ
from yagent.ipc.skills_settings import MAX_SKILL_DIRS, SKILLS_KEYS


def test_defaults_and_set_values_reach_the_run_settings_and_cross_the_wire() -> None:
    skills = settings_from_table({}).run_settings.skills
    assert (skills.enabled, skills.dirs, skills.deny_read) == (True, [], list(DEFAULT_DENY_READ))
    run = settings_from_table({"skills": {"dirs": ["~/team/skills", "/srv/skills"], "enabled": False},
                               "sandbox": {"deny_read": ["~/.secret"]}}).run_settings
    assert (run.skills.enabled, run.skills.dirs, run.skills.deny_read) == (
        False, ["~/team/skills", "/srv/skills"], ["~/.secret"])
    spec = RunSpec(run="r1", task="t1", turn=1, project="p", project_root="/p", agent="director", input="x",
                   home="/h", settings=run)
    assert decode(encode(StartRun(spec=spec))).spec.settings.skills == run.skills
    assert set(SKILLS_KEYS) == {"dirs", "enabled"}


@pytest.mark.parametrize(("value", "said"), [
    ({"dirs": "~/skills"}, "must be a list of directories"),
    ({"dirs": ["relative/skills"]}, "must be an absolute path"),
    ({"dirs": ["/a\x00b"]}, "must be an absolute path"),
    ({"dirs": ["/" + "x" * 5000]}, "must be an absolute path"),
    ({"dirs": [f"/s{i}" for i in range(MAX_SKILL_DIRS + 1)]}, f"at most {MAX_SKILL_DIRS}"),
    ({"dirs": [math.nan]}, "must be a list of directories"),
    ({"enabled": "yes"}, "enabled must be true or false"),
    ("not a table", "must be a table"),
])
def test_a_bad_value_is_refused_saying_what_to_write(value: Any, said: str) -> None:
    with pytest.raises(ConfigError) as err:
        settings_from_table({"skills": value})
    assert "[skills]" in err.value.what and said in err.value.what


def test_the_worker_is_handed_the_state_homes_skills_and_the_configured_dirs_to_read(tmp_path: Path) -> None:
    settings = settings_from_table({"skills": {"dirs": ["~/team", "/srv/skills"]}})
    spec = RunSpec(run="r1", task="t1", turn=1, project="p", project_root=str(tmp_path), agent="repo", input="x",
                   home=str(tmp_path / "state"), settings=settings.run_settings)
    confinement = confinement_for(spec, settings, abi=7, runtime_dir=tmp_path / "run", user_home=tmp_path / "u")
    assert confinement.skill_dirs == [str(tmp_path / "state" / "skills"), str(tmp_path / "u" / "team"), "/srv/skills"]
    off = settings_from_table({"skills": {"enabled": False}})
    assert confinement_for(spec, off, abi=7, runtime_dir=tmp_path / "run").skill_dirs == []
    assert RunSettings().skills.deny_read == list(DEFAULT_DENY_READ)  # never a skill from ~/.ssh, even by default
