"""Notes on disk: collision-free stems under concurrent writers, atomic writes, and readers that survive
whatever the directory holds (damage, cuts, links, nan, huge values)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from yagent.ipc.vocabulary import HandoffStatus
from yagent.workers.board import DEGRADED_ABSENT, DEGRADED_V1, TMP_SUFFIX, Fact, Handoff, NoteStore
from yagent.workers.board.handoff_parse import MAX_CONCLUSION, MAX_FACTS

_WRITER = """
import sys
from pathlib import Path
from yagent.workers.board import Handoff, NoteStore
store = NoteStore(Path(sys.argv[1]))
start = Path(sys.argv[3])
while not start.exists():
    pass
for i in range(int(sys.argv[2])):
    store.write("repo", Handoff(f"conclusion {sys.argv[4]}-{i}"), f"body {sys.argv[4]}-{i}", task="same task")
"""


def test_concurrent_note_writes_from_real_processes_never_collide(tmp_path: Path) -> None:
    root, start = tmp_path / "notes", tmp_path / "go"
    per_writer, writers = 60, 4
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, str(root), str(per_writer), str(start), str(w)])
             for w in range(writers)]
    start.touch()  # all four write in the same instant, same agent, same task text
    assert [p.wait(timeout=120) for p in procs] == [0] * writers
    store = NoteStore(root)
    refs = store.refs()
    assert len(refs) == per_writer * writers
    bodies = {store.read(r).body for r in refs}
    assert bodies == {f"body {w}-{i}" for w in range(writers) for i in range(per_writer)}
    assert not list((root / "repo").glob("*" + TMP_SUFFIX))


def test_a_write_in_progress_a_link_and_a_stray_name_are_not_notes(tmp_path: Path) -> None:
    store = NoteStore(tmp_path / "notes")
    ref = store.write("repo", Handoff("real"), "body")
    agent_dir = tmp_path / "notes" / "repo"
    (agent_dir / "20261203-120000-000000-00000000.md.tmp").write_text("---\n{}\n---\nhalf")
    outside = tmp_path / "outside.md"
    outside.write_text('---\n{"schema": 2, "handoff": {"conclusion": "secret", "status": "ok"}}\n---\nsecret')
    (agent_dir / "20261203-120001-000000-00000001.md").symlink_to(outside)
    (agent_dir / "notes.txt").write_text("x")
    (tmp_path / "notes" / "linked").symlink_to(agent_dir)  # an agent directory that is a link
    assert store.refs() == [ref]


def test_a_note_swapped_for_a_symlink_after_listing_is_not_followed(tmp_path: Path) -> None:
    store = NoteStore(tmp_path / "notes")
    ref = store.write("repo", Handoff("real"), "body")
    secret = tmp_path / "secret.md"
    secret.write_text("---\n{}\n---\nsecret")
    path = store.path(ref)
    path.unlink()
    path.symlink_to(secret)
    assert store.read(ref) is None


def _raw_note(tmp_path: Path, content: bytes) -> tuple[NoteStore, object]:
    store = NoteStore(tmp_path / "notes")
    ref = store.write("repo", Handoff("placeholder"), "body")
    store.path(ref).write_bytes(content)
    return store, ref


def test_damaged_cut_and_nan_bearing_front_matters_read_as_degraded_absent(tmp_path: Path) -> None:
    cases = {
        "not json": b"---\n{\"handoff\": {\"conclusion\": oops}\n---\nbody",
        "cut in the middle": b"---\n{\"schema\": 2, \"handoff\": {\"conclu",
        "nan": b'---\n{"schema": 2, "handoff": {"conclusion": NaN, "status": "ok"}}\n---\nbody',
        "no front-matter": b"just text",
        "binary": bytes(range(256)),
        "a list": b"---\n[1, 2]\n---\nbody",
        "deep": b"---\n" + b"[" * 100_000 + b"\n---\n",
    }
    for what, content in cases.items():
        store, ref = _raw_note(tmp_path / what.replace(" ", "_"), content)
        for head_only in (True, False):
            note = store.read(ref, head_only=head_only)
            assert note is not None, what
            assert note.handoff.degraded == DEGRADED_ABSENT, what
            assert note.handoff.conclusion, what


def test_huge_values_are_capped_on_reading(tmp_path: Path) -> None:
    front = {"schema": 2, "handoff": {"conclusion": "c" * 1_000_000, "status": "ok",
                                      "facts": [{"claim": f"f{i}", "where": "x:1"} for i in range(10_000)],
                                      "open_questions": [1e308, float("1e308")]}}
    store, ref = _raw_note(tmp_path, b"---\n" + json.dumps(front).encode() + b"\n---\nbody")
    note = store.read(ref)
    # The front-matter is past the head's cap: the index reads it as damaged, a full read sees it all.
    assert store.read(ref, head_only=True).handoff.degraded == DEGRADED_ABSENT
    assert len(note.handoff.conclusion) == MAX_CONCLUSION and len(note.handoff.facts) == MAX_FACTS


def test_a_v1_note_is_read_through_a_synthesised_handoff_and_never_rewritten(tmp_path: Path) -> None:
    content = b'---\n{"agent": "repo", "summary": "the parser lives in src/parse.c"}\n---\nold body\n'
    store, ref = _raw_note(tmp_path, content)
    before = os.stat(store.path(ref))
    note = store.read(ref)
    assert note.handoff.degraded == DEGRADED_V1
    assert note.handoff.conclusion == "the parser lives in src/parse.c"
    assert note.body == "old body\n"
    assert store.path(ref).read_bytes() == content
    assert os.stat(store.path(ref)).st_mtime_ns == before.st_mtime_ns


def test_a_written_note_reads_back_whole(tmp_path: Path) -> None:
    store = NoteStore(tmp_path / "notes")
    handoff = Handoff("done", (Fact("prints hi", "app.py:1"),), ("why?",), HandoffStatus.PARTIAL)
    body = "line one\n---\nline three (a fence inside the body)\n" * 3
    ref = store.write("custom:Reviewer", handoff, body, task="look", artifacts=("20261203-120000-0a0b0c0d",))
    assert ref.agent == "custom_reviewer" and ref.handle.startswith("note:custom_reviewer/")
    note = store.read(ref)
    artifact = ("20261203-120000-0a0b0c0d",)
    assert (note.handoff, note.body, note.task, note.artifacts) == (handoff, body, "look", artifact)
    assert (os.stat(store.path(ref)).st_mode & 0o777) == 0o600


def _counting_reads(monkeypatch) -> list[str]:
    from yagent.workers.board import note_store
    opened: list[str] = []
    real = note_store._read_regular

    def counted(directory: str, name: str, limit: int, identity=None):
        opened.append(name)
        return real(directory, name, limit, identity)

    monkeypatch.setattr(note_store, "_read_regular", counted)
    return opened


def test_front_matters_read_or_written_before_are_kept_while_their_files_stay_the_same(tmp_path: Path,
                                                                                       monkeypatch) -> None:
    writer = NoteStore(tmp_path / "notes")
    refs = [writer.write("repo", Handoff(f"conclusion {i}"), f"body {i}") for i in range(4)]
    refs.append(writer.write("chat", None, "no hand-off", task="t", artifacts=("a1",), summary="said", status="ok"))
    opened = _counting_reads(monkeypatch)
    reader = NoteStore(tmp_path / "notes")  # another process's view of the board: it has read nothing yet
    first = reader.heads(refs)
    assert [n.handoff.conclusion for n in first[:4]] == [f"conclusion {i}" for i in range(4)]
    assert len(opened) == 5
    again = reader.heads(refs)
    assert len(opened) == 5 and again == first  # every file unchanged: none opened again
    # The writer kept what it wrote, exactly as a read gives it back (a note without a hand-off included).
    assert writer.heads(refs) == first and len(opened) == 5
    later = writer.write("repo", Handoff("conclusion 5"), "body 5")
    assert [n.handoff.conclusion for n in writer.heads([*refs, later])][-1] == "conclusion 5"
    assert len(opened) == 5
    assert [n.handoff.conclusion for n in reader.heads([*refs, later])][-1] == "conclusion 5"
    assert len(opened) == 6  # only the new note was read


def test_a_note_replaced_rewritten_or_swapped_for_a_link_is_read_anew(tmp_path: Path, monkeypatch) -> None:
    store = NoteStore(tmp_path / "notes")
    replaced, rewritten, linked = (store.write("repo", Handoff(f"old {i}"), "body") for i in range(3))
    refs = [replaced, rewritten, linked]
    assert [n.handoff.conclusion for n in store.heads(refs)] == ["old 0", "old 1", "old 2"]
    opened = _counting_reads(monkeypatch)
    # Another file put under the same name (another inode); the same file written over in place (another size);
    # and a link to a file outside the board.
    other = tmp_path / "other.md"
    other.write_text('---\n{"schema": 2, "handoff": {"conclusion": "new 0", "status": "ok"}}\n---\nb')
    os.replace(other, store.path(replaced))
    store.path(rewritten).write_text('---\n{"schema": 2, "handoff": {"conclusion": "new 1, longer", '
                                     '"status": "ok"}}\n---\nb')
    secret = tmp_path / "secret.md"
    secret.write_text('---\n{"schema": 2, "handoff": {"conclusion": "secret", "status": "ok"}}\n---\ns')
    store.path(linked).unlink()
    store.path(linked).symlink_to(secret)
    notes = store.heads(refs)
    assert [n.handoff.conclusion if n else None for n in notes] == ["new 0", "new 1, longer", None]
    assert len(opened) == 3
    store.path(linked).unlink()  # gone: neither the old note nor the link's target comes back
    assert store.heads([linked]) == [None]
