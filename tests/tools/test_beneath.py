"""The path a file tool checks is the path it uses: links swapped in after the check, by a test seam right
after it and by a concurrent swapper process; path tricks; hardlinks; both ways of resolving (`Resolution`).

Every test asserts on the outside tree itself (names, inodes, change times, contents), not on a result text.
"""

from __future__ import annotations

import asyncio
import errno
import os
import select
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from yagent.workers.tools import AuthDecision, ToolCall, ToolContext, ToolResult, YoloLevel, build_surface, invoke_tool
from yagent.workers.tools.beneath import FileAccess, PathEscape, Resolution, default_resolution, open_beneath

from .doubles import ScriptedAuthorizer, call_tool, make_ctx

RESOLUTIONS = [
    pytest.param(Resolution.OPENAT2, marks=pytest.mark.skipif(
        default_resolution() is not Resolution.OPENAT2, reason="this kernel has no openat2")),
    Resolution.WALK,
]


def snapshot(tree: Path) -> dict[str, tuple[Any, ...]]:
    """Everything a write, create, delete, rename or append anywhere in `tree` changes (links not followed)."""
    seen: dict[str, tuple[Any, ...]] = {}
    for dirpath, dirnames, filenames in os.walk(tree):
        for name in [".", *dirnames, *filenames]:
            path = Path(dirpath) / name
            st = os.lstat(path)
            content: Any = None
            if path.is_symlink():
                content = os.readlink(path)
            elif path.is_file():
                content = path.read_bytes()
            seen[str(path.relative_to(tree))] = (st.st_mode, st.st_ino, st.st_ctime_ns, st.st_mtime_ns, content)
    return seen


@pytest.fixture
def layout(project: Path, outside: Path) -> tuple[Path, Path]:
    """`project/d` and `outside` hold the same names, so a tool sent outside finds what it looks for."""
    for tree in (project / "d", outside):
        tree.mkdir(exist_ok=True)
        who = "outside" if tree == outside else "inside"
        (tree / "f.txt").write_text(f"{who} f\n")
        (tree / "e.txt").write_text("old\n")
        (tree / "victim").write_text(f"{who} victim\n")
        (tree / "log.txt").write_text("")
    (project / "top.txt").write_text("top\n")
    return project, outside


@dataclass
class SwapAfterCheck(ToolContext):
    """A context whose authorisation step (which runs after the guard's check, before the tool) swaps paths."""

    swap: Callable[[], None] | None = None

    async def authorize(self, request: Any) -> str | None:
        refusal = await super().authorize(request)
        if refusal is None and self.swap is not None:
            self.swap()
        return refusal


def swap_dir_for_link(directory: Path, target: Path) -> Callable[[], None]:
    def swap() -> None:
        directory.rename(directory.with_name(directory.name + "-held"))
        directory.symlink_to(target, target_is_directory=True)
    return swap


SWAP_CASES = [
    ("create_file", {"path": "d/f.txt", "content": "agent\n", "overwrite": True}),
    ("create_file", {"path": "d/new/deeper.txt", "content": "agent\n"}),
    ("search_replace_in_file", {"path": "d/e.txt", "search": "old", "replace": "new"}),
    ("delete_file", {"path": "d/victim"}),
    ("rename_file", {"source": "d/victim", "destination": "d/moved"}),
    ("rename_file", {"source": "top.txt", "destination": "d/top.txt"}),
    ("read_file", {"path": "d/f.txt"}),
    ("list_dir", {"path": "d"}),
    ("run_bash", {"command": "echo agent >> log.txt", "cwd": "d"}),
]


@pytest.mark.parametrize("resolution", RESOLUTIONS)
@pytest.mark.parametrize(("tool", "args"), SWAP_CASES, ids=[f"{t}-{i}" for i, (t, _) in enumerate(SWAP_CASES)])
def test_a_directory_swapped_for_a_link_right_after_the_check_sends_no_tool_outside(
    layout: tuple[Path, Path], tmp_path: Path, tool: str, args: dict[str, Any], resolution: Resolution
) -> None:
    project, outside = layout
    before = snapshot(outside)
    ctx = SwapAfterCheck(project_root=project, scratch_dir=tmp_path / "scratch", yolo=YoloLevel.YOLO,
                         resolution=resolution, swap=swap_dir_for_link(project / "d", outside))
    result = call_tool(ctx, tool, args)
    assert (project / "d").is_symlink()  # the swap did happen between the check and the use
    assert snapshot(outside) == before
    assert result.is_error and "changed while" in result.content, result.content
    assert "outside" not in result.content.replace(str(outside), "")  # nothing read from there either


