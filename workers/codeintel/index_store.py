"""The index on disk: one SQLite file under `$YAGENT_HOME/data/codeintel/{project}`, written only by the code server.

A row per indexed file holds what its walk saw (size, mtime, inode), its content digest and its facts (msgpack,
zlib-compressed); embeddings are kept by the digest of the text they were made for. Every write is a transaction
(WAL), so a kill at any moment leaves the rows of the files done so far and nothing half-written; the next start
reads them and goes on from there.

The file is trusted only after checks: it must be a regular file, SQLite's `quick_check` must pass, and its
application id and version must be ours. Anything else — junk bytes, a foreign database, a torn page, an older
format — and the file is set aside as `index.db.damaged` (one kept) and the index is built anew; a row whose record
does not decode is parsed again from the source. Files are 0600 in a 0700 directory.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
import threading
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import msgpack

from .facts import FileFacts, pack, unpack

__all__ = ["APPLICATION_ID", "DB_NAME", "IndexStore", "StoredFile"]

DB_NAME = "index.db"
APPLICATION_ID = 0x79636931  # "yci1"
SCHEMA_VERSION = 1
_MAX_RECORD = 64 * 1024 * 1024  # a record larger than this once decompressed is damage, not facts

_SCHEMA = """
CREATE TABLE IF NOT EXISTS files(path TEXT PRIMARY KEY, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
                                 inode INTEGER NOT NULL, digest BLOB NOT NULL, record BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS vectors(digest BLOB NOT NULL, model TEXT NOT NULL, vector BLOB NOT NULL,
                                   PRIMARY KEY(digest, model));
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


@dataclass(slots=True)
class StoredFile:
    size: int
    mtime_ns: int
    inode: int
    digest: bytes
    facts: FileFacts | None  # None: its record did not decode (it is parsed again)


class IndexStore:
    """The index file of one project; `problem` says what was found wrong with it at open ("" if nothing)."""

    def __init__(self, directory: Path, root: str) -> None:
        self.directory = directory
        self.path = directory / DB_NAME
        self.root = root
        self.problem = ""
        self._lock = threading.RLock()  # one connection, used by the index's thread and by queries' refreshes
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._db = self._open()

    def _open(self) -> sqlite3.Connection:
        why = self._untrusted()
        if why:
            self.problem = f"the index file was not trusted ({why}); it was set aside as {DB_NAME}.damaged and " \
                           "the index is built anew"
            self._set_aside()
        try:
            return self._connect()
        except sqlite3.DatabaseError as exc:  # set aside above, or damaged between the check and now
            self.problem = f"the index file could not be opened ({exc}); the index is built anew"
            self._set_aside()
            return self._connect()

    def _connect(self) -> sqlite3.Connection:
        if not self.path.exists():
            os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("PRAGMA temp_store=MEMORY")  # no temporary files outside the index directory
        if db.execute("PRAGMA application_id").fetchone()[0] == 0:
            db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        db.executescript(_SCHEMA)
        db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('root', ?)", (self.root,))
        return db

    def _untrusted(self) -> str:
        """Why the existing file cannot be used ("" when it can, or when there is none)."""
        try:
            info = os.lstat(self.path)
        except FileNotFoundError:
            return ""
        if not stat.S_ISREG(info.st_mode):
            return "it is not a regular file"
        if info.st_size == 0:
            return ""
        try:
            db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)
        except sqlite3.Error as exc:
            return str(exc)
        try:
            app, version = (db.execute(f"PRAGMA {p}").fetchone()[0] for p in ("application_id", "user_version"))
            if app != APPLICATION_ID:
                return "it is not a yagent code index"
            if version != SCHEMA_VERSION:
                return f"it has format {version}, this yagent reads {SCHEMA_VERSION}"
            check = db.execute("PRAGMA quick_check").fetchall()
            if check != [("ok",)]:
                return f"SQLite's check found damage: {str(check[0][0])[:200]}"
        except sqlite3.Error as exc:
            return str(exc)
        finally:
            db.close()
        return ""

    def _set_aside(self) -> None:
        for suffix in ("-wal", "-shm", "-journal"):
            with contextlib.suppress(OSError):
                os.unlink(f"{self.path}{suffix}")
        with contextlib.suppress(OSError):
            os.replace(self.path, self.path.with_name(f"{DB_NAME}.damaged"))

    def reset(self, why: str) -> None:
        """Throw the file away and start empty (it failed while in use)."""
        with self._lock:
            with contextlib.suppress(sqlite3.Error):
                self._db.close()
            self.problem = f"the index file failed while in use ({why}); it was set aside and the index is built anew"
            self._set_aside()
            self._db = self._connect()

    def close(self) -> None:
        with self._lock, contextlib.suppress(sqlite3.Error):
            self._db.close()

    # -- files ------------------------------------------------------------------------------------------

    def load(self) -> dict[str, StoredFile]:
        found: dict[str, StoredFile] = {}
        with self._lock:
            rows = self._db.execute("SELECT path, size, mtime_ns, inode, digest, record FROM files").fetchall()
        for path, size, mtime_ns, inode, digest, record in rows:
            if not isinstance(path, str) or not isinstance(digest, bytes):
                continue
            found[path] = StoredFile(int(size), int(mtime_ns), int(inode), digest, _decode(record))
        return found

    def save(self, rows: Iterable[tuple[str, int, int, int, bytes, FileFacts]], removed: Iterable[str] = ()) -> None:
        """Store `rows` (path, size, mtime_ns, inode, digest, facts) and drop `removed`, in one transaction."""
        encoded = [(p, s, m, i, d, _encode(f)) for p, s, m, i, d, f in rows]
        with self._transaction():
            self._db.executemany("INSERT OR REPLACE INTO files(path, size, mtime_ns, inode, digest, record) "
                                 "VALUES (?, ?, ?, ?, ?, ?)", encoded)
            self._db.executemany("DELETE FROM files WHERE path = ?", ((p,) for p in removed))

    def touch(self, rows: Iterable[tuple[str, int, int, int]]) -> None:
        """A file whose content is unchanged got a new size/mtime/inode record (touched, copied back)."""
        with self._transaction():
            self._db.executemany("UPDATE files SET size = ?, mtime_ns = ?, inode = ? WHERE path = ?",
                                 ((s, m, i, p) for p, s, m, i in rows))

    # -- embeddings -------------------------------------------------------------------------------------

    def vectors(self, model: str) -> dict[bytes, bytes]:
        with self._lock:
            rows = self._db.execute("SELECT digest, vector FROM vectors WHERE model = ?", (model,)).fetchall()
        return {d: v for d, v in rows if isinstance(d, bytes) and isinstance(v, bytes)}

    def save_vectors(self, model: str, items: Iterable[tuple[bytes, bytes]]) -> None:
        with self._transaction():
            self._db.executemany("INSERT OR REPLACE INTO vectors(digest, model, vector) VALUES (?, ?, ?)",
                                 ((d, model, v) for d, v in items))

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")


def _encode(facts: FileFacts) -> bytes:
    return zlib.compress(msgpack.packb(pack(facts), use_bin_type=True), 1)


def _decode(record: object) -> FileFacts | None:
    if not isinstance(record, bytes):
        return None
    try:
        inflater = zlib.decompressobj()
        raw = inflater.decompress(record, _MAX_RECORD)
        if inflater.unconsumed_tail:
            return None
        return unpack(msgpack.unpackb(raw, raw=False, strict_map_key=True, max_bin_len=_MAX_RECORD,
                                      max_str_len=_MAX_RECORD, max_array_len=_MAX_RECORD))
    except (zlib.error, ValueError, TypeError, msgpack.UnpackException, msgpack.ExtraData):
        return None
