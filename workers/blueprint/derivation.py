"""The blueprint's derived layer: what the repository's structure is now, computed on every use and never stored.

- modules: every directory holding source files of a language the code server reads (`codeintel.languages`),
  found by the code server's own walk (ignore files, no hidden entries, no links, bounded: `project_files.py`);
- files per module, and the languages they are in;
- import edges between modules, parsed, never guessed: Python statements by `python_imports.py`, resolved to the
  project's own files through its source roots (the top, `src/`, and `pyproject.toml`'s package-dir); every other
  language by the code server's tree-sitter import queries (`extraction.imports_only`) matched to files by its
  module keys (`module_keys.py`); an import that matches no file of the project is a library's and makes no edge;
- entry points (`__main__.py`, `package main`, `src/main.rs`, `[project.scripts]`, package.json `bin`/`main`) and
  manifests (pyproject.toml, package.json, go.mod, Cargo.toml, Makefile, Dockerfile, …) per module;
- one structural fingerprint per section: a module's is its file names and its outgoing edges (an edit inside a
  file changes nothing, a file added, removed or renamed or an import to another module does); the repository's
  is its module set.

A file's imports are kept in memory, per process, by (path, size, mtime): a run that derives twice parses once.
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
import stat
import time
import tomllib
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from yagent.workers.codeintel.extraction import imports_only
from yagent.workers.codeintel.languages import language_of
from yagent.workers.codeintel.module_keys import file_module_key, import_matches
from yagent.workers.codeintel.project_files import FileStat, SkipReason, Unreadable, read_source, walk_project

from .python_imports import python_imports

__all__ = ["MANIFESTS", "REPO", "Derived", "ModuleFacts", "derive", "module_of"]

REPO = "."  # the module name of the project's top directory, and the section key of repository-wide facts
MAX_FILES = 20_000  # files walked at most: a map of a larger tree is partial (and says so), never minutes late
MAX_FILE_BYTES = 2 * 1024 * 1024
MANIFESTS = ("pyproject.toml", "setup.py", "setup.cfg", "requirements.txt", "package.json", "go.mod", "Cargo.toml",
             "pom.xml", "build.gradle", "build.gradle.kts", "Makefile", "CMakeLists.txt", "Dockerfile", "Gemfile",
             "composer.json", "tsconfig.json")
_MAIN_FILES = {"__main__.py": "python -m", "main.rs": "binary", "manage.py": "django manage"}
_MAX_MANIFEST = 1024 * 1024


@dataclass(frozen=True, slots=True)
class ModuleFacts:
    path: str  # the directory, relative, "/"-separated; REPO for the top
    files: tuple[str, ...]  # its source files' names, sorted
    languages: tuple[str, ...]
    imports: tuple[str, ...]  # the modules its files import, sorted
    imported_by: tuple[str, ...]
    entry_points: tuple[str, ...]
    manifests: tuple[str, ...]
    fingerprint: str


@dataclass
class Derived:
    root: str
    modules: dict[str, ModuleFacts] = field(default_factory=dict)
    edges: list[tuple[str, str]] = field(default_factory=list)  # (importer, imported), sorted
    repo_fingerprint: str = ""
    entry_points: list[str] = field(default_factory=list)  # what the top's manifests declare, and top-level mains
    manifests: tuple[str, ...] = ()  # the top directory's
    source_files: int = 0
    files: set[str] = field(default_factory=set)  # every file the walk listed (for anchors and prose paths)
    skipped: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0

    @property
    def partial(self) -> int:
        """Files past `MAX_FILES` the walk did not list (0: the map is whole)."""
        return self.skipped.get(SkipReason.OVER_LIMIT, 0)

    def fingerprint_of(self, section: str, module: str) -> str:
        """The fingerprint a persisted entry of `section`/`module` is judged by ("" when the module is gone)."""
        if section == "repo":
            return self.repo_fingerprint
        facts = self.modules.get(module)
        return facts.fingerprint if facts is not None else ""


def module_of(path: str, modules: dict[str, ModuleFacts] | set[str]) -> str | None:
    """The module a project path belongs to: the nearest enclosing directory that is a module (None: none is)."""
    here = posixpath.dirname(path.strip("/")) if not path.endswith("/") else path.strip("/")
    while True:
        key = here or REPO
        if key in modules:
            return key
        if not here:
            return None
        here = posixpath.dirname(here)


# (path, size, mtime) → the project paths (or module keys) the file imports, per process
_IMPORTS: dict[tuple[str, str, int, int], tuple[str, ...]] = {}


def _digest(parts: list[str]) -> str:
    return hashlib.sha256("\n".join(parts).encode("utf-8", "surrogateescape")).hexdigest()[:16]


def _source_roots(root: Path, listed: set[str]) -> list[tuple[str, str]]:
    """(dotted prefix, directory) pairs a Python module name resolves through, most specific first."""
    pairs: list[tuple[str, str]] = [("", ""), ("", "src")]
    if "pyproject.toml" in listed:
        mapping = _pyproject(root).get("tool", {}).get("setuptools", {}).get("package-dir", {})
        if isinstance(mapping, dict):
            pairs += [(str(k), str(v).strip("/")) for k, v in mapping.items() if isinstance(v, str)]
    return sorted(set(pairs), key=lambda p: -len(p[0]))


class _PythonResolver:
    """Dotted Python module names to the project's files, remembered per derivation (names repeat a lot)."""

    def __init__(self, files: set[str], roots: list[tuple[str, str]]) -> None:
        self.files = files
        self.roots = roots
        self._absolute: dict[str, str] = {}

    def targets(self, importer: str, level: int, module: str, names: tuple[str, ...]) -> list[str]:
        """The files a statement names: for each dotted name the most specific one that exists (a `from` list's
        names are tried as submodules first, then the module itself)."""
        if level:
            base = importer.rsplit("/", 1)[0] if "/" in importer else ""
            for _ in range(level - 1):
                base = base.rsplit("/", 1)[0] if "/" in base else ""
            package = "/".join(p for p in (base, module.replace(".", "/")) if p)
            wanted = [[f"{package}/{name.replace('.', '/')}" if package else name.replace(".", "/")] for name in names]
            return [hit for stems in [*wanted, [package]] if (hit := self._first(stems))]
        dotted = [f"{module}.{name}" for name in names] + [module] if module else list(names)
        return [hit for name in dotted if (hit := self._resolve(name))]

    def _resolve(self, name: str) -> str:
        hit = self._absolute.get(name)
        if hit is None:
            parts = name.split(".")
            stems = []
            for i in range(len(parts), 0, -1):  # `import a.b.c` names a/b/c, else a/b, else a
                prefix = ".".join(parts[:i])
                for mapped, directory in self.roots:
                    if mapped and not (prefix == mapped or prefix.startswith(mapped + ".")):
                        continue
                    rest = prefix[len(mapped):].lstrip(".") if mapped else prefix
                    stems.append("/".join(p for p in (directory, rest.replace(".", "/")) if p))
            hit = self._absolute[name] = self._first(stems)
        return hit

    def _first(self, stems: list[str]) -> str:
        files = self.files
        for stem in stems:
            for path in (f"{stem}.py", f"{stem}/__init__.py", f"{stem}.pyi"):
                if path in files:
                    return path
        return ""


