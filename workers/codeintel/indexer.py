"""Keeping one project's index: built in the background at start, brought up to date before each answer.

The first build runs in a thread of its own: it walks the project, reuses every stored record whose file is
unchanged (same size, mtime and inode; else same content digest), parses the rest, and stores them in batches —
a kill at any point leaves a consistent store the next start goes on from. While it runs `status()` says how far it
is ("N of M files"), so an answer never looks like "nothing found".

Afterwards each query first calls `ensure_fresh()`: at most every `FRESH_SECONDS` a walk compares the project with the
index (a stat per file), and files whose size, mtime or inode moved are read and hashed — only a changed digest is
parsed again; a renamed file keeps its facts by digest; a deleted one leaves. More than `INLINE_CHANGES` changed files
go to the background thread and answers say the index is updating. A file modified within `RACY_NS` of being looked
at is hashed again next time (an edit in the same mtime tick is never missed).

The search model is rebuilt by the background thread after each change; until it is, searches mask the changed
files out of the old model and score their new chunks directly (`ranking.py`). With an embeddings endpoint the
thread then embeds the chunks that have no vector yet.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .code_index import CodeIndex, IndexedFile
from .embeddings import BATCH, EmbeddingsClient, EmbeddingsError
from .extraction import extract, extract_text
from .facts import FileFacts
from .index_store import IndexStore, StoredFile
from .languages import language_of
from .project_files import FileStat, Unreadable, read_source, walk_project
from .ranking import ChunkRef, SearchModel

__all__ = ["FRESH_SECONDS", "INLINE_CHANGES", "IndexSettings", "ProjectIndexer", "Status"]

log = logging.getLogger(__name__)

FRESH_SECONDS = 1.0
INLINE_CHANGES = 200
RACY_NS = 2_000_000_000
SAVE_BATCH = 256
EMBED_RETRY_SECONDS = 300.0


@dataclass(frozen=True, slots=True)
class IndexSettings:
    max_file_bytes: int
    max_files: int
    exclude: tuple[str, ...] = ()


@dataclass(slots=True)
class Status:
    phase: str  # "building", "updating", "ready", "failed"
    done: int = 0
    total: int = 0
    seconds: float = 0.0
    problem: str = ""


@dataclass(slots=True)
class _Skipped:
    size: int
    mtime_ns: int
    inode: int
    reason: str


@dataclass(slots=True)
class _Work:
    files: list[FileStat]
    removed: list[str] = field(default_factory=list)


class ProjectIndexer:
    def __init__(self, root: Path, store: IndexStore, settings: IndexSettings, *,
                 embeddings: EmbeddingsClient | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.root = root
        self.store = store
        self.settings = settings
        self.embeddings = embeddings
        self._clock = clock
        self.lock = threading.RLock()  # around every read and change of the index, the model and the counts
        self.index = CodeIndex()
        self.status = Status("building")
        self.skipped: Counter[str] = Counter()
        self.skip_examples: dict[str, str] = {}
        self.store_problem = store.problem
        self.model: SearchModel | None = None
        self._changed: dict[str, int] = {}  # path → index version at its change (for masking the model)
        self.vectors: dict[bytes, bytes] = {}
        self.embed_problem = ""
        self._embed_failed_at = -1e18
        self._skips: dict[str, _Skipped] = {}
        self._racy: set[str] = set()
        self._refresh_lock = threading.Lock()
        self._checked_at = -1e18
        self._wake = threading.Event()
        self._pending: _Work | None = None
        self._stop = False
        self._root_fd = -1
        self._thread: threading.Thread | None = None
        self.built = threading.Event()

    # -- life ---------------------------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="codeintel-index", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop = True
        self._wake.set()

    def _run(self) -> None:
        began = self._clock()
        try:
            self._root_fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            self._build(began)
        except Exception as exc:  # the server keeps answering, saying the index failed and why
            log.exception("building the index of %s failed", self.root)
            with self.lock:
                self.status = Status("failed", problem=f"{type(exc).__name__}: {exc}")
            self.built.set()
            return
        self.built.set()
        while not self._stop:
            self._background_step()
            self._wake.wait(timeout=5.0)
            self._wake.clear()

    def _build(self, began: float) -> None:
        stored = self._load_stored()
        walk = walk_project(self.root, max_file_bytes=self.settings.max_file_bytes,
                            max_files=self.settings.max_files, exclude=self.settings.exclude)
        with self.lock:
            self.status = Status("building", 0, len(walk.files), 0.0)
            self.skipped, self.skip_examples = Counter(walk.skipped), dict(walk.examples)
        rows: list[tuple[str, int, int, int, bytes, FileFacts]] = []
        touched: list[tuple[str, int, int, int]] = []
        for done, stat in enumerate(walk.files, 1):
            if self._stop:
                return
            old = stored.get(stat.path)
            entry = None
            if old is not None and old.facts is not None and _same_stat(old, stat) and stat.path not in self._racy:
                entry = IndexedFile(stat.path, stat.size, stat.mtime_ns, stat.inode, old.digest, old.facts)
            else:
                entry, fresh = self._read(stat, old)
                if entry is not None and fresh:
                    rows.append((entry.path, entry.size, entry.mtime_ns, entry.inode, entry.digest, entry.facts))
                elif entry is not None:
                    touched.append((entry.path, entry.size, entry.mtime_ns, entry.inode))
            with self.lock:
                if entry is not None:
                    self.index.put(entry)
                self.status = Status("building", done, len(walk.files), self._clock() - began)
            if len(rows) >= SAVE_BATCH:
                self._save(rows, [], touched)
                rows, touched = [], []
        gone = [p for p in stored if p not in {f.path for f in walk.files}]
        self._save(rows, gone, touched)
        with self.lock:
            self.status = Status("ready", len(walk.files), len(walk.files), self._clock() - began)
            self._checked_at = self._clock()
        log.info("index of %s built: %d files in %.1fs (%s)", self.root, len(self.index.files),
                 self._clock() - began, ", ".join(f"{n} {r}" for r, n in self.skipped.items()) or "none skipped")
        self._rebuild_model()

    def _load_stored(self) -> dict[str, StoredFile]:
        try:
            return self.store.load()
        except sqlite3.DatabaseError as exc:
            self.store.reset(str(exc))
            self.store_problem = self.store.problem
            return {}

    def _save(self, rows: list[tuple[str, int, int, int, bytes, FileFacts]], removed: list[str],
              touched: list[tuple[str, int, int, int]]) -> None:
        if not rows and not removed and not touched:
            return
        try:
            self.store.save(rows, removed)
            if touched:
                self.store.touch(touched)
        except sqlite3.DatabaseError as exc:  # damaged under us (or a full disk): start the file over
            log.warning("saving the index of %s failed: %s", self.root, exc)
            try:
                self.store.reset(str(exc))
                with self.lock:
                    everything = [(e.path, e.size, e.mtime_ns, e.inode, e.digest, e.facts)
                                  for e in self.index.files.values()]
                self.store.save(everything)
            except sqlite3.Error as again:
                self.store_problem = (f"the index could not be saved ({again}); it is kept in memory until the code "
                                      "server stops")
                return
            self.store_problem = self.store.problem

    # -- reading one file ---------------------------------------------------------------------------------

    def _read(self, stat: FileStat, old: StoredFile | None) -> tuple[IndexedFile | None, bool]:
        """(the file's entry or None if skipped, whether its facts are new)."""
        try:
            data, info = read_source(self._root_fd, stat.path, self.settings.max_file_bytes)
        except Unreadable as why:
            self._note_skip(stat, why.reason)
            return None, False
        self._skips.pop(stat.path, None)
        now_ns = time.time_ns()
        if now_ns - info.st_mtime_ns < RACY_NS:
            self._racy.add(stat.path)
        else:
            self._racy.discard(stat.path)
        digest = hashlib.blake2b(data, digest_size=16).digest()
        if old is not None and old.facts is not None and old.digest == digest:
            return IndexedFile(stat.path, info.st_size, info.st_mtime_ns, info.st_ino, digest, old.facts), False
        return IndexedFile(stat.path, info.st_size, info.st_mtime_ns, info.st_ino, digest,
                           parse(data, stat.path)), True

    def _note_skip(self, stat: FileStat, reason: str) -> None:
        with self.lock:
            self.skipped[reason] += 1
            self.skip_examples.setdefault(reason, stat.path)
        self._skips[stat.path] = _Skipped(stat.size, stat.mtime_ns, stat.inode, reason)

    def facts_of(self, rel: str) -> tuple[FileFacts | None, str]:
        """A file's facts from the index, or parsed now (during the build, or for a file the index left out);
        (None, why) when it cannot be read."""
        with self.lock:
            entry = self.index.files.get(rel)
        if entry is not None:
            return entry.facts, ""
        if language_of(rel) is None:
            return None, "not a source file the code server parses"
        fd = self._root_fd if self._root_fd >= 0 else os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            data, _info = read_source(fd, rel, self.settings.max_file_bytes)
        except Unreadable as why:
            return None, why.reason if str(why) == why.reason else f"{why.reason}: {why}"
        finally:
            if fd != self._root_fd:
                os.close(fd)
        return parse(data, rel), ""

    def read_lines(self, rel: str) -> list[str]:
        """The file's current lines (for quoting a call site); [] when it cannot be read."""
        if self._root_fd < 0:
            return []
        try:
            data, _info = read_source(self._root_fd, rel, self.settings.max_file_bytes)
        except Unreadable:
            return []
        return data.decode("utf-8", "replace").splitlines()

    # -- keeping it fresh ---------------------------------------------------------------------------------

    def ensure_fresh(self) -> None:
        """Bring the index up to date with the project, unless that was done within `FRESH_SECONDS` or the first
        build is still running."""
        with self.lock:
            if self.status.phase != "ready" or self._clock() - self._checked_at < FRESH_SECONDS:
                return
        with self._refresh_lock:
            with self.lock:
                if self.status.phase != "ready" or self._clock() - self._checked_at < FRESH_SECONDS:
                    return
            self.refresh()

    def refresh(self) -> tuple[int, int]:
        """Compare the project with the index now; returns (files with new content or a new path, files removed)."""
        walk = walk_project(self.root, max_file_bytes=self.settings.max_file_bytes,
                            max_files=self.settings.max_files, exclude=self.settings.exclude)
        present = {f.path for f in walk.files}
        with self.lock:
            known = {p: (e.size, e.mtime_ns, e.inode) for p, e in self.index.files.items()}
            self._checked_at = self._clock()
        changed = []
        for stat in walk.files:
            seen = known.get(stat.path)
            skip = self._skips.get(stat.path)
            if seen == (stat.size, stat.mtime_ns, stat.inode) and stat.path not in self._racy:
                continue
            if skip is not None and (skip.size, skip.mtime_ns, skip.inode) == (stat.size, stat.mtime_ns, stat.inode):
                continue
            changed.append(stat)
        removed = [p for p in known if p not in present]
        for path in [p for p in self._skips if p not in present]:
            del self._skips[path]
        with self.lock:
            self.skipped = Counter(walk.skipped) + Counter(s.reason for s in self._skips.values())
            self.skip_examples = {**{s.reason: p for p, s in self._skips.items()}, **walk.examples}
        if not changed and not removed:
            return 0, 0
        if len(changed) > INLINE_CHANGES:
            with self.lock:
                self.status = Status("updating", 0, len(changed))
                self._pending = _Work(changed, removed)
            self._wake.set()
            return len(changed), len(removed)
        return self._apply(_Work(changed, removed)), len(removed)

    def _apply(self, work: _Work) -> int:
        """Read the files of `work` and put them in the index; returns how many had new content (or a new path)."""
        with self.lock:
            old_entries = {p: self.index.files.get(p) for p in [*work.removed, *(s.path for s in work.files)]}
        by_digest = {e.digest: e for p, e in old_entries.items() if e is not None and p in work.removed}
        rows: list[tuple[str, int, int, int, bytes, FileFacts]] = []
        touched: list[tuple[str, int, int, int]] = []
        entries: list[IndexedFile | None] = []
        for done, stat in enumerate(work.files, 1):
            old = old_entries.get(stat.path)
            stored = StoredFile(old.size, old.mtime_ns, old.inode, old.digest, old.facts) if old else None
            entry, fresh = self._read_reusing(stat, stored, by_digest)
            entries.append(entry)
            if entry is not None and fresh:
                rows.append((entry.path, entry.size, entry.mtime_ns, entry.inode, entry.digest, entry.facts))
            elif entry is not None:
                touched.append((entry.path, entry.size, entry.mtime_ns, entry.inode))
            if self.status.phase == "updating":
                with self.lock:
                    self.status.done = done
        with self.lock:
            for stat, entry in zip(work.files, entries, strict=True):
                if entry is not None:
                    self.index.put(entry)
                else:
                    self.index.remove(stat.path)
                self._changed[stat.path] = self.index.version
            for path in work.removed:
                self.index.remove(path)
                self._changed[path] = self.index.version
            if self.status.phase == "updating":
                self.status = Status("ready", len(self.index.files), len(self.index.files))
        self._save(rows, work.removed, touched)
        self._wake.set()  # the search model follows in the background
        return len(rows)

    def _read_reusing(self, stat: FileStat, old: StoredFile | None, by_digest: dict[bytes, IndexedFile]
                      ) -> tuple[IndexedFile | None, bool]:
        try:
            data, info = read_source(self._root_fd, stat.path, self.settings.max_file_bytes)
        except Unreadable as why:
            self._note_skip(stat, why.reason)
            return None, False
        self._skips.pop(stat.path, None)
        if time.time_ns() - info.st_mtime_ns < RACY_NS:
            self._racy.add(stat.path)
        else:
            self._racy.discard(stat.path)
        digest = hashlib.blake2b(data, digest_size=16).digest()
        if old is not None and old.facts is not None and old.digest == digest:
            return IndexedFile(stat.path, info.st_size, info.st_mtime_ns, info.st_ino, digest, old.facts), False
        moved = by_digest.get(digest)
        if moved is not None and language_of(moved.path) == language_of(stat.path) and moved.facts.lang != "rust" \
                and moved.path.rpartition("/")[0] == stat.path.rpartition("/")[0]:
            facts = moved.facts  # renamed within its directory: what its imports resolve to stays the same
        else:
            facts = parse(data, stat.path)
        return IndexedFile(stat.path, info.st_size, info.st_mtime_ns, info.st_ino, digest, facts), True

    # -- the background thread ----------------------------------------------------------------------------

    def _background_step(self) -> None:
        with self.lock:
            pending, self._pending = self._pending, None
        if pending is not None:
            self._apply(pending)
        with self.lock:
            stale = self.model is None or self.model.version < self.index.version
        if stale:
            self._rebuild_model()
        if self.embeddings is not None and self._clock() - self._embed_failed_at > EMBED_RETRY_SECONDS:
            self._embed_missing()

    def _rebuild_model(self) -> None:
        with self.lock:
            version = self.index.version
            chunks = [(ChunkRef(path, i), chunk.tokens) for path, entry in self.index.files.items()
                      for i, chunk in enumerate(entry.facts.chunks)]
        model = SearchModel(chunks, version)  # outside the lock: queries go on meanwhile
        with self.lock:
            self.model = model
            self._changed = {p: v for p, v in self._changed.items() if v > version}

    def stale_paths(self) -> set[str]:
        """Files changed after the search model's snapshot (call with the lock held)."""
        version = self.model.version if self.model is not None else -1
        return {p for p, v in self._changed.items() if v > version}

    def _embed_missing(self) -> None:
        client = self.embeddings
        assert client is not None
        if not self.vectors:
            with contextlib.suppress(sqlite3.Error):
                self.vectors = self.store.vectors(client.model)
        with self.lock:
            wanted = [(path, chunk) for path, entry in self.index.files.items() for chunk in entry.facts.chunks
                      if chunk.digest not in self.vectors]
        batch: list[tuple[bytes, str]] = []
        lines_of: dict[str, list[str]] = {}
        for path, chunk in wanted:
            if self._stop or self._pending is not None:
                return
            lines = lines_of.setdefault(path, self.read_lines(path))
            if len(lines_of) > 64:
                lines_of.clear()
            text = f"{chunk.title}\n" + "\n".join(lines[chunk.line - 1:chunk.end_line][:60])
            batch.append((chunk.digest, text))
            if len(batch) >= BATCH:
                if not self._embed_batch(client, batch):
                    return
                batch = []
        if batch:
            self._embed_batch(client, batch)

    def _embed_batch(self, client: EmbeddingsClient, batch: list[tuple[bytes, str]]) -> bool:
        try:
            vectors = client.embed([text for _digest, text in batch])
        except EmbeddingsError as exc:
            self.embed_problem = str(exc)
            self._embed_failed_at = self._clock()
            log.warning("embeddings for %s: %s", self.root, exc)
            return False
        self.embed_problem = ""
        items = [(digest, vector) for (digest, _text), vector in zip(batch, vectors, strict=True)]
        with self.lock:
            self.vectors.update(items)
        with contextlib.suppress(sqlite3.Error):
            self.store.save_vectors(client.model, items)
        return True

    def embedded_count(self) -> tuple[int, int]:
        """(chunks with a vector, chunks) — call with the lock held."""
        total = have = 0
        for entry in self.index.files.values():
            for chunk in entry.facts.chunks:
                total += 1
                have += chunk.digest in self.vectors
        return have, total


def parse(data: bytes, rel: str) -> FileFacts:
    """A file's facts from its bytes; a failure of the extraction is the file's problem, never the server's."""
    spec = language_of(rel)
    try:
        return extract(data, spec, rel) if spec is not None else extract_text(data, rel)
    except (RecursionError, MemoryError, ValueError, UnicodeError) as exc:
        lines = data.count(b"\n") + 1
        return FileFacts(spec.name if spec else "text", lines, f"not parsed: {type(exc).__name__}: {str(exc)[:200]}")


def _same_stat(old: StoredFile, stat: FileStat) -> bool:
    return (old.size, old.mtime_ns, old.inode) == (stat.size, stat.mtime_ns, stat.inode)