@pytest.mark.parametrize("resolution", RESOLUTIONS)
def test_run_bash_starts_in_the_directory_it_opened_even_when_a_link_replaces_it_before_the_spawn(
    layout: tuple[Path, Path], tmp_path: Path, resolution: Resolution, monkeypatch: pytest.MonkeyPatch
) -> None:
    project, outside = layout
    before = snapshot(outside)
    spawn = asyncio.create_subprocess_exec
    swap = swap_dir_for_link(project / "d", outside)

    async def swap_then_spawn(*args: Any, **kwargs: Any) -> asyncio.subprocess.Process:
        swap()  # the directory is open by now; the child changes into it by descriptor
        return await spawn(*args, **kwargs)

    monkeypatch.setattr(asyncio, "create_subprocess_exec", swap_then_spawn)
    ctx = make_ctx(project, tmp_path, resolution=resolution)
    result = call_tool(ctx, "run_bash", {"command": "echo agent >> log.txt; pwd -P", "cwd": "d"})
    assert (project / "d").is_symlink() and not result.is_error, result.content
    assert snapshot(outside) == before
    assert (project / "d-held" / "log.txt").read_text() == "agent\n"
    assert str(project / "d-held") in result.content


def test_run_bash_commands_get_the_users_umask_not_the_workers(project: Path, tmp_path: Path) -> None:
    ctx = make_ctx(project, tmp_path)
    ctx.guard.files.umask = 0o022
    previous = os.umask(0o077)  # a worker's own umask: its private state
    try:
        call_tool(ctx, "run_bash", {"command": "touch made-by-shell; mkdir dir-by-shell"})
        call_tool(ctx, "create_file", {"path": "sub/made-by-tool", "content": "x"})
    finally:
        os.umask(previous)
    assert (project / "made-by-shell").stat().st_mode & 0o777 == 0o644
    assert (project / "dir-by-shell").stat().st_mode & 0o777 == 0o755
    assert (project / "sub/made-by-tool").stat().st_mode & 0o777 == 0o644
    assert (project / "sub").stat().st_mode & 0o777 == 0o755


@pytest.mark.parametrize("resolution", RESOLUTIONS)
def test_an_approved_outside_write_acts_only_on_the_approved_path(
    project: Path, outside: Path, tmp_path: Path, resolution: Resolution
) -> None:
    (outside / "sub").mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    before = snapshot(elsewhere)
    auth = ScriptedAuthorizer(AuthDecision.ALLOW_ONCE)
    ctx = SwapAfterCheck(project_root=project, scratch_dir=tmp_path / "scratch", authorizer=auth,
                         resolution=resolution)
    done = call_tool(ctx, "create_file", {"path": str(outside / "sub" / "ok.txt"), "content": "approved\n"})
    assert not done.is_error and (outside / "sub" / "ok.txt").read_text() == "approved\n"
    assert sorted(os.listdir(outside / "sub")) == ["ok.txt"]

    ctx.swap = swap_dir_for_link(outside / "sub", elsewhere)  # the approved directory becomes a link after the yes
    refused = call_tool(ctx, "create_file", {"path": str(outside / "sub" / "late.txt"), "content": "x"})
    assert refused.is_error and "changed while" in refused.content
    assert snapshot(elsewhere) == before and len(auth.requests) == 2


# --- a concurrent swapper -------------------------------------------------------------------------------------

_SWAPPER = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
a, b = (os.fsencode(p) for p in sys.argv[1:3])
if libc.renameat2(-100, a, -100, b, 2) != 0:  # RENAME_EXCHANGE: the two names trade places atomically
    sys.exit(f"renameat2 failed: {os.strerror(ctypes.get_errno())}")
print("ready", flush=True)
while True:
    libc.renameat2(-100, a, -100, b, 2)
