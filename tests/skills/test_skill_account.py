"""The skills account (`ipc/skill_account.py`): where skills are found, which wins, and every file that is not read —
attacker-made ones included (a cloned project's skills directory is anyone's)."""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from yagent.ipc import skill_files
from yagent.ipc.skill_account import (
    MAX_ROOT_ENTRIES,
    SKILL_HOLDERS,
    SkillAccount,
    account_json,
    account_lines,
    load_skill_account,
)
from yagent.ipc.skill_files import MAX_SKILL_BYTES, SkillFileError, read_skill_text
from yagent.ipc.skill_front_matter import read_front_matter
from yagent.ipc.skills_settings import SkillsSettings


@dataclass
class Places:
    user: Path  # the user's home
    state: Path  # $YAGENT_HOME
    project: Path

    def account(self, **settings: object) -> SkillAccount:
        return load_skill_account(yagent_home=self.state, project_root=self.project,
                                  settings=SkillsSettings(**settings), user_home=str(self.user))


@pytest.fixture
def places(tmp_path: Path) -> Places:
    p = Places(tmp_path / "home", tmp_path / "home" / ".yagent", tmp_path / "project")
    for d in (p.user, p.state, p.project):
        d.mkdir(parents=True, exist_ok=True)
    return p


def skill(root: Path, name: str, text: str, *, folder: bool = True) -> Path:
    path = root / name / "SKILL.md" if folder else root / f"{name}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def rejected(account: SkillAccount, path: Path) -> str:
    reasons = [r.reason for r in account.rejections if r.path == str(path)]
    assert reasons, f"{path} was not rejected; rejections: {account.rejections}"
    return reasons[0]


def test_scopes_merge_user_then_project_then_config_and_every_override_is_recorded(places: Places,
                                                                                  tmp_path: Path) -> None:
    skill(places.user / ".claude" / "skills", "review", "# Review (claude, user)", folder=False)
    skill(places.state / "skills", "review", "# Review (yagent, user)")
    skill(places.state / "skills", "deploy", "# Deploy (user)")
    skill(places.project / ".claude" / "skills", "deploy", "# Deploy (project)")
    skill(tmp_path / "team", "deploy", "# Deploy (team)", folder=False)
    account = places.account(dirs=[str(tmp_path / "team")])

    assert [(s.name, s.description, s.scope) for s in account.skills] == [
        ("deploy", "Deploy (team)", "config"), ("review", "Review (yagent, user)", "user")]
    assert [(o.name, o.replaced.scope, o.kept.scope) for o in account.overrides] == [
        ("review", "user", "user"), ("deploy", "user", "project"), ("deploy", "project", "config")]
    lines = account_lines(account)
    assert any("gives way to" in line and str(tmp_path / "team" / "deploy.md") in line for line in lines)
    assert set(account_json(account)["holders"]) == set(SKILL_HOLDERS)


def test_a_folder_skill_wins_over_a_flat_file_of_its_name_in_the_same_directory_and_says_so(places: Places) -> None:
    root = places.project / ".yagent" / "skills"
    skill(root, "lint", "# Lint (folder)")
    flat = skill(root, "lint", "# Lint (flat)", folder=False)
    account = places.account()
    assert [s.description for s in account.skills] == ["Lint (folder)"]
    assert "the folder lint/ beside it holds the skill" in rejected(account, flat)


def test_front_matter_yaml_as_claude_skills_write_it_json_or_none(places: Places) -> None:
    root = places.state / "skills"
    skill(root, "folded", "---\nname: folded\ndescription: >\n  Review a change:\n  what to read first.\n"
                          "allowed-tools: Read, Grep\n---\n# Heading\nbody\n")
    skill(root, "quoted", "---\ndescription: \"Ship it: the 'usual' way\"\n---\nbody\n")
    skill(root, "json", '---\n{"description": "From JSON", "version": 2}\n---\nbody\n')
    skill(root, "plain", "\n\n## Plain heading line\nmore\n")
    account = places.account()
    assert {s.name: s.description for s in account.skills} == {
        "folded": "Review a change: what to read first.", "quoted": "Ship it: the 'usual' way",
        "json": "From JSON", "plain": "Plain heading line"}
    assert not account.problems