def _read(root_fd: int, rel: str) -> bytes | None:
    try:
        data, _info = read_source(root_fd, rel, MAX_FILE_BYTES)
    except Unreadable:
        return None
    return data


def _file_imports(root: str, root_fd: int, item: FileStat, lang: str, python: _PythonResolver,
                  keys: dict[str, list[tuple[str, str]]]) -> tuple[str, ...]:
    memo = _IMPORTS.get((root, item.path, item.size, item.mtime_ns))
    if memo is not None:
        return memo
    data = _read(root_fd, item.path)
    targets: list[str] = []
    if data is not None:
        if lang == "python":
            for imp in python_imports(data.decode("utf-8", "replace")):
                targets += python.targets(item.path, imp.level, imp.module, imp.names)
        else:
            spec = language_of(item.path)
            if spec is not None:
                for binding in imports_only(data, spec, item.path):
                    last = binding.module.rstrip("/").rsplit("/", 1)[-1]
                    targets += [path for key, path in keys.get(last, []) if import_matches(key, binding.module, lang)]
                if lang == "go" and b"package main" in data:
                    targets.append("\0main")
    found = tuple(sorted(set(targets)))
    _IMPORTS[(root, item.path, item.size, item.mtime_ns)] = found
    return found


def derive(project_root: Path, *, exclude: tuple[str, ...] = ()) -> Derived:
    """The derived layer of the project now."""
    started = time.perf_counter()
    root = Path(os.path.realpath(project_root))
    walked = walk_project(root, max_file_bytes=MAX_FILE_BYTES, max_files=MAX_FILES, exclude=exclude)
    derived = Derived(root=str(root), files={f.path for f in walked.files}, skipped=walked.skipped)
    sources = [(f, spec.name) for f in walked.files if (spec := language_of(f.path)) is not None]
    derived.source_files = len(sources)
    by_module: dict[str, list[tuple[FileStat, str]]] = defaultdict(list)
    for item, lang in sources:
        by_module[posixpath.dirname(item.path) or REPO].append((item, lang))
    python = _PythonResolver({item.path for item, _lang in sources}, _source_roots(root, derived.files))
    keys: dict[str, list[tuple[str, str]]] = defaultdict(list)  # a key's last segment → (module key, path)
    for item, lang in sources:
        if lang != "python":
            key = file_module_key(item.path, lang)
            keys[key.rsplit("/", 1)[-1]].append((key, item.path))
    edges: set[tuple[str, str]] = set()
    mains: dict[str, list[str]] = defaultdict(list)
    root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for module, members in by_module.items():
            for item, lang in members:
                for target in _file_imports(str(root), root_fd, item, lang, python, keys):
                    if target == "\0main":
                        mains[module].append(f"{posixpath.basename(item.path)} (package main)")
                        continue
                    imported = posixpath.dirname(target) or REPO
                    if imported != module and imported in by_module:
                        edges.add((module, imported))
                name = posixpath.basename(item.path)
                if name in _MAIN_FILES or (name.endswith(".rs") and posixpath.basename(module) == "bin"):
                    mains[module].append(f"{name} ({_MAIN_FILES.get(name, 'binary')})")
    finally:
        os.close(root_fd)
    derived.entry_points = sorted(set(_declared_entry_points(root, derived.files) + mains.get(REPO, [])))
    derived.manifests = _manifests(root, REPO)
    derived.edges = sorted(edges)
    outgoing: dict[str, list[str]] = defaultdict(list)
    incoming: dict[str, list[str]] = defaultdict(list)
    for a, b in derived.edges:
        outgoing[a].append(b)
        incoming[b].append(a)
    for module, members in sorted(by_module.items()):
        names = tuple(sorted(posixpath.basename(item.path) for item, _lang in members))
        derived.modules[module] = ModuleFacts(
            path=module, files=names, languages=tuple(sorted({lang for _item, lang in members})),
            imports=tuple(outgoing[module]), imported_by=tuple(incoming[module]),
            entry_points=tuple(sorted(set(mains[module]))), manifests=_manifests(root, module),
            fingerprint=_digest([*names, "->", *outgoing[module]]))
    derived.repo_fingerprint = _digest(sorted(derived.modules))
    derived.seconds = time.perf_counter() - started
    return derived


