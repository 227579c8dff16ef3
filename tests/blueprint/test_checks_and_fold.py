"""The five checks, each with a fixture that makes it refuse (and prose shaped like production's that must pass:
seed pitfall 42), anchors verified three ways; the fold's idempotence and order independence, a byte-identical
result that is no write, supersedes, stale marking that keeps the prose, orphans hidden then removed, the last five
revisions, and a damaged file set aside rather than repaired."""

from __future__ import annotations

import datetime
import itertools
import os
from pathlib import Path

import pytest

from yagent.workers.blueprint.checks import MAX_ENTRIES, check_submissions
from yagent.workers.blueprint.completion import commit_blueprint
from yagent.workers.blueprint.derivation import derive
from yagent.workers.blueprint.document import parse_document, render_document
from yagent.workers.blueprint.fold import ORPHAN_DAYS, fold
from yagent.workers.blueprint.store import KEEP_REVISIONS, BlueprintStore
from yagent.workers.blueprint.views import read_view, shape_text, visible

from .fixtures import make_project

READ = {"shop/cli.py", "shop/orders.py", "core/ledger.py"}


def _entry(**over: object) -> dict[str, object]:
    base = {"section": "module", "module": "shop", "field": "purpose", "claim": "The shop's command line and orders.",
            "where": "shop/cli.py:main"}
    return {**base, **over}


@pytest.fixture
def derived(tmp_path: Path):
    return derive(make_project(tmp_path / "shop"))


@pytest.mark.parametrize("entry, code, said", [
    (_entry(section="chapter"), "shape", "section must be one of"),
    (_entry(field="mood"), "shape", "field is one of purpose"),
    (_entry(claim=""), "shape", "claim must be 1 to 600"),
    (_entry(claim="x" * 601), "shape", "claim must be 1 to 600"),
    (_entry(where="a\nb"), "shape", "where must be one line"),
    ("not an object", "shape", "must be an object"),
    (_entry(module="payments"), "unknown-module", "payments is not a module"),
    (_entry(module="fmtx"), "unknown-module", "did you mean tools/fmtx?"),
    (_entry(claim="It keeps the ledger in core/ledger.py and writes LEDGER."), "path-not-in-module",
     "names core/ledger.py, not in module shop"),
    (_entry(module="web", where="web/app.js"), "outside-evidence-set", "no file of module web was read"),
    (_entry(where="shop/cli.py:999"), "anchor", "shop/cli.py has 11 lines"),
    (_entry(where="shop/cli.py:no_such_function"), "anchor", "does not occur in shop/cli.py"),
    (_entry(where="shop/missing.py"), "anchor", "is not a path of the project"),
    (_entry(where="shop/missing.py:3"), "anchor", "is not a file of the project"),
    (_entry(where="../../etc/passwd"), "anchor", "points outside the project"),
    (_entry(where="shop/../../etc/passwd:root"), "anchor", "points outside the project"),
    (_entry(where="/etc/passwd:1"), "anchor", "points outside the project"),
])
def test_each_check_refuses_what_it_is_for_saying_why(derived, entry, code: str, said: str) -> None:
    checked = check_submissions([entry], derived, READ)
    assert checked.accepted == [] and [r.code for r in checked.rejected] == [code]
    assert said in checked.rejected[0].detail, checked.rejected[0].detail
    assert checked.account().startswith(f"{code} ×1 (#1: ")


def test_prose_shaped_like_production_passes_and_anchors_are_verified_three_ways(derived) -> None:
    entries = [
        _entry(claim="Commands are Name/Brief/Effect triples, Cold/Hot by use; see cli.py and the orders flow."),
        _entry(field="owns", claim="Owns orders.py and pricing.py (shop/pricing.py prices).", where="shop/orders.py:4"),
        _entry(field="gotchas", claim="__init__.py is empty in both packages.", where="shop"),
        _entry(field="invariants", claim="Prices double.", where="the design document"),
        _entry(section="repo", field="layout", claim="Python in shop/ and core/, JS in web/.", where="pyproject.toml"),
        _entry(module="core", field="owns", claim="The ledger (ledger.py, record).", where="core/ledger.py:record"),
    ]
    checked = check_submissions(entries, derived, READ)
    assert checked.rejected == []
    assert [s.anchor for s in checked.accepted] == ["symbol", "line", "path", "unverifiable", "path", "symbol"]


def test_a_delegated_task_naming_a_module_gets_its_notes_and_one_naming_none_gets_nothing(tmp_path: Path) -> None:
    from yagent.ipc.blueprint_settings import BlueprintSettings
    from yagent.workers.blueprint.reader import BlueprintReader

    root = make_project(tmp_path / "shop")
    derived = derive(root)
    account = commit_blueprint(tmp_path / "bp", root, [_entry(), _entry(module="core", claim="Keeps the ledger.",
                                                                        where="core/ledger.py")], READ, run="r1",
                               derived=derived)
    assert account.startswith("submitted 2, written 2")
    reader = BlueprintReader(root, tmp_path / "bp", BlueprintSettings(prose_budget_tokens=500))
    prose = reader.prose_for("Add a refund command to shop and test it.")
    assert "[shop] purpose: The shop's command line and orders." in prose and "Keeps the ledger" not in prose
    assert reader.prose_for("Refactor the shopping cart.") == ""  # a word that only contains a module's name
    assert reader.prose_for("Look at tools/fmtx.") == ""  # named, but no notes of it
    assert reader.shape("chat") == "" and reader.shape("director").startswith("# Repository map")