@pytest.mark.parametrize(("front", "said"), [
    ("description: [never closed", "not valid YAML"),
    ('{"description": "x",}', "not valid JSON"),
    ("- a\n- list", "must be a mapping"),
    ("description: 42", "`description` must be text"),
    ("!!python/object/apply:os.system [\"touch /tmp/yagent-pwned\"]", "not valid YAML"),
    ("description: " + "[" * 40 + "]" * 40, "nests more than"),
    ("description: d\nbig: " + "1" * 5000, "a value yagent cannot read"),  # past Python's 4300 digits
    ("description: d\nwhen: !!timestamp 2001-99-99", "a value yagent cannot read"),
    ('{"description": "d", "big": ' + "1" * 5000 + "}", "a value yagent cannot read"),
])
def test_a_bad_front_matter_is_shown_and_the_skill_stays_with_its_first_line(places: Places, front: str,
                                                                            said: str) -> None:
    path = skill(places.state / "skills", "bad", f"---\n{front}\n---\n# First line stands\nbody\n")
    account = places.account()
    (found,) = account.skills
    assert found.description == "First line stands"
    assert any(said in p for p in found.problems), found.problems
    assert any(str(path) in line and said in line for line in account.problems)
    assert not Path("/tmp/yagent-pwned").exists()


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab:{}[]-*&!|>'\"\n #?,.\t%@`1e\\\x00\u00e9", max_size=60))
def test_no_front_matter_ever_raises(block: str) -> None:
    front = read_front_matter(f"---\n{block}\n---\n# Body")
    assert isinstance(front.fields, dict) and isinstance(front.description, str)


def test_a_billion_laughs_front_matter_is_refused_before_anything_is_built(places: Places) -> None:
    levels = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    levels += [f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 9) + "]" for i in range(9)]
    skill(places.state / "skills", "laughs", "---\n" + "\n".join(levels) + "\ndescription: lol\n---\nbody\n")
    started = time.process_time()
    account = places.account()
    (found,) = account.skills
    assert any("YAML alias" in p for p in found.problems)
    assert found.description == "body"
    # 9**10 values if expanded; refused from the parser's events, the work is that of a 700-byte document.
    assert time.process_time() - started < 5


def test_the_front_matter_name_never_renames_a_skill(places: Places) -> None:
    skill(places.project / ".claude" / "skills", "deploy", "---\nname: ../../etc/passwd\ndescription: d\n---\n")
    (found,) = places.account().skills
    assert found.name == "deploy"
    assert any("'../../etc/passwd'" in p and "it is called deploy" in p for p in found.problems)


def test_names_must_be_plain_ascii_so_a_look_alike_cannot_pass_for_another_skill(places: Places) -> None:
    root = places.project / ".claude" / "skills"
    skill(root, "deploy", "# The real one")
    look_alike = skill(root, "d\u0435ploy", "# A Cyrillic e").parent  # U+0435 looks like "e"
    control = skill(root, "bad\x1bname", "# escape", folder=False)
    account = places.account()
    assert [s.name for s in account.skills] == ["deploy"]
    assert "'d\\u0435ploy'" in rejected(account, look_alike)
    assert "\x1b" not in "\n".join(account_lines(account))  # no raw escape reaches a terminal
    assert any("bad\\x1bname" in r.path for r in account.rejections), account.rejections
    assert control.exists()


def test_a_link_out_of_a_skills_directory_is_never_followed(places: Places) -> None:
    secrets = places.user / ".ssh"
    secrets.mkdir()
    (secrets / "id_ed25519.md").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    skill(secrets, "SKILL", "# planted", folder=False)
    root = places.project / ".claude" / "skills"
    root.mkdir(parents=True)
    (root / "keys").symlink_to(secrets)  # a folder skill pointing at ~/.ssh
    (root / "key.md").symlink_to(secrets / "id_ed25519.md")  # a flat skill pointing at a key
    skill(root, "inside", "# Inside")
    (root / "alias.md").symlink_to(root / "inside" / "SKILL.md")  # a link that stays inside is fine
    account = places.account(deny_read=[])
    assert [s.name for s in account.skills] == ["alias", "inside"]
    assert "outside" in rejected(account, root / "keys")
    assert "outside" in rejected(account, root / "key.md")
    assert "OPENSSH" not in str(account_json(account))


