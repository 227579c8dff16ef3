"""`use_skill` through the production call path, and the catalogue a run's system prompt carries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.tools.doubles import call_tool, make_ctx
from yagent.ipc.skill_account import SKILL_HOLDERS, Skill, SkillAccount, load_skill_account
from yagent.ipc.skills_settings import SkillsSettings
from yagent.workers.context.tokens import count_tokens
from yagent.workers.llm import Message, ToolCall
from yagent.workers.skills import (
    CATALOGUE_SHARE,
    DEFAULT_CONTEXT_WINDOW,
    MIN_BUDGET_TOKENS,
    SkillShelf,
    catalogue_budget,
    render_catalogue,
)
from yagent.workers.tools import AGENTS, build_surface


def _account(tmp_path: Path, **settings: object) -> SkillAccount:
    return load_skill_account(yagent_home=tmp_path / "state", project_root=tmp_path / "project",
                              settings=SkillsSettings(**settings), user_home=str(tmp_path / "home"))


@pytest.fixture
def deploy(tmp_path: Path) -> Path:
    folder = tmp_path / "state" / "skills" / "deploy"
    (folder / "scripts").mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\ndescription: Deploy the service\nallowed-tools: Bash\nowner: ops\n---\n"
                                     + "".join(f"Step {i}: do thing {i}.\n" for i in range(2000)))
    (folder / "scripts" / "ship.sh").write_text("echo ship\n")
    (folder / ".secret").write_text("hidden\n")
    (tmp_path / "project").mkdir()
    return folder


def _use(ctx, args: dict, call_id: str = "c1"):
    return call_tool(ctx, "use_skill", args, agent="director", call_id=call_id)


def test_a_skill_is_given_whole_page_by_page_with_its_facts_and_files_and_never_twice(tmp_path: Path,
                                                                                     deploy: Path) -> None:
    shelf = SkillShelf(_account(tmp_path), model="gpt-4o")
    ctx = make_ctx(tmp_path / "project", tmp_path, skills=shelf)
    first = _use(ctx, {"name": "deploy"})
    assert not first.is_error and first.content.startswith(f"Skill: deploy (user, {deploy / 'SKILL.md'})")
    assert "Description: Deploy the service" in first.content
    assert "Allowed tools (advice from the skill's author; yagent does not enforce it): Bash" in first.content
    assert "owner: ops" in first.content
    assert "  scripts/\n  scripts/ship.sh" in first.content and ".secret" not in first.content
    assert "Step 0: do thing 0." in first.content and "Step 1999" not in first.content
    pages = [first]
    while "more characters" in pages[-1].content:
        offset = int(pages[-1].content.rsplit("offset=", 1)[1].rstrip("]"))
        pages.append(_use(ctx, {"name": "deploy", "offset": offset}, f"c{len(pages) + 1}"))
    assert len(pages) > 2 and not any(p.is_error for p in pages)
    assert all("Description" not in p.content for p in pages[1:])  # the facts come with the first page only
    body = "".join(f"Step {i}: do thing {i}.\n" for i in range(2000)).strip("\n")
    assert "".join(_page_text(p.content) for p in pages) == body  # the pages join into the whole text
    again = _use(ctx, {"name": "deploy"}, "c99")
    assert not again.is_error and "already loaded in this run" in again.content and "Step 0" not in again.content
    (record,) = shelf.loaded_record()
    assert record["name"] == "deploy" and len(record["offsets"]) == len(pages) and record["offsets"][0] == 0


def _page_text(content: str) -> str:
    """The instructions an answer carries: after its "Instructions…:" line, before its "[… more" line."""
    lines = content.split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith("Instructions")) + 1
    end = len(lines) - 1 if lines[-1].startswith("[") and "more characters" in lines[-1] else len(lines)
    return "\n".join(lines[start:end])


def test_a_skill_changed_since_it_was_loaded_is_given_again_saying_so(tmp_path: Path, deploy: Path) -> None:
    ctx = make_ctx(tmp_path / "project", tmp_path, skills=SkillShelf(_account(tmp_path)))
    assert not _use(ctx, {"name": "deploy"}).is_error
    (deploy / "SKILL.md").write_text("---\ndescription: Deploy the service\n---\nNew way.\n")
    changed = _use(ctx, {"name": "deploy"}, "c2")
    assert "changed since it was loaded" in changed.content and "New way." in changed.content


def test_loading_never_returns_nothing(tmp_path: Path) -> None:
    (tmp_path / "project").mkdir()
    empty = make_ctx(tmp_path / "project", tmp_path, skills=SkillShelf(_account(tmp_path)))
    listing = _use(empty, {})
    assert "There are no skills yet" in listing.content and "~/.yagent/skills/NAME/SKILL.md" in listing.content
    unknown = _use(empty, {"name": "deploy"}, "c2")
    assert unknown.is_error and "no skills at all" in unknown.content and ".yagent/skills" in unknown.content

    folder = tmp_path / "state" / "skills" / "terse"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\ndescription: Only a description\nsize: 0x" + "f" * 5000 + "\n---\n\n")
    ctx = make_ctx(tmp_path / "project", tmp_path, skills=SkillShelf(_account(tmp_path)))
    terse = _use(ctx, {"name": "terse"})
    assert "Only a description" in terse.content and "none beyond the description" in terse.content
    assert "size: (a int too large to show)" in terse.content  # a front-matter value never breaks the answer
    for name in ("../terse", "terse\x00", "t\u0435rse"):
        wrong = _use(ctx, {"name": name}, "c3")
        assert wrong.is_error and "The skills are: terse" in wrong.content and "\x00" not in wrong.content
    past = _use(ctx, {"name": "terse", "offset": 10**12}, "c4")
    assert past.is_error and "past their end" in past.content
    off = make_ctx(tmp_path / "project", tmp_path, skills=SkillShelf(_account(tmp_path, enabled=False)))
    assert "turned off" in _use(off, {"name": "terse"}).content
    none = _use(make_ctx(tmp_path / "project", tmp_path), {"name": "terse"})
    assert none.is_error and "not available in this run" in none.content


def test_a_skill_swapped_for_a_fifo_or_a_link_after_the_start_is_refused_at_use(tmp_path: Path, deploy: Path) -> None:
    shelf = SkillShelf(_account(tmp_path))
    ctx = make_ctx(tmp_path / "project", tmp_path, skills=shelf)
    (deploy / "SKILL.md").unlink()
    import os

    os.mkfifo(deploy / "SKILL.md")
    fifo = _use(ctx, {"name": "deploy"})
    assert fifo.is_error and "named pipe" in fifo.content and "tell the user" in fifo.content
    (deploy / "SKILL.md").unlink()
    (tmp_path / "key").write_text("PRIVATE KEY")
    (deploy / "SKILL.md").symlink_to(tmp_path / "key")
    link = _use(ctx, {"name": "deploy"}, "c2")
    assert link.is_error and "outside" in link.content and "PRIVATE KEY" not in link.content


def test_a_resumed_run_takes_back_only_the_pages_its_history_still_holds(tmp_path: Path, deploy: Path) -> None:
    record = [{"name": "deploy", "digest": "d1", "offsets": [0, 12000]}, {"name": "gone", "offsets": [0]}, "junk"]
    history = [
        Message(role="assistant", tool_calls=(ToolCall("a", "use_skill", json.dumps({"name": "deploy"})),
                                              ToolCall("b", "use_skill", '{"name": "gone"}'))),
        Message.tool("a", "Skill: deploy (user, /x)\nInstructions: ...", name="use_skill"),
        Message.tool("b", "There is no skill 'gone'.", name="use_skill"),  # an error holds no text
    ]
    shelf = SkillShelf(_account(tmp_path))
    assert shelf.restore(record, history) == ["deploy"]
    assert shelf.loaded_record() == [{"name": "deploy", "digest": "d1", "offsets": [0]}]
    assert shelf.restore("not a list", history) == []
    damaged = [{"name": "deploy", "offsets": 7}, {"name": "deploy", "offsets": [True, "0", None]}]
    assert SkillShelf(_account(tmp_path)).restore(damaged, history) == []  # a damaged record restores nothing


def test_after_a_compaction_a_skill_whose_text_is_gone_or_cut_may_be_loaded_again(tmp_path: Path,
                                                                                deploy: Path) -> None:
    shelf = SkillShelf(_account(tmp_path), model="gpt-4o")
    ctx = make_ctx(tmp_path / "project", tmp_path, skills=shelf)
    first = _use(ctx, {"name": "deploy"})
    call = Message(role="assistant", tool_calls=(ToolCall("c1", "use_skill", json.dumps({"name": "deploy"})),))
    whole = [call, Message.tool("c1", first.content, name="use_skill")]
    assert shelf.retain(whole) == [] and "already loaded" in _use(ctx, {"name": "deploy"}, "c2").content
    cut = [call, Message.tool("c1", first.content[:400] + "\n[yagent: this tool result was cut from about ...]",
                              name="use_skill")]  # the first tier kept only its start
    assert shelf.retain(cut) == ["deploy"] and shelf.loaded_record() == []
    again = _use(ctx, {"name": "deploy"}, "c3")
    assert "already loaded" not in again.content and "Step 0: do thing 0." in again.content
    assert shelf.retain([Message.user("a summary of everything so far")]) == ["deploy"]  # tier 2 summarised it


def _skills(n: int, description: str) -> list[Skill]:
    return [Skill(name=f"skill-{i:03d}", description=description, path=f"/s/{i}.md", scope="user", root="/s",
                  root_real="/s", folder=False) for i in range(n)]


def test_the_catalogue_fits_its_budget_shortening_descriptions_before_it_leaves_a_skill_out() -> None:
    words = "Use this when the change touches the billing service and its database migrations carefully. " * 3
    whole = render_catalogue(_skills(5, words), budget=10_000)
    assert whole.tokens <= 10_000 and whole.shortened == 0 and not whole.left_out and words.strip() in whole.text
    assert whole.text.startswith("# Skills\n") and "use_skill" in whole.text and whole.note == ""

    budget = whole.tokens // 2
    cut = render_catalogue(_skills(5, words), budget=budget)
    assert count_tokens(cut.text) <= budget and not cut.left_out and cut.shortened == 5
    assert cut.text.count("…") >= 5 and "Shortened to fit" in cut.text and "shortened" in cut.note
    assert all(f"- skill-{i:03d}: Use this" in cut.text for i in range(5))

    many = _skills(300, words)
    tight = render_catalogue(many, budget=600)
    assert count_tokens(tight.text) <= 600 and tight.left_out  # names alone do not fit 300 skills in 600 tokens
    assert tight.shortened == 300 - len(tight.left_out)  # every skill kept lost its description first
    assert "more skills not listed here" in tight.text and tight.left_out[-1] == "skill-299"
    assert "left out" in tight.note and "skill-299" in tight.note
    kept = [line for line in tight.text.splitlines() if line.startswith("- ")]
    assert kept and all(":" not in line for line in kept)


def test_the_budget_is_two_percent_of_the_models_context_window() -> None:
    assert catalogue_budget("gpt-4o") == int(128_000 * CATALOGUE_SHARE)
    assert catalogue_budget("claude-sonnet-4-5") == int(200_000 * CATALOGUE_SHARE)
    assert catalogue_budget("a-model-nobody-knows") == int(DEFAULT_CONTEXT_WINDOW * CATALOGUE_SHARE)
    assert catalogue_budget("") >= MIN_BUDGET_TOKENS


def test_the_holders_named_in_the_account_are_the_agents_whose_surface_holds_use_skill() -> None:
    holders = {a for a in AGENTS if build_surface(a).resolve("use_skill") is not None}
    assert holders == set(SKILL_HOLDERS)
