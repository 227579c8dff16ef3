"""Project instructions: every AGENTS.md, CLAUDE.md, YAGENT.md from the project's root (its .git) down to the
working directory, an AGENTS.override.md replacing them in its directory, joined root first and labelled, under a
byte budget whose overflow is said, never a silent cut; links out of the project and non-files are refused."""

from __future__ import annotations

import os
from pathlib import Path

from yagent.daemon.run_confinement import instruction_files_above
from yagent.ipc.messages import RunSpec
from yagent.ipc.project_instructions import instruction_candidates, instructions_root
from yagent.workers.context.project_instructions import INSTRUCTIONS_HEADING, load_project_instructions


def _tree(tmp_path: Path) -> tuple[Path, Path]:
    repo = tmp_path / "repo"
    work = repo / "services" / "api"
    work.mkdir(parents=True)
    (repo / ".git").mkdir()
    (repo / "AGENTS.md").write_text("ROOT AGENTS\n")
    (repo / "YAGENT.md").write_text("ROOT YAGENT\n")
    (repo / "services" / "CLAUDE.md").write_text("SERVICES CLAUDE\n")
    (repo / "services" / "AGENTS.md").write_text("SERVICES AGENTS\n")
    (work / "AGENTS.md").write_text("API AGENTS\n")
    (work / "deeper").mkdir()
    (work / "deeper" / "AGENTS.md").write_text("BELOW THE WORKING DIRECTORY\n")
    (tmp_path / "AGENTS.md").write_text("ABOVE THE ROOT\n")
    return repo, work


def test_files_are_read_from_the_root_down_each_directory_in_order_and_labelled(tmp_path: Path) -> None:
    repo, work = _tree(tmp_path)
    assert instructions_root(work) == repo
    found = load_project_instructions(work)
    order = ["ROOT AGENTS", "ROOT YAGENT", "SERVICES AGENTS", "SERVICES CLAUDE", "API AGENTS"]
    positions = [found.text.index(text) for text in order]
    assert positions == sorted(positions)
    assert "BELOW THE WORKING DIRECTORY" not in found.text and "ABOVE THE ROOT" not in found.text
    assert f"## {repo / 'services' / 'CLAUDE.md'}\n\nSERVICES CLAUDE" in found.text
    assert found.block().startswith(INSTRUCTIONS_HEADING) and not found.overflow and not found.problems


def test_an_override_replaces_the_files_of_its_own_directory_only(tmp_path: Path) -> None:
    repo, work = _tree(tmp_path)
    (repo / "services" / "AGENTS.override.md").write_text("SERVICES OVERRIDE\n")
    text = load_project_instructions(work).text
    assert "SERVICES OVERRIDE" in text and "SERVICES AGENTS" not in text and "SERVICES CLAUDE" not in text
    assert "ROOT AGENTS" in text and "API AGENTS" in text


def test_without_a_git_root_only_the_working_directory_counts(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("PARENT\n")
    work = tmp_path / "w"
    work.mkdir()
    (work / "CLAUDE.md").write_text("HERE\n")
    assert load_project_instructions(work).text.endswith("HERE")
    assert "PARENT" not in load_project_instructions(work).text


def test_overflow_is_cut_visibly_and_named(tmp_path: Path) -> None:
    repo, work = _tree(tmp_path)
    (repo / "AGENTS.md").write_text("x" * 5000)
    found = load_project_instructions(work, budget=4096)
    assert "[cut here: the rest of this file is over the 4,096-byte budget" in found.text
    assert f"{repo / 'AGENTS.md'} cut after 4,096 of 5,000 bytes" in found.overflow
    assert f"{work / 'AGENTS.md'} (11 bytes) left out" in found.overflow
    assert "API AGENTS" not in found.text


def test_links_out_of_the_project_non_files_and_the_same_file_twice(tmp_path: Path) -> None:
    repo, work = _tree(tmp_path)
    secret = tmp_path / "id_rsa"
    secret.write_text("PRIVATE KEY\n")
    os.symlink(secret, repo / "CLAUDE.md")
    (work / "CLAUDE.md").symlink_to("AGENTS.md")  # the usual alias: read once
    os.mkfifo(work / "YAGENT.md")  # a reader would block forever on a FIFO
    found = load_project_instructions(work)
    assert "PRIVATE KEY" not in found.text
    assert any("CLAUDE.md points outside the project" in p for p in found.problems)
    assert any("YAGENT.md cannot be read" in p for p in found.problems)
    assert found.text.count("API AGENTS") == 1


def test_the_daemon_grants_only_regular_files_above_the_project_and_none_in_hidden_trees(tmp_path: Path) -> None:
    repo, work = _tree(tmp_path)
    os.symlink(tmp_path / "AGENTS.md", repo / "CLAUDE.md")
    spec = RunSpec(run="r", task="t", turn=1, project="p", project_root=str(work), agent="director", input="x",
                   home=str(tmp_path / "home"))
    granted = instruction_files_above(spec, hidden=[str(repo / "services")])
    assert granted == [str(repo / "AGENTS.md"), str(repo / "YAGENT.md")]  # the link's target is above the root
    assert [p.name for p in instruction_candidates(work)][-1] == "AGENTS.md"