def test_a_project_skills_directory_leading_out_of_the_project_is_not_read(places: Places, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    skill(elsewhere, "planted", "# from outside the project")
    (places.project / ".claude").mkdir()
    (places.project / ".claude" / "skills").symlink_to(elsewhere)
    account = places.account()
    assert account.skills == ()
    assert "outside the project" in rejected(account, places.project / ".claude" / "skills")


def test_no_skill_is_read_from_yagents_state_or_deny_read(places: Places) -> None:
    (places.state / "config").mkdir()
    skill(places.state / "config", "config", "# the config, with its keys", folder=False)
    (places.state / "skills").symlink_to(places.state / "config")
    (places.user / ".aws").mkdir()
    skill(places.user / ".aws", "creds", "# aws", folder=False)
    account = places.account(dirs=[str(places.state / "tasks"), "~/.aws"], deny_read=["~/.aws"])
    assert account.skills == ()
    assert "only as a real directory" in rejected(account, places.state / "skills")
    assert "[sandbox] deny_read" in rejected(account, places.user / ".aws")


def test_a_fifo_a_socket_a_huge_file_and_bad_text_are_rejected_without_hanging_or_reading(places: Places) -> None:
    root = places.project / ".yagent" / "skills"
    root.mkdir(parents=True)
    os.mkfifo(root / "pipe.md")  # nobody ever writes: a blocking open would hang
    (root / "pipe").mkdir()
    os.mkfifo(root / "pipe" / "SKILL.md")
    huge = root / "huge.md"
    with huge.open("wb") as fh:
        fh.truncate(1 << 30)  # 1 GB, sparse: a reader that read it whole would take seconds and a gigabyte
    (root / "latin1.md").write_bytes(b"# caf\xe9\n")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(root / "sock.md"))
        account = places.account()
    assert account.skills == ()
    assert "named pipe" in rejected(account, root / "pipe.md")
    assert "named pipe" in rejected(account, root / "pipe" / "SKILL.md")
    assert "1 GB" in rejected(account, huge) and f"{MAX_SKILL_BYTES // 1024} KiB" in rejected(account, huge)
    assert "a socket" in rejected(account, root / "sock.md")
    assert "not UTF-8" in rejected(account, root / "latin1.md")


def test_a_folder_without_skill_md_is_said_and_other_files_are_no_skills(places: Places) -> None:
    root = places.state / "skills"
    (root / "scripts").mkdir(parents=True)
    (root / "notes.txt").write_text("not a skill")
    (root / ".hidden.md").write_text("# hidden")
    account = places.account()
    assert account.skills == ()
    assert "without a SKILL.md" in rejected(account, root / "scripts")
    assert len(account.rejections) == 1


def test_a_skill_file_swapped_for_a_link_after_the_check_is_not_followed(places: Places, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    root = (places.state / "skills").resolve()
    outside = tmp_path / "outside"
    skill(outside, "x", "# secret", folder=False)
    (root / "flat.md").parent.mkdir(parents=True)
    (root / "flat.md").symlink_to(outside / "x.md")
    (root / "folder").symlink_to(outside)
    # As if the check had run before the swap: the path is taken as it is, and the open must notice.
    monkeypatch.setattr(skill_files.os.path, "realpath", os.path.abspath)
    with pytest.raises(SkillFileError, match="became a link"):
        read_skill_text(str(root / "flat.md"), within=str(root))
    (outside / "SKILL.md").write_text("# secret")
    with pytest.raises(SkillFileError, match="moved outside"):
        read_skill_text(str(root / "folder" / "SKILL.md"), within=str(root))


def test_a_directory_with_too_many_entries_is_read_up_to_its_cap_and_says_so(places: Places) -> None:
    root = places.state / "skills"
    root.mkdir()
    for i in range(MAX_ROOT_ENTRIES + 1):
        (root / f"f{i}.txt").touch()
    account = places.account()
    assert f"more than {MAX_ROOT_ENTRIES} entries" in rejected(account, root)


def test_a_directory_read_twice_counts_once_and_the_account_never_fails(places: Places) -> None:
    skill(places.user / ".claude" / "skills", "mine", "# Mine")
    # The project is the home itself: its .claude/skills is the user's.
    account = load_skill_account(yagent_home=places.state, project_root=places.user, settings=SkillsSettings(),
                                 user_home=str(places.user))
    assert [s.name for s in account.skills] == ["mine"] and account.overrides == ()
    assert any("the same directory as" in r.state for r in account.roots)
    (places.state / "skills").write_text("a file, not a directory")
    account = places.account()
    assert "is not a directory" in rejected(account, places.state / "skills")


def test_turned_off_skills_are_no_skills_and_say_so(places: Places) -> None:
    skill(places.state / "skills", "deploy", "# Deploy")
    account = places.account(enabled=False)
    assert account.skills == () and not account.enabled
    assert "turned off" in account_lines(account)[0]

