"""The fiction pipeline's facts on disk: read once before every decision (`load_state`), and what the engine
writes after a step (`commit`). Every file is one people can read and edit; a file that is there but cannot be
read, or holds a value the router does not know, is a `FactError` naming the file and the fix — a reader never
"repairs" it, and never guesses.

The workflow's directory (`ipc.workflows.workflow_dir`):

    progress.toml          phase, flow, completed chapters, review_every   (the engine writes it)
    planning.toml          tier = "long" | "short"                         (the planner writes it)
    foundation/            premise.md characters.md world.md, and outline.md (short) or arcs.toml (long)
    complete.md            the book is complete, and why                   (an architect writes it)
    reviews/               arc-V-A.md, global-NNNN.md                      (the editor)
    summaries/             arc-V-A.md, volume-V.md                         (the editor)
    rewrites.toml          [[rewrite]] chapter, reason: the rewrite queue  (the editor adds, the engine removes)
    holds.toml             [[hold]] after_chapter: one-shot stops          (the user adds, the engine removes)
    steering.md            what the user said when asked                   (the engine appends)

The book itself is `chapters/NNNN.md` in the project.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from yagent.ipc.atomic_file import write_atomic
from yagent.ipc.messages import RunOutcome

from .definition import FactError, Instruction, described
from .fiction_router import (
    PLANNER,
    WRITER,
    AdvanceHold,
    ArcBoundary,
    Flow,
    Phase,
    Situation,
    State,
    Tier,
)

__all__ = ["BOOK_DIR", "FOUNDATION", "Progress", "chapter_path", "commit", "load_holds", "load_state",
           "prepare", "progress_line", "record_answer", "take_hold"]

FOUNDATION = ("premise.md", "characters.md", "world.md")  # and the plan: outline.md (short) or arcs.toml (long)
BOOK_DIR = "chapters"
MAX_FACT_BYTES = 4 * 1024 * 1024  # a fact file past this is refused, not read
MAX_CHAPTERS = 100_000
_OUTLINE_ITEM = re.compile(r"^\s*(\d+)[.)]\s+\S", re.MULTILINE)
_FILE_MODE = 0o644  # facts are the user's files: readable like the rest of the project


@dataclass
class Progress:
    """`progress.toml`, as the engine keeps it."""

    phase: Phase = Phase.PLANNING
    flow: Flow = Flow.WRITING
    completed: tuple[int, ...] = ()
    review_every: int = 0  # flat books: a global review after every this many chapters (0: never)

    def render(self) -> str:
        done = ", ".join(str(n) for n in self.completed)
        return ("# The fiction workflow's progress: written by yagent's engine after every step. You may edit flow\n"
                "# (writing, reviewing, steering) and review_every; the engine asks you when it cannot go on.\n"
                f'phase = "{self.phase.value}"\nflow = "{self.flow.value}"\nreview_every = {self.review_every}\n'
                f"completed = [{done}]\n")


def chapter_path(project_root: Path, chapter: int) -> Path:
    return project_root / BOOK_DIR / f"{chapter:04d}.md"


def prepare(directory: Path) -> None:
    """A new workflow's directory: its progress file and a README saying what goes where."""
    directory.mkdir(parents=True, exist_ok=True)
    for sub in ("foundation", "reviews", "summaries"):
        (directory / sub).mkdir(exist_ok=True)
    if not (directory / "progress.toml").exists():
        write_atomic(directory / "progress.toml", Progress().render().encode(), mode=_FILE_MODE)
    readme = directory / "README.md"
    if not readme.exists():
        write_atomic(readme, (__doc__ or "").encode(), mode=_FILE_MODE)


# -- reading --------------------------------------------------------------------------------------------------


