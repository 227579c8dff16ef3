"""The five checks a Repo agent's `blueprint[]` entries pass before they are folded in, each rejection with a reason a
person (and the next model call) can read.

1. `shape` — a section (`repo` or `module`), a field of that section (`document.FIELDS`), a claim of one to
   `MAX_CLAIM` characters, a `where`, at most `MAX_ENTRIES` per run (the rest are `over-limit`);
2. `unknown-module` — a module entry names a module of the derived layer (a directory with source files now);
3. `path-not-in-module` — the paths its prose mentions point into its module: each path-like word is first asked
   what it is (the project path it names exactly, by a unique suffix such as `toolspec/schemas.json`, or as a unique
   bare file name), and the entry is refused only when the words that do name a project path all name another
   module's; a word that names nothing, or several things (`Cold/Hot`, `Name/Brief/Effect`, a file name found
   twice), abstains — existence is the anchor's job, and one refusal costs the whole claim;
4. `outside-evidence-set` — the run read a file of the module (a tool's path argument naming a file, or a path its
   result shows — never a directory listing's names), so no claim is made from names alone;
5. `anchor` — `where` holds: `path` exists, `path:line` is within the file, `path:symbol` occurs in it as a word (a
   path out of the project is refused); a `where` in no such form is kept as `unverifiable`, never claimed verified.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from yagent.workers.codeintel.project_files import Unreadable, read_source

from .derivation import REPO, Derived, module_of
from .document import FIELDS, SECTIONS

__all__ = ["MAX_CLAIM", "MAX_ENTRIES", "Checked", "Rejection", "Submission", "check_submissions", "prose_paths"]

MAX_ENTRIES = 8
MAX_CLAIM = 600
MAX_WHERE = 300
_PATH_WORD = re.compile(r"[\w.@+-]+(?:/[\w.@+-]+)+/?|[\w@+-]+\.[A-Za-z][\w]{0,7}\b")
_LINE = re.compile(r"^(?P<path>[^\s:]+):(?P<line>\d+)(?:-(?P<end>\d+))?$")
_SYMBOL = re.compile(r"^(?P<path>[^\s:]+):(?P<symbol>[A-Za-z_][\w.]*)(?:\(\))?$")
_BARE_PATH = re.compile(r"^[\w.@+-]+(?:/[\w.@+-]+)*/?$")
_MAX_ANCHOR_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Submission:
    section: str
    module: str
    field: str
    claim: str
    where: str
    supersedes: str = ""
    anchor: str = ""  # set by the anchor check: path | line | symbol | unverifiable


@dataclass(frozen=True, slots=True)
class Rejection:
    index: int  # the entry's place in what was submitted, from 1
    code: str  # shape | over-limit | unknown-module | path-not-in-module | outside-evidence-set | anchor
    detail: str


@dataclass
class Checked:
    accepted: list[Submission]
    rejected: list[Rejection]
    submitted: int

    def account(self) -> str:
        """The rejections a line each, grouped by check."""
        if not self.rejected:
            return ""
        counts = Counter(r.code for r in self.rejected)
        first = {}
        for r in self.rejected:
            first.setdefault(r.code, f"#{r.index}: {r.detail}")
        return "; ".join(f"{code} ×{n} ({first[code]})" for code, n in counts.items())


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def _shape(index: int, raw: Any) -> Submission | Rejection:
    if not isinstance(raw, dict):
        return Rejection(index, "shape", "an entry must be an object {section, module, field, claim, where}")
    section = _text(raw.get("section")) or ("module" if _text(raw.get("module")) else "")
    if section not in SECTIONS:
        return Rejection(index, "shape", f"section must be one of {', '.join(SECTIONS)} (got {section!r})")
    field_name = _text(raw.get("field"))
    if field_name not in FIELDS[section]:
        return Rejection(index, "shape", f"a {section} entry's field is one of {', '.join(FIELDS[section])} "
                                         f"(got {field_name!r})")
    claim = " ".join(_text(raw.get("claim")).split())
    if not claim or len(claim) > MAX_CLAIM:
        return Rejection(index, "shape", f"claim must be 1 to {MAX_CLAIM} characters (got {len(claim)})")
    where = _text(raw.get("where"))
    if not where or len(where) > MAX_WHERE or "\n" in where:
        return Rejection(index, "shape", f"where must be one line of 1 to {MAX_WHERE} characters: path, path:line or "
                                         "path:symbol")
    module = REPO if section == "repo" else _text(raw.get("module")).strip("/").removeprefix("./") or REPO
    supersedes = _text(raw.get("supersedes"))
    return Submission(section, module, field_name, claim, where, supersedes[:20])


def prose_paths(claim: str, derived: Derived) -> list[str]:
    """The project paths the prose's path-like words name (each word that names exactly one)."""
    found = []
    for word in _PATH_WORD.findall(claim):
        word = word.strip(".,;:)(`'\"").removeprefix("./")
        hit = _resolve(word.rstrip("/"), derived)
        if hit:
            found.append(hit)
    return found


