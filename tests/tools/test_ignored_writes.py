"""Before a file tool writes inside a directory git ignores, the run names those files to the daemon's checkpoints
(`ignored_writes.py`, through the dispatcher): only files inside directories git ignores (not a file ignored on
its own, which every capture reads, nor what only `.ignore` hides), each once per run, the files beneath a
directory that is moved but never behind a link, never a path outside the project, the worktree's top `.gitignore`
read for a project in a subdirectory — and the write waits for the answer, so the daemon reads the file before the
agent changes it."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from tests.tools.doubles import call_tool, make_ctx
from yagent.ipc.noted_paths import MAX_NOTED_PATHS
from yagent.workers.tools import YoloLevel
from yagent.workers.tools.ignored_writes import IgnoredWrites


@dataclass
class RecordingCheckpoints:
    """A `CheckpointPort` that records each note with what the named files held when it was asked."""

    root: Path
    notes: list[dict[str, str | None]] = field(default_factory=list)
    error: str = ""

    async def checkpoint_note(self, paths: list[str]) -> tuple[str, bool]:
        held = {}
        for rel in paths:
            path = self.root / rel
            held[rel] = path.read_text() if path.is_file() else None
        self.notes.append(held)
        return (self.error or "kept"), bool(self.error)

    async def checkpoint_create(self, label: str) -> tuple[str, bool]:
        raise AssertionError("not asked here")

    async def checkpoint_list(self) -> tuple[str, bool]:
        raise AssertionError("not asked here")

    async def checkpoint_rollback(self, number: int) -> tuple[str, bool]:
        raise AssertionError("not asked here")


def _project(project: Path) -> Path:
    (project / ".gitignore").write_text("build/\n*.log\n")
    (project / ".ignore").write_text("docs/\n")  # the search tools' file: git does not read it
    (project / ".git" / "info").mkdir(parents=True)
    (project / ".git" / "info" / "exclude").write_text("cache/\n")
    (project / "build").mkdir()
    (project / "build" / "keep.txt").write_text("before\n")
    (project / "src").mkdir()
    (project / "src" / "a.py").write_text("code\n")
    return project


def test_only_files_inside_directories_git_ignores_are_named_each_once(project: Path, outside: Path) -> None:
    root = _project(project)
    view = IgnoredWrites(root)
    (root / "build" / "deep").mkdir()
    for name in ("x.o", "y.o"):
        (root / "build" / "deep" / name).write_text(name)
    asked = [root / "build" / "keep.txt", root / "src" / "a.py", root / "debug.log", root / "cache" / "c.bin",
             root / "docs" / "guide.md", root / "build" / "deep", outside / "elsewhere.txt", root]
    named = view.to_name(asked)
    # Not debug.log (ignored on its own: every capture reads it), not docs/ (only .ignore hides it from search).
    assert named == ["build/keep.txt", "cache/c.bin", "build/deep/x.o", "build/deep/y.o"] and view.cut == 0
    view.named(named)
    assert view.to_name(asked) == []  # each file once per run
    assert view.to_name([root / "build" / "keep.txt", root / "build" / "new.txt"]) == ["build/new.txt"]


def test_a_moved_directory_names_its_files_without_following_links_and_at_most_the_cap(project: Path,
                                                                                     outside: Path) -> None:
    root = _project(project)
    many = root / "build" / "many"
    many.mkdir()
    for i in range(MAX_NOTED_PATHS + 10):
        (many / f"f{i:05d}").write_text("x")
    (root / "build" / "linked").symlink_to(outside, target_is_directory=True)
    (outside / "secret.txt").write_text("not the project's\n")
    view = IgnoredWrites(root)
    named = view.to_name([many])
    assert len(named) == MAX_NOTED_PATHS and named[0] == "build/many/f00000" and view.cut == 10
    # A link to a directory, deleted or moved: the link is what changes, never the files where it leads.
    assert view.to_name([root / "build" / "linked"], [outside]) == ["build/linked"] and view.cut == 0
    (root / "build" / "v2").mkdir()
    (root / "build" / "v2" / "users.bin").write_text("the user's\n")
    (root / "build" / "current").symlink_to(root / "build" / "v2", target_is_directory=True)
    assert view.to_name([root / "build" / "current"], [root / "build" / "v2"]) == ["build/current"]


def test_a_project_in_a_subdirectory_reads_the_ignore_files_from_the_worktrees_top(tmp_path: Path) -> None:
    top = tmp_path / "mono"
    (top / ".git").mkdir(parents=True)
    (top / ".gitignore").write_text("node_modules/\n")
    app = top / "app"
    (app / "node_modules" / "pkg").mkdir(parents=True)
    named = IgnoredWrites(app).to_name([app / "node_modules" / "pkg" / "index.js", app / "main.js"])
    assert named == ["node_modules/pkg/index.js"]


def test_an_exclude_file_that_is_a_fifo_is_not_waited_on(project: Path) -> None:
    root = _project(project)
    (root / ".git" / "info" / "exclude").unlink()
    os.mkfifo(root / ".git" / "info" / "exclude")  # nobody writes it: reading it would block the run for good
    assert IgnoredWrites(root).to_name([root / "cache" / "c.bin", root / "build" / "b"]) == ["build/b"]


def test_a_directory_too_large_to_name_whole_is_said_on_the_task(project: Path, tmp_path: Path) -> None:
    root = _project(project)
    big = root / "build" / "big"
    big.mkdir()
    for i in range(MAX_NOTED_PATHS + 3):
        (big / f"f{i:05d}").write_text("x")
    said: list[tuple[str, dict]] = []
    port = RecordingCheckpoints(root)
    ctx = make_ctx(root, tmp_path, checkpoints=port, yolo=YoloLevel.YOLO,
                   emit=lambda type_, data: said.append((type_, dict(data))))
    moved = call_tool(ctx, "rename_file", {"source": "build/big", "destination": "build/big2"})
    assert not moved.is_error and len(port.notes[0]) == MAX_NOTED_PATHS
    assert next(iter(port.notes[0])) == "build/big2"  # the destination first: what is cut is the moved content
    warnings = [d["message"] for t, d in said if t == "log" and d.get("level") == "warning"]
    assert any("4 files inside an ignored directory were not kept for `yagent undo`" in w for w in warnings)


def test_the_write_waits_for_the_note_which_sees_the_file_as_it_was(project: Path, tmp_path: Path) -> None:
    root = _project(project)
    port = RecordingCheckpoints(root)
    ctx = make_ctx(root, tmp_path, checkpoints=port, yolo=YoloLevel.YOLO)  # rename_file asks without it
    edited = call_tool(ctx, "search_replace_in_file", {"path": "build/keep.txt", "search": "before",
                                                       "replace": "after"})
    made = call_tool(ctx, "create_file", {"path": "build/new/made.txt", "content": "made\n"})
    plain = call_tool(ctx, "create_file", {"path": "src/b.py", "content": "more\n"})
    again = call_tool(ctx, "search_replace_in_file", {"path": "build/keep.txt", "search": "after", "replace": "x"})
    moved = call_tool(ctx, "rename_file", {"source": "build/new/made.txt", "destination": "build/moved.txt"})
    assert [r.is_error for r in (edited, made, plain, again, moved)] == [False] * 5, moved.content
    assert port.notes == [{"build/keep.txt": "before\n"}, {"build/new/made.txt": None},
                          {"build/moved.txt": None}]  # made.txt was named already; src/b.py is not ignored
    assert (root / "build" / "keep.txt").read_text() == "x\n"


def test_a_note_the_daemon_could_not_keep_lets_the_write_go_ahead(project: Path, tmp_path: Path) -> None:
    root = _project(project)
    port = RecordingCheckpoints(root, error="their content was not kept: a checkpoint moved")
    result = call_tool(make_ctx(root, tmp_path, checkpoints=port), "create_file",
                       {"path": "build/made.txt", "content": "made\n"})
    assert not result.is_error and (root / "build" / "made.txt").read_text() == "made\n"
    assert port.notes == [{"build/made.txt": None}]


def test_a_run_without_checkpoints_names_nothing(project: Path, tmp_path: Path) -> None:
    root = _project(project)
    ctx = make_ctx(root, tmp_path)
    assert not call_tool(ctx, "create_file", {"path": "build/made.txt", "content": "made\n"}).is_error
    assert ctx.ignored_writes is None