# (path, size, mtime) → the parsed pyproject.toml, per process: a derivation reads it twice, every run again
_PYPROJECT: dict[tuple[str, int, int], dict] = {}


def _pyproject(root: Path) -> dict:
    path = os.path.join(root, "pyproject.toml")
    try:
        with open(path, "rb") as fh:
            st = os.fstat(fh.fileno())
            key = (path, st.st_size, st.st_mtime_ns)
            if key not in _PYPROJECT:
                if len(_PYPROJECT) > 64:  # a daemon serving many projects keeps a few, not all it ever saw
                    _PYPROJECT.clear()
                data = tomllib.loads(fh.read(_MAX_MANIFEST).decode("utf-8", "replace"))
                _PYPROJECT[key] = data if isinstance(data, dict) else {}
            return _PYPROJECT[key]
    except (OSError, tomllib.TOMLDecodeError):
        return {}


def _manifests(root: Path, module: str) -> tuple[str, ...]:
    # Strings, not Path objects: this runs once per module and pathlib's joins were most of its cost.
    directory = str(root) if module == REPO else f"{root}/{module}"
    found = []
    for name in MANIFESTS:
        try:
            if stat.S_ISREG(os.lstat(f"{directory}/{name}").st_mode):
                found.append(name)
        except OSError:
            continue
    return tuple(found)


def _declared_entry_points(root: Path, listed: set[str]) -> list[str]:
    """What pyproject.toml's [project.scripts] and package.json's bin and main declare."""
    found: list[str] = []
    if "pyproject.toml" in listed:
        scripts = _pyproject(root).get("project", {}).get("scripts", {})
        if isinstance(scripts, dict):
            found += [f"{name} = {target} (pyproject.toml)" for name, target in sorted(scripts.items())
                      if isinstance(target, str)][:50]
    try:
        if stat.S_ISREG(os.lstat(root / "package.json").st_mode):
            with open(root / "package.json", "rb") as fh:
                package = json.loads(fh.read(_MAX_MANIFEST).decode("utf-8", "replace"))
            if isinstance(package, dict):
                bins = package.get("bin")
                if isinstance(bins, str):
                    found.append(f"{bins} (package.json bin)")
                elif isinstance(bins, dict):
                    found += [f"{k} = {v} (package.json bin)" for k, v in sorted(bins.items())][:50]
                if isinstance(package.get("main"), str):
                    found.append(f"{package['main']} (package.json main)")
    except (OSError, ValueError):
        pass
    return found