"""


@pytest.fixture
def swapper(layout: tuple[Path, Path]) -> Iterator[int]:
    """A process trading `project/d` (a directory) and `project/alt` (a link to outside) as fast as it can.

    Yields a descriptor of the real directory, which follows it whatever its name is at the moment.
    """
    project, outside = layout
    (project / "alt").symlink_to(outside, target_is_directory=True)
    held = os.open(project / "d", os.O_PATH | os.O_DIRECTORY)
    proc = subprocess.Popen([sys.executable, "-c", _SWAPPER, str(project / "d"), str(project / "alt")],
                            stdout=subprocess.PIPE, text=True)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 30)
        assert ready and proc.stdout is not None and proc.stdout.readline() == "ready\n", "the swapper did not start"
        yield held
    finally:
        proc.kill()
        proc.wait()
        os.close(held)


def _race(ctx: ToolContext, calls: Callable[[int], tuple[str, dict[str, Any]]], count: int,
          after: Callable[[ToolResult], None] = lambda _r: None) -> dict[str, int]:
    """`count` calls made while the swapper runs; how they ended (for the figures, never asserted)."""
    surface = build_surface("coding", yolo=ctx.yolo)
    ended = {"done": 0, "refused by the check": 0, "moved away after the check": 0, "other error": 0}

    async def run() -> None:
        for i in range(count):
            name, args = calls(i)
            result = await invoke_tool(surface, ToolCall(f"c{i}", name, args), ctx)
            after(result)
            if not result.is_error:
                ended["done"] += 1
            elif "changed while" in result.content:
                ended["moved away after the check"] += 1
            elif "authorisation" in result.content:
                ended["refused by the check"] += 1
            else:
                ended["other error"] += 1

    asyncio.run(run())
    return ended


RACE_CALLS = {Resolution.OPENAT2: 2000, Resolution.WALK: 1000}


def _racing_ctx(project: Path, tmp_path: Path, resolution: Resolution) -> ToolContext:
    return make_ctx(project, tmp_path, yolo=YoloLevel.YOLO, resolution=resolution)


@pytest.mark.parametrize("resolution", RESOLUTIONS)
def test_create_file_racing_a_swapper_never_writes_outside(
    layout: tuple[Path, Path], swapper: int, tmp_path: Path, resolution: Resolution
) -> None:
    project, outside = layout
    before = snapshot(outside)
    ended = _race(_racing_ctx(project, tmp_path, resolution),
                  lambda i: ("create_file", {"path": "d/f.txt", "content": f"agent {i}\n", "overwrite": True}),
                  RACE_CALLS[resolution])
    print(f"create_file {resolution.value}: {ended}")
    assert snapshot(outside) == before


@pytest.mark.parametrize("resolution", RESOLUTIONS)
def test_search_replace_racing_a_swapper_never_edits_outside(
    layout: tuple[Path, Path], swapper: int, tmp_path: Path, resolution: Resolution
) -> None:
    project, outside = layout
    before = snapshot(outside)

    def edit(_i: int) -> tuple[str, dict[str, Any]]:
        current = _read_at(swapper, "e.txt").strip()
        return "search_replace_in_file", {"path": "d/e.txt", "search": current,
                                          "replace": "new" if current == "old" else "old"}

    ended = _race(_racing_ctx(project, tmp_path, resolution), edit, RACE_CALLS[resolution])
    print(f"search_replace_in_file {resolution.value}: {ended}")
    assert snapshot(outside) == before


@pytest.mark.parametrize("resolution", RESOLUTIONS)
def test_delete_file_racing_a_swapper_never_deletes_outside(
    layout: tuple[Path, Path], swapper: int, tmp_path: Path, resolution: Resolution
) -> None:
    project, outside = layout
    before = snapshot(outside)

    def recreate(_result: ToolResult) -> None:
        with _suppress_exists():
            os.close(os.open("victim", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644, dir_fd=swapper))

    ended = _race(_racing_ctx(project, tmp_path, resolution), lambda _i: ("delete_file", {"path": "d/victim"}),
                  RACE_CALLS[resolution], recreate)
    print(f"delete_file {resolution.value}: {ended}")
    assert snapshot(outside) == before


@pytest.mark.parametrize("resolution", RESOLUTIONS)
def test_rename_file_racing_a_swapper_never_moves_anything_outside(
    layout: tuple[Path, Path], swapper: int, tmp_path: Path, resolution: Resolution
) -> None:
    project, outside = layout
    before = snapshot(outside)

    def move(_i: int) -> tuple[str, dict[str, Any]]:
        here = "victim" if _exists_at(swapper, "victim") else "moved"
        return "rename_file", {"source": f"d/{here}", "destination": f"d/{'moved' if here == 'victim' else 'victim'}"}

    ended = _race(_racing_ctx(project, tmp_path, resolution), move, RACE_CALLS[resolution])
    print(f"rename_file {resolution.value}: {ended}")
    assert snapshot(outside) == before


@pytest.mark.parametrize("resolution", RESOLUTIONS)
def test_run_bash_racing_a_swapper_never_runs_outside(
    layout: tuple[Path, Path], swapper: int, tmp_path: Path, resolution: Resolution
) -> None:
    project, outside = layout
    before = snapshot(outside)
    ended = _race(_racing_ctx(project, tmp_path, resolution),
                  lambda _i: ("run_bash", {"command": "echo agent >> log.txt", "cwd": "d"}), 150)
    print(f"run_bash {resolution.value}: {ended}")
    assert snapshot(outside) == before
    assert _read_at(swapper, "log.txt").count("agent") == ended["done"]  # every command that ran, ran inside


def _read_at(dir_fd: int, name: str) -> str:
    fd = os.open(name, os.O_RDONLY, dir_fd=dir_fd)
    with os.fdopen(fd) as fh:
        return fh.read()


def _exists_at(dir_fd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


class _suppress_exists:
    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, _tb: object) -> bool:
        return isinstance(exc, FileExistsError)


# --- path tricks ----------------------------------------------------------------------------------------------


@pytest.fixture
def tricks(project: Path, outside: Path) -> tuple[Path, Path]:
    (outside / "f.txt").write_text("outside f\n")
    (project / "lnk").symlink_to(outside, target_is_directory=True)
    (project / "dangle").symlink_to(outside / "not-yet.txt")
    (project / "via-proc").symlink_to(f"/proc/self/root{outside}", target_is_directory=True)
    return project, outside


TRICK_PATHS = [
    "../outside/f.txt",
    "d/../../outside/f.txt",
    "{outside}/f.txt",
    "/proc/self/root{outside}/f.txt",
    "/proc/self/cwd/../outside/f.txt",
    "lnk/f.txt",
    "lnk/new.txt",
    "dangle",
    "via-proc/f.txt",
    "~/../../{outside}/f.txt",
]


@pytest.mark.parametrize("resolution", RESOLUTIONS)
@pytest.mark.parametrize("trick", TRICK_PATHS)
@pytest.mark.parametrize("tool", ["create_file", "search_replace_in_file", "delete_file", "rename_file"])
def test_path_tricks_reach_nothing_outside_without_a_yes(
    tricks: tuple[Path, Path], tmp_path: Path, trick: str, tool: str, resolution: Resolution
) -> None:
    project, outside = tricks
    path = trick.format(outside=outside)
    args = {
        "create_file": {"path": path, "content": "agent\n", "overwrite": True},
        "search_replace_in_file": {"path": path, "search": "outside", "replace": "agent"},
        "delete_file": {"path": path},
        "rename_file": {"source": path, "destination": "taken.txt"},
    }[tool]
    before = snapshot(outside)
    result = call_tool(make_ctx(project, tmp_path, yolo=YoloLevel.YOLO, resolution=resolution), tool, args)
    assert snapshot(outside) == before
    # A link that is named itself (delete or move the link) is inside; everything else asks, and nobody is there.
    if not (tool in ("delete_file", "rename_file") and path in ("dangle", "lnk")):
        assert result.is_error


@pytest.mark.parametrize("resolution", RESOLUTIONS)
def test_a_nul_or_a_look_alike_of_a_separator_or_dot_stays_a_name_inside(
    project: Path, outside: Path, tmp_path: Path, resolution: Resolution
) -> None:
    before = snapshot(outside)
    ctx = make_ctx(project, tmp_path, resolution=resolution)
    nul = call_tool(ctx, "create_file", {"path": "a\x00/../../outside/f.txt", "content": "x"})
    assert nul.is_error and "NUL" in nul.content
    for look_alike in ("\u2025/outside/x.txt", "\uff0e\uff0e\u2215outside\u2215x.txt", "d\u2044..\u2044x.txt",
                       "\u2024\u2024/x.txt"):
        made = call_tool(ctx, "create_file", {"path": look_alike, "content": "x"})
        assert not made.is_error, made.content
        assert (project / look_alike).read_text() == "x"
    assert snapshot(outside) == before


@pytest.mark.parametrize("resolution", RESOLUTIONS)
def test_file_access_refuses_unresolved_escapes_itself(project: Path, outside: Path, resolution: Resolution) -> None:
    """The layer below the guard, handed paths the guard would have resolved: it never leaves its anchor."""
    (outside / "f.txt").write_text("outside f\n")
    (project / "lnk").symlink_to(outside, target_is_directory=True)
    (project / "dangle").symlink_to(outside / "made.txt")
    (project / "rel").symlink_to("../outside", target_is_directory=True)
    before = snapshot(outside)
    files = FileAccess(project, resolution=resolution)
    creating = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    for rel in ("../outside/f.txt", "lnk/f.txt", "rel/f.txt", "dangle", "d/../../outside/f.txt"):
        with pytest.raises((PathEscape, FileNotFoundError)):
            os.close(files.open(project / rel, creating))
    with pytest.raises(PathEscape), files.directory(project / "lnk" / "made", create=True):
        pass
    with pytest.raises(PathEscape):
        os.close(open_beneath(os.open(project, os.O_PATH), "/etc/passwd", os.O_RDONLY, follow_links=True,
                              resolution=resolution))
    assert snapshot(outside) == before


@pytest.mark.parametrize("resolution", RESOLUTIONS)
def test_a_project_root_replaced_by_a_link_is_refused(project: Path, outside: Path, tmp_path: Path,
                                                      resolution: Resolution) -> None:
    (outside / "f.txt").write_text("outside f\n")
    before = snapshot(outside)
    ctx = make_ctx(project, tmp_path, resolution=resolution)
    project.rename(project.with_name("proj-held"))
    project.symlink_to(outside, target_is_directory=True)
    result = call_tool(ctx, "create_file", {"path": "f.txt", "content": "agent\n", "overwrite": True})
    assert result.is_error and snapshot(outside) == before


@pytest.mark.parametrize("resolution", RESOLUTIONS)
def test_in_project_links_still_work_beneath_the_root(project: Path, tmp_path: Path, resolution: Resolution) -> None:
    (project / "pkg").mkdir()
    (project / "pkg" / "real.txt").write_text("old\n")
    (project / "alias").symlink_to("pkg", target_is_directory=True)
    ctx = make_ctx(project, tmp_path, resolution=resolution, yolo=YoloLevel.YOLO)
    assert not call_tool(ctx, "search_replace_in_file", {"path": "alias/real.txt", "search": "old",
                                                        "replace": "new"}).is_error
    assert not call_tool(ctx, "create_file", {"path": "alias/made.txt", "content": "m"}).is_error
    assert "pkg/real.txt" in call_tool(ctx, "list_dir", {"path": "alias"}).content
    assert not call_tool(ctx, "rename_file", {"source": "alias/made.txt", "destination": "alias/moved.txt"}).is_error
    assert (project / "pkg" / "real.txt").read_text() == "new\n" and (project / "pkg" / "moved.txt").exists()
    assert (project / "alias").is_symlink()


@pytest.mark.parametrize("resolution", RESOLUTIONS)
def test_an_existing_hardlink_to_an_outside_file_is_replaced_by_file_tools_never_written_through(
    project: Path, outside: Path, tmp_path: Path, resolution: Resolution
) -> None:
    """What a hardlink already inside the project can do: file tools replace the name (a new inode) or remove
    it, the outside file keeps its content. A shell command appending to it does write through: neither these
    tools nor Landlock can tell a hardlink's other names (the README's security model lists it)."""
    secret = outside / "secret.txt"
    secret.write_text("outside secret old\n")
    try:
        os.link(secret, project / "hl.txt")
    except OSError as exc:
        pytest.skip(f"no hardlinks here: {exc}")
    ctx = make_ctx(project, tmp_path, resolution=resolution, yolo=YoloLevel.YOLO)
    assert not call_tool(ctx, "search_replace_in_file", {"path": "hl.txt", "search": "old", "replace": "new"}).is_error
    assert secret.read_text() == "outside secret old\n" and (project / "hl.txt").read_text() == "outside secret new\n"
    os.unlink(project / "hl.txt")
    os.link(secret, project / "hl.txt")
    assert not call_tool(ctx, "create_file", {"path": "hl.txt", "content": "agent\n", "overwrite": True}).is_error
    assert secret.read_text() == "outside secret old\n"
    os.unlink(project / "hl.txt")
    os.link(secret, project / "hl.txt")
    assert not call_tool(ctx, "delete_file", {"path": "hl.txt"}).is_error
    assert secret.read_text() == "outside secret old\n" and os.stat(secret).st_nlink == 1
    os.link(secret, project / "hl.txt")
    call_tool(ctx, "run_bash", {"command": "echo appended >> hl.txt"})
    assert secret.read_text() == "outside secret old\nappended\n"  # the stated limit


def test_the_walk_is_what_runs_where_openat2_is_missing(monkeypatch: pytest.MonkeyPatch, project: Path) -> None:
    """default_resolution() picks the walk when the system call answers ENOSYS (an old kernel, a seccomp filter)."""
    from yagent.workers.tools import beneath

    def missing(*_args: object) -> int:
        raise OSError(errno.ENOSYS, "no openat2")

    default_resolution.cache_clear()
    monkeypatch.setattr(beneath, "_openat2", missing)
    try:
        assert default_resolution() is Resolution.WALK
        assert FileAccess(project).resolution is Resolution.WALK
    finally:
        monkeypatch.undo()
        default_resolution.cache_clear()