def _resolve(word: str, derived: Derived) -> str:
    if not word:
        return ""
    if word in derived.files or word in derived.modules:
        return word
    suffix = "/" + word
    hits = {f for f in derived.files if f.endswith(suffix)} | {m for m in derived.modules if m.endswith(suffix)}
    if "/" not in word:
        hits |= {f for f in derived.files if posixpath.basename(f) == word}
    return next(iter(hits)) if len(hits) == 1 else ""  # none, or ambiguous: abstain


def _belongs(path: str, module: str, derived: Derived) -> bool:
    if path == module or path.startswith(module.rstrip("/") + "/"):
        return True
    return module_of(path, derived.modules) == module or (path in derived.modules and path == module)


def _anchor(where: str, root: Path, derived: Derived) -> tuple[str, str]:
    """(how `where` was verified, why it is broken): ("", reason) refuses the entry."""
    plain = where.removeprefix("./").rstrip("/")
    if plain in derived.files or plain in derived.modules:
        return "path", ""
    head = where.split(":", 1)[0]
    if head.startswith(("/", "~")) or ".." in head.split("/"):
        return "", f"{where} points outside the project: an anchor is a path in it"
    for pattern, kind in ((_LINE, "line"), (_SYMBOL, "symbol")):
        match = pattern.match(where)
        if match and _BARE_PATH.match(match.group("path")):
            path = match.group("path").removeprefix("./")
            if path not in derived.files and not _exists(root, path):
                return "", f"{where}: {path} is not a file of the project"
            text = _read(root, path)
            if text is None:
                return "", f"{where}: {path} cannot be read"
            if kind == "line":
                lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
                last = int(match.group("end") or match.group("line"))
                if not 1 <= int(match.group("line")) <= last <= lines:
                    return "", f"{where}: {path} has {lines} lines"
                return "line", ""
            symbol = match.group("symbol").rsplit(".", 1)[-1]
            if not re.search(rf"(?<![\w]){re.escape(symbol)}(?![\w])", text):
                return "", f"{where}: {symbol} does not occur in {path}"
            return "symbol", ""
    if _BARE_PATH.match(where) and ("/" in where or "." in where):
        path = where.removeprefix("./").rstrip("/")
        if path in derived.files or path in derived.modules or _exists(root, path):
            return "path", ""
        return "", f"{where} is not a path of the project"
    return "unverifiable", ""


def _exists(root: Path, rel: str) -> bool:
    if rel.startswith("/") or ".." in rel.split("/"):
        return False
    try:
        os.lstat(root / rel)
    except OSError:
        return False
    return True


def _read(root: Path, rel: str) -> str | None:
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        data, _info = read_source(fd, rel, _MAX_ANCHOR_BYTES)
    except Unreadable:
        return None
    finally:
        os.close(fd)
    return data.decode("utf-8", "replace")


def check_submissions(raw: Any, derived: Derived, evidence: set[str]) -> Checked:
    """Run the five checks over what a Repo run submitted; `evidence` is the project files it read."""
    items = raw if isinstance(raw, list) else ([] if raw is None else [raw])
    root = Path(derived.root)
    read_modules = {m for path in evidence if (m := module_of(path, derived.modules)) is not None}
    accepted: list[Submission] = []
    rejected: list[Rejection] = []
    for index, item in enumerate(items, 1):
        if index > MAX_ENTRIES:
            rejected.append(Rejection(index, "over-limit", f"at most {MAX_ENTRIES} entries are taken from one run"))
            continue
        shaped = _shape(index, item)
        if isinstance(shaped, Rejection):
            rejected.append(shaped)
            continue
        problem = _judge(shaped, derived, read_modules, evidence)
        if problem is not None:
            rejected.append(Rejection(index, *problem))
            continue
        anchor, broken = _anchor(shaped.where, root, derived)
        if broken:
            rejected.append(Rejection(index, "anchor", broken))
            continue
        accepted.append(Submission(shaped.section, shaped.module, shaped.field, shaped.claim, shaped.where,
                                   shaped.supersedes, anchor))
    return Checked(accepted, rejected, len(items))


def _judge(entry: Submission, derived: Derived, read_modules: set[str], evidence: set[str]) -> tuple[str, str] | None:
    if entry.section == "repo":
        if not evidence:
            return "outside-evidence-set", "no file of the project was read in this run"
        return None
    if entry.module not in derived.modules:
        near = [m for m in derived.modules if m.endswith("/" + entry.module)]
        hint = f"; did you mean {near[0]}?" if len(near) == 1 else ""
        return "unknown-module", f"{entry.module} is not a module (a directory with source files){hint}"
    named = prose_paths(entry.claim, derived)
    if named and not any(_belongs(path, entry.module, derived) for path in named):
        return "path-not-in-module", f"the claim names {', '.join(named[:3])}, not in module {entry.module}"
    if entry.module not in read_modules:
        return "outside-evidence-set", f"no file of module {entry.module} was read in this run"
    return None