def test_past_eight_entries_the_rest_are_refused_and_none_submitted_is_said(tmp_path: Path, derived) -> None:
    many = [_entry(field=f, claim=f"claim {i}") for i, f in zip(range(10), itertools.cycle(
        ["purpose", "owns", "invariants", "gotchas", "conventions"]), strict=False)]
    checked = check_submissions(many, derived, READ)
    assert [r.code for r in checked.rejected] == ["over-limit", "over-limit"] and len(checked.accepted) == MAX_ENTRIES
    account = commit_blueprint(tmp_path / "bp", Path(derived.root), None, READ, run="r1", derived=derived)
    assert account.startswith("nothing submitted") and not (tmp_path / "bp" / "blueprint.md").exists()


def _folded(derived, entries: list[dict], current=None, today: str = "2026-01-10"):
    from yagent.workers.blueprint.document import Blueprint

    accepted = check_submissions(entries, derived, READ).accepted
    return fold(current or Blueprint(), accepted, derived, today=today, run="r1", project="shop")


def test_the_fold_is_idempotent_order_independent_and_a_byte_identical_result_is_no_write(
        tmp_path: Path, derived) -> None:
    entries = [_entry(), _entry(field="owns", claim="Orders.", where="shop/orders.py"),
               _entry(field="owns", claim="Orders and prices.", where="shop/orders.py"),  # same module and field
               _entry(module="core", field="purpose", claim="Keeps the ledger.", where="core/ledger.py:LEDGER")]
    texts = set()
    for order in itertools.permutations(entries):
        once, account = _folded(derived, list(order))
        twice, again = _folded(derived, list(order), current=once)
        assert render_document(twice) == render_document(once) and again.written == 0 and again.unchanged == 3
        assert account.conflicts == 1 and len(once.entries) == 3
        texts.add(render_document(once))
    assert len(texts) == 1
    store = BlueprintStore(tmp_path / "bp")
    with store.locked():
        assert store.write(texts.pop()) is True
        assert store.write(render_document(parse_document(store.raw() or b""))) is False  # same bytes: no write
    assert store.revision_names() == []


def test_supersedes_removes_by_id_and_a_wrong_id_is_counted_not_failed(derived) -> None:
    first, _ = _folded(derived, [_entry()])
    old = first.entries[0].id
    second, account = _folded(derived, [_entry(field="owns", claim="Orders.", where="shop/orders.py",
                                               supersedes=old), _entry(field="gotchas", claim="None.",
                                                                       where="shop", supersedes="ffffffffff")],
                              current=first)
    assert [e.field for e in second.entries] == ["gotchas", "owns"]
    assert account.superseded == 1 and account.unknown_supersedes == ["ffffffffff"]


def test_a_structural_change_marks_a_note_stale_keeping_its_prose_and_a_confirmation_freshens_it(
        tmp_path: Path) -> None:
    root = make_project(tmp_path / "shop")
    before = derive(root)
    folded, _ = _folded(before, [_entry()])
    (root / "shop" / "refunds.py").write_text("")
    after = derive(root)
    shown = visible(folded, after)
    assert [(s.entry.claim, s.stale) for s in shown] == [("The shop's command line and orders.", True)]
    view = read_view(after, folded, module="shop", state="stale")
    assert "The shop's command line and orders." in view and "stale: the structure changed since" in view
    assert "refunds.py" in view  # the derived facts are now's
    assert "[1 notes, 1 stale]" in shape_text(after, folded, max_tokens=500, count=len)
    refreshed, account = _folded(after, [_entry()], current=folded)
    assert account.written == 1 and not visible(refreshed, after)[0].stale


def test_orphans_are_hidden_then_removed_after_ninety_days_and_come_back_with_their_module(tmp_path: Path) -> None:
    root = make_project(tmp_path / "shop")
    derived = derive(root)
    folded, _ = _folded(derived, [_entry(module="core", claim="Keeps the ledger.", where="core/ledger.py")])
    (root / "core" / "ledger.py").rename(root / "ledger.txt")
    (root / "core" / "__init__.py").unlink()
    gone = derive(root)
    hidden, _ = fold(folded, [], gone, today="2026-01-11")
    assert hidden.entries[0].orphaned_since == "2026-01-11" and visible(hidden, gone) == []
    assert "Keeps the ledger" not in read_view(gone, hidden) and "core" not in shape_text(gone, hidden,
                                                                                          max_tokens=500, count=len)
    later = (datetime.date(2026, 1, 11) + datetime.timedelta(days=ORPHAN_DAYS - 1)).isoformat()
    kept, account = fold(hidden, [], gone, today=later)
    assert len(kept.entries) == 1 and account.orphans_removed == 0
    (root / "core" / "__init__.py").write_text("")
    back, _ = fold(kept, [], derive(root), today=later)
    assert back.entries[0].orphaned_since == ""
    removed, account = fold(hidden, [], gone, today=(datetime.date(2026, 1, 11) + datetime.timedelta(
        days=ORPHAN_DAYS)).isoformat())
    assert removed.entries == [] and account.orphans_removed == 1