def _text(path: Path) -> str | None:
    """A fact file's text; None when it does not exist. Damage is an error, never an empty fact."""
    try:
        if path.is_symlink() or (path.exists() and not path.is_file()):
            raise FactError(f"{path} is not a regular file; replace it with one")
        with path.open("rb") as fh:
            data = fh.read(MAX_FACT_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise FactError(f"{path} cannot be read ({exc.strerror}); check its permissions") from None
    if len(data) > MAX_FACT_BYTES:
        raise FactError(f"{path} is over {MAX_FACT_BYTES // 2**20} MiB; a fact file is short — cut it down")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FactError(f"{path} is not UTF-8 text (byte {exc.start}); it is damaged — restore or rewrite it") from None


def _toml(path: Path) -> dict[str, Any] | None:
    text = _text(path)
    if text is None:
        return None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise FactError(f"{path} is not valid TOML ({exc}); fix it, or remove it to start that fact over") from None


def _choice(path: Path, data: dict[str, Any], key: str, kind: type, default: Any) -> Any:
    if key not in data:
        return default
    try:
        return kind(data[key])
    except ValueError:
        known = ", ".join(repr(m.value) for m in kind)
        raise FactError(f"{path}: {key} = {described(data[key])} is not one of {known}") from None


def _whole(path: Path, value: Any, what: str, *, least: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= MAX_CHAPTERS:
        raise FactError(f"{path}: {what} must be a whole number from {least} to {MAX_CHAPTERS} "
                        f"(found {described(value)})")
    return value


def _unknown_keys(path: Path, data: dict[str, Any], known: set[str]) -> None:
    unknown = sorted(set(data) - known)
    if unknown:
        raise FactError(f"{path}: unknown {', '.join(unknown)}; known: {', '.join(sorted(known))}")


def load_progress(directory: Path) -> Progress:
    path = directory / "progress.toml"
    data = _toml(path)
    if data is None:
        raise FactError(f"{path} is missing: it says which chapters are written; run the workflow from the start "
                        "(`yagent workflow run`) or restore it")
    _unknown_keys(path, data, {"phase", "flow", "completed", "review_every"})
    completed = data.get("completed", [])
    if not isinstance(completed, list):
        raise FactError(f"{path}: completed must be a list of chapter numbers (found {described(completed)})")
    chapters = tuple(sorted({_whole(path, n, "every completed chapter") for n in completed}))
    if chapters != tuple(range(1, len(chapters) + 1)):
        gap = next(n for n in range(1, len(chapters) + 2) if n not in chapters)
        raise FactError(f"{path}: completed chapters must run from 1 without a gap, but {gap} is missing")
    return Progress(phase=_choice(path, data, "phase", Phase, Phase.PLANNING),
                    flow=_choice(path, data, "flow", Flow, Flow.WRITING), completed=chapters,
                    review_every=_whole(path, data.get("review_every", 0), "review_every", least=0))


def _tier(directory: Path) -> Tier:
    path = directory / "planning.toml"
    data = _toml(path)
    if data is None:
        return Tier.UNDECIDED
    _unknown_keys(path, data, {"tier"})
    tier = _choice(path, data, "tier", Tier, Tier.UNDECIDED)
    if tier is Tier.UNDECIDED:
        raise FactError(f'{path} names no tier; write tier = "long" or tier = "short"')
    return tier


@dataclass(frozen=True)
class _Arc:
    volume: int
    arc: int
    first: int
    last: int
    skeleton: bool


def _arcs(path: Path) -> list[_Arc] | None:
    data = _toml(path)
    if data is None:
        return None
    volumes = data.get("volume")
    if not isinstance(volumes, list) or not volumes:
        raise FactError(f"{path} plans no [[volume]]; each volume lists its [[volume.arc]] tables")
    arcs: list[_Arc] = []
    for v in volumes:
        if not isinstance(v, dict):
            raise FactError(f"{path}: a [[volume]] must be a table")
        number = _whole(path, v.get("number"), "a volume's number")
        for a in v.get("arc") or []:
            if not isinstance(a, dict):
                raise FactError(f"{path}: an arc of volume {number} must be a table")
            skeleton = a.get("skeleton", False)
            if not isinstance(skeleton, bool):
                raise FactError(f"{path}: skeleton must be true or false (volume {number})")
            arc = _whole(path, a.get("number"), f"an arc's number in volume {number}")
            first = _whole(path, a.get("first"), f"first chapter of arc {arc}, volume {number}")
            last = _whole(path, a.get("last"), f"last chapter of arc {arc}, volume {number}")
            if last < first:
                raise FactError(f"{path}: arc {arc} of volume {number} ends (chapter {last}) before it begins "
                                f"({first})")
            arcs.append(_Arc(number, arc, first, last, skeleton))
    expected = 1
    for arc in arcs:  # in the file's order: the chapters run on without a gap or an overlap
        if arc.first != expected:
            raise FactError(f"{path}: arc {arc.arc} of volume {arc.volume} begins at chapter {arc.first}, but chapter "
                            f"{expected} comes next; arcs must cover the chapters in order")
        expected = arc.last + 1
    return arcs


def _outline_chapters(path: Path) -> int | None:
    text = _text(path)
    if text is None:
        return None
    numbers = [int(n) for n in _OUTLINE_ITEM.findall(text)]
    if not numbers:
        raise FactError(f"{path} lists no chapters; write one numbered line per chapter (1. …, 2. …)")
    return max(numbers)


def load_state(directory: Path) -> State:
    """Every fact the router reads, from the workflow's directory, read once; `FactError` for any it cannot."""
    progress = load_progress(directory)
    tier = _tier(directory)
    foundation = directory / "foundation"
    missing = [name for name in FOUNDATION if _text(foundation / name) is None]
    arcs = _arcs(foundation / "arcs.toml") if tier is Tier.LONG else None
    outline = _outline_chapters(foundation / "outline.md") if tier is not Tier.LONG else None
    if tier is Tier.LONG and arcs is None:
        missing.append("arcs.toml")
    if tier is not Tier.LONG and outline is None:
        missing.append("outline.md")
    phase = Phase.COMPLETE if _text(directory / "complete.md") is not None else progress.phase
    last = progress.completed[-1] if progress.completed else 0
    state = dict(phase=phase, flow=progress.flow, tier=tier, foundation_missing=tuple(missing),
                 pending_rewrites=_rewrites(directory, last), last_completed=last)
    if arcs:
        state.update(_layered_facts(directory, arcs, last))
    elif outline is not None:
        due = progress.review_every > 0 and last > 0 and last % progress.review_every == 0
        state.update(review_due=due, outline_chapters=outline,
                     has_global_review=due and _text(directory / "reviews" / f"global-{last:04d}.md") is not None)
    return State(**state)


def _layered_facts(directory: Path, arcs: list[_Arc], last: int) -> dict[str, Any]:
    facts: dict[str, Any] = {}
    ending = next((a for a in arcs if a.last == last), None) if last else None
    if ending is not None:
        volume_end = ending is [a for a in arcs if a.volume == ending.volume][-1]
        facts["boundary"] = ArcBoundary(ending.volume, ending.arc, volume_end)
        name = f"arc-{ending.volume}-{ending.arc}.md"
        facts["has_arc_review"] = _text(directory / "reviews" / name) is not None
        facts["has_arc_summary"] = _text(directory / "summaries" / name) is not None
        facts["has_volume_summary"] = _text(directory / "summaries" / f"volume-{ending.volume}.md") is not None
    following = next((a for a in arcs if a.first <= last + 1 <= a.last), None)
    if following is not None and following.skeleton:
        facts["next_arc_skeleton"] = (following.volume, following.arc)
    facts["last_volume_done"] = following is None
    return facts


def _rewrites(directory: Path, last: int) -> tuple[int, ...]:
    path = directory / "rewrites.toml"
    data = _toml(path)
    if data is None:
        return ()
    _unknown_keys(path, data, {"rewrite"})
    queue = []
    for item in data.get("rewrite", []):
        if not isinstance(item, dict):
            raise FactError(f"{path}: each [[rewrite]] must be a table with a chapter and a reason")
        chapter = _whole(path, item.get("chapter"), "a rewrite's chapter")
        if chapter > last:
            raise FactError(f"{path}: chapter {chapter} is queued for a rewrite but only {last} are written")
        queue.append(chapter)
    return tuple(queue)


def load_holds(directory: Path) -> list[AdvanceHold]:
    path = directory / "holds.toml"
    data = _toml(path)
    if data is None:
        return []
    _unknown_keys(path, data, {"hold"})
    holds = []
    for item in data.get("hold", []):
        if not isinstance(item, dict):
            raise FactError(f"{path}: each [[hold]] must be a table")
        _unknown_keys(path, item, {"after_chapter"})
        if "after_chapter" not in item:
            raise FactError(f"{path}: a [[hold]] says when: after_chapter = N")
        holds.append(AdvanceHold(_whole(path, item["after_chapter"], "after_chapter")))
    return holds


def take_hold(directory: Path, hold: AdvanceHold) -> None:
    """A hold is one-shot: it leaves the file once it has been met (or passed)."""
    left = [h for h in load_holds(directory) if h != hold]
    text = "".join(f"[[hold]]\nafter_chapter = {h.after_chapter}\n\n" for h in left)
    write_atomic(directory / "holds.toml", text.encode(), mode=_FILE_MODE)


# -- writing after a step --------------------------------------------------------------------------------------


def commit(directory: Path, instruction: Instruction, outcome: RunOutcome) -> None:
    """Record what a finished step made; `FactError` when it did not make what it was asked for (the engine stops
    rather than route the same step again)."""
    project = directory.parents[2]  # the directory is <project>/.yagent/workflows/<name>
    if instruction.agent == PLANNER:
        if _tier(directory) is Tier.UNDECIDED:
            raise FactError(f"the planner did not decide the book's tier: {directory / 'planning.toml'} is missing")
        return
    if instruction.agent != WRITER:
        return  # architects and the editor write facts the next load reads (and the router checks)
    chapter = instruction.chapter
    path = chapter_path(project, chapter)
    if not (_text(path) or "").strip():
        raise FactError(f"the writer did not write chapter {chapter}: {path} is missing or empty")
    progress = load_progress(directory)
    if chapter > (progress.completed[-1] if progress.completed else 0):
        progress.completed = (*progress.completed, chapter)
        progress.phase = Phase.WRITING
        write_atomic(directory / "progress.toml", progress.render().encode(), mode=_FILE_MODE)
        return
    _dequeue_rewrite(directory, chapter)


def _dequeue_rewrite(directory: Path, chapter: int) -> None:
    path = directory / "rewrites.toml"
    data = _toml(path) or {}
    items = [i for i in data.get("rewrite", []) if isinstance(i, dict)]
    index = next((k for k, i in enumerate(items) if i.get("chapter") == chapter), None)
    if index is not None:
        items.pop(index)
    text = "".join(f"[[rewrite]]\nchapter = {i['chapter']}\nreason = {_quoted(str(i.get('reason', '')))}\n\n"
                   for i in items)
    write_atomic(path, text.encode(), mode=_FILE_MODE)


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def record_answer(directory: Path, situation: str, answer: str) -> None:
    """The user answered in a situation that asks them: their words are kept for the nodes, and the flow goes
    back to writing unless they asked to stop."""
    steering = directory / "steering.md"
    before = _text(steering) or ""
    write_atomic(steering, f"{before}\n## {situation}\n{answer.strip()}\n".encode(), mode=_FILE_MODE)
    if situation in (Situation.REVIEWING, Situation.STEERING):
        progress = load_progress(directory)
        progress.flow = Flow.WRITING
        write_atomic(directory / "progress.toml", progress.render().encode(), mode=_FILE_MODE)


def progress_line(state: State) -> str:
    plan = (f"{state.outline_chapters} outlined" if not state.layered and state.outline_chapters
            else state.tier.value or "tier undecided")
    return f"{state.phase.value}, {state.last_completed} chapters written ({plan}), flow {state.flow.value}"