def test_the_last_five_revisions_are_kept_and_a_damaged_file_is_set_aside_never_repaired(tmp_path: Path,
                                                                                          derived) -> None:
    directory = tmp_path / "bp"
    directory.mkdir()
    (directory / "blueprint.md").write_text("---\n{\"schema\": 1, \"entries\": [ {broken\n")
    store = BlueprintStore(directory)
    assert store.read().damaged.startswith("its front-matter does not end")
    assert store.read().damaged and (directory / "blueprint.md").read_text().startswith("---\n{")  # untouched
    day = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    for i in range(KEEP_REVISIONS + 2):
        text = render_document(_folded(derived, [_entry(claim=f"version {i}")])[0])
        with store.locked():
            assert store.write(text, now=day + datetime.timedelta(seconds=i))
    names = store.revision_names()
    assert len(names) == KEEP_REVISIONS and names[-1].startswith("20260101T000006")
    assert "version 6" in (directory / "blueprint.md").read_text()
    assert "version 5" in (directory / "revisions" / names[-1]).read_text()


def test_a_blueprint_name_holding_a_fifo_or_a_link_is_read_as_damaged_saying_so_and_a_write_replaces_it(
        tmp_path: Path, derived) -> None:
    directory = tmp_path / "bp"
    directory.mkdir()
    os.mkfifo(directory / "blueprint.md")  # nobody writes it: a reader that opened it blocking would hang
    store = BlueprintStore(directory)
    assert store.read().damaged == "it is not a regular file" and store.read().entries == []
    text = render_document(_folded(derived, [_entry(claim="after the fifo")])[0])
    with store.locked():
        assert store.write(text)
    assert "after the fifo" in (directory / "blueprint.md").read_text() and store.revision_names() == []
    (tmp_path / "elsewhere.md").write_text(text)
    (directory / "blueprint.md").unlink()
    (directory / "blueprint.md").symlink_to(tmp_path / "elsewhere.md")
    assert store.read().damaged.startswith("it cannot be opened (") and store.read().entries == []


def test_a_revisions_link_is_refused_and_nothing_in_its_target_is_written_or_deleted(tmp_path: Path,
                                                                                       derived) -> None:
    elsewhere = tmp_path / "elsewhere"  # a directory a confined run cannot reach, which a later run would prune
    elsewhere.mkdir()
    for i in range(KEEP_REVISIONS + 3):
        (elsewhere / f"doc{i}.md").write_text(f"document {i}\n")
    before = {p.name: p.read_text() for p in elsewhere.iterdir()}
    directory = tmp_path / "bp"
    assert commit_blueprint(directory, Path(derived.root), [_entry()], READ, run="r1", derived=derived).startswith(
        "submitted 1, written 1")
    (directory / "revisions").symlink_to(elsewhere, target_is_directory=True)  # planted by a Repo run
    first = (directory / "blueprint.md").read_bytes()
    assert BlueprintStore(directory).revision_names() == []  # its documents are no revisions of the blueprint

    account = commit_blueprint(directory, Path(derived.root), [_entry(claim="The shop's orders.")], READ, run="r2",
                               derived=derived)

    assert account.startswith("submitted 1, none written: the blueprint could not be written (")
    assert f"{directory / 'revisions'} is a symbolic link" in account and "remove it" in account
    assert {p.name: p.read_text() for p in elsewhere.iterdir()} == before  # nothing written there, nothing deleted
    assert (directory / "blueprint.md").read_bytes() == first  # no write without its undo
    (directory / "revisions").unlink()  # what the message says to do: the next write goes through
    assert "written 1" in commit_blueprint(directory, Path(derived.root), [_entry(claim="The shop's orders.")], READ,
                                           run="r3", derived=derived)
    assert len(BlueprintStore(directory).revision_names()) == 1


def test_the_account_says_what_was_written_and_refused(tmp_path: Path, derived) -> None:
    account = commit_blueprint(tmp_path / "bp", Path(derived.root), [
        _entry(), _entry(module="web", field="purpose", claim="The web client.", where="web/app.js")], READ, run="r1",
        derived=derived)
    assert account == ("submitted 2, written 1, rejected 1: outside-evidence-set ×1 (#2: no file of module web was "
                       "read in this run), evidence: 3 files read")
    assert parse_document((tmp_path / "bp" / "blueprint.md").read_bytes()).entries[0].claim == \
        "The shop's command line and orders."
