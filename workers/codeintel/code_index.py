"""The index in memory: every indexed file's facts, definitions and call sites by name, and how a call site is tied to a
definition — never with more certainty than the source gives.

`Resolution` says how: EXACT (the same file, the same class through `self`/`this`, the same Go package or Java
package), BY_IMPORT (the caller's file imports the definition's module or the name itself, under any alias, or a C
file includes the header that declares it or whose stem it shares), NAME_ONLY (only the name matches: a method
called on an object of unknown type, a name defined in several places). A name an import binds in the caller's file
is never taken for a definition of the same name elsewhere.

Not thread-safe by itself: the code server holds one lock around every change and every query.
"""

from __future__ import annotations

import enum
from collections import defaultdict
from dataclasses import dataclass, field

from .facts import CONTAINER_KINDS, CallSite, FileFacts, ImportBinding, Symbol
from .module_keys import file_module_key, import_matches

__all__ = ["CallEdge", "CodeIndex", "DefRef", "IndexedFile", "Resolution"]

_SELF = frozenset({"self", "this", "cls", "Self", "super()", "super"})
_CHAINED = (".", "::", "->")


class Resolution(enum.IntEnum):
    EXACT = 0
    BY_IMPORT = 1
    NAME_ONLY = 2

    @property
    def label(self) -> str:
        return ("exact", "by import", "by name only")[self.value]


@dataclass(slots=True)
class IndexedFile:
    path: str
    size: int
    mtime_ns: int
    inode: int
    digest: bytes
    facts: FileFacts
    module_key: str = ""
    bindings: dict[str, ImportBinding] = field(default_factory=dict)  # local name → import
    wildcards: list[ImportBinding] = field(default_factory=list)
    includes: list[str] = field(default_factory=list)  # C/C++ include paths

    def __post_init__(self) -> None:
        lang = self.facts.lang
        self.module_key = file_module_key(self.path, lang) if lang != "text" else ""
        for binding in self.facts.imports:
            if binding.local == "*":
                self.wildcards.append(binding)
            elif binding.local:
                self.bindings.setdefault(binding.local, binding)
            elif lang in ("c", "cpp"):
                self.includes.append(binding.module)


@dataclass(frozen=True, slots=True)
class DefRef:
    path: str
    index: int


@dataclass(frozen=True, slots=True)
class CallEdge:
    """A call site (`path`, its `call` index) and what it was tied to."""

    path: str
    call: int
    how: Resolution
    target: DefRef | None  # the definition, when one was singled out (EXACT or BY_IMPORT, or a lone name match)


class CodeIndex:
    def __init__(self) -> None:
        self.files: dict[str, IndexedFile] = {}
        self._defs: dict[str, dict[str, list[int]]] = defaultdict(dict)  # name → path → symbol indices
        self._calls: dict[str, dict[str, list[int]]] = defaultdict(dict)  # called name → path → call indices
        self._aliases: dict[str, set[str]] = defaultdict(set)  # imported name → local names other than it
        self._by_segment: dict[str, set[str]] = defaultdict(set)  # last module-key segment → paths
        self.version = 0

    # -- changes ------------------------------------------------------------------------------------------

    def put(self, entry: IndexedFile) -> None:
        self.remove(entry.path)
        self.files[entry.path] = entry
        path, facts = entry.path, entry.facts
        for i, symbol in enumerate(facts.symbols):
            self._defs[symbol.name].setdefault(path, []).append(i)
        for i, call in enumerate(facts.calls):
            self._calls[call.name].setdefault(path, []).append(i)
        for binding in facts.imports:
            if binding.name and binding.local and binding.local != binding.name and binding.name not in ("*",):
                self._aliases[binding.name].add(binding.local)
        self._by_segment[entry.module_key.rsplit("/", 1)[-1]].add(path)
        self.version += 1

    def remove(self, path: str) -> IndexedFile | None:
        entry = self.files.pop(path, None)
        if entry is None:
            return None
        for symbol in entry.facts.symbols:
            _drop(self._defs, symbol.name, path)
        for call in entry.facts.calls:
            _drop(self._calls, call.name, path)
        segment = entry.module_key.rsplit("/", 1)[-1]
        paths = self._by_segment.get(segment)
        if paths is not None:
            paths.discard(path)
            if not paths:
                del self._by_segment[segment]
        self.version += 1
        return entry  # aliases are kept: a stale alias only widens which names are looked at, never a verdict

    # -- lookups ------------------------------------------------------------------------------------------

    def symbol(self, ref: DefRef) -> Symbol:
        return self.files[ref.path].facts.symbols[ref.index]

    def call(self, path: str, index: int) -> CallSite:
        return self.files[path].facts.calls[index]

    def definitions(self, name: str, *, path: str = "", owner: str = "", with_declarations: bool = False
                    ) -> list[DefRef]:
        """Definitions named `name` (the last part of a qualified `A.b` / `A::b`), narrowed to `path` (a file or a
        directory prefix) and `owner` (the class or type they belong to)."""
        refs = []
        for where, indices in sorted(self._defs.get(name, {}).items()):
            if path and not _under(where, path):
                continue
            for i in indices:
                symbol = self.files[where].facts.symbols[i]
                if owner and symbol.container.rsplit(".", 1)[-1] != owner:
                    continue
                if symbol.kind == "declaration" and not with_declarations:
                    continue
                refs.append(DefRef(where, i))
        if not refs and not with_declarations:  # only declared (a C header, an interface): say those
            return self.definitions(name, path=path, owner=owner, with_declarations=True)
        return refs

    def names_like(self, name: str, limit: int = 8) -> list[str]:
        """Defined names close to `name` (same letters ignoring case and underscores, or containing it)."""
        folded = name.lower().replace("_", "")
        exact = [n for n in self._defs if n.lower().replace("_", "") == folded and n != name]
        near = sorted(n for n in self._defs if folded and folded in n.lower().replace("_", "") and n not in exact)
        return (exact + sorted(near, key=len))[:limit]

    def call_sites(self, name: str) -> list[tuple[str, int]]:
        """Every call of `name` or of a local name an import gave it, in path order."""
        names = {name, *self._aliases.get(name, ())}
        sites = []
        for called in names:
            for where, indices in self._calls.get(called, {}).items():
                sites.extend((where, i) for i in indices)
        return sorted(sites)

    def calls_in(self, ref: DefRef) -> list[int]:
        """The call sites inside a definition (its nested definitions' calls included)."""
        entry = self.files[ref.path]
        symbols = entry.facts.symbols
        inside = {ref.index}
        for i in range(ref.index + 1, len(symbols)):  # descendants follow their ancestor in start order
            if symbols[i].parent in inside:
                inside.add(i)
            elif symbols[i].start_byte >= symbols[ref.index].end_byte:
                break
        return [i for i, c in enumerate(entry.facts.calls) if c.caller in inside]

    def caller_of(self, path: str, call: CallSite) -> Symbol | None:
        return self.files[path].facts.symbols[call.caller] if call.caller >= 0 else None

    # -- resolution ---------------------------------------------------------------------------------------

    def resolve(self, path: str, call: CallSite, targets: list[DefRef]) -> tuple[Resolution, DefRef | None]:
        """How the call site in `path` is tied to one of `targets` (definitions of its name): the best tie and
        to which; NAME_ONLY with the lone target when only one definition has the name, else with none."""
        best: tuple[Resolution, DefRef | None] = (Resolution.NAME_ONLY, targets[0] if len(targets) == 1 else None)
        for ref in targets:
            how = self._tie(path, call, ref)
            if how is not None and how < best[0]:
                best = (how, ref)
                if how is Resolution.EXACT:
                    break
        return best

    def _tie(self, path: str, call: CallSite, ref: DefRef) -> Resolution | None:
        caller = self.files.get(path)
        owner = self.files.get(ref.path)
        if caller is None or owner is None:
            return None
        symbol = owner.facts.symbols[ref.index]
        lang = caller.facts.lang
        if lang != owner.facts.lang and not {lang, owner.facts.lang} <= {"c", "cpp"} \
                and not {lang, owner.facts.lang} <= {"javascript", "typescript", "tsx"}:
            return None
        receiver = call.receiver
        if not receiver:
            binding = caller.bindings.get(call.name)
            if binding is not None:  # the name is imported here: only the imported definition can be meant
                return Resolution.BY_IMPORT if self._imported(binding, [], symbol, owner, lang, call.name) else None
            if _top_level(symbol, owner.facts) and (path == ref.path or (
                    lang in ("go", "java") and _same_dir(path, ref.path))):
                return Resolution.EXACT
            if path == ref.path and symbol.container and self._enclosing_owner(caller, call) == symbol.container:
                return Resolution.EXACT  # a Java method calling its sibling without `this`
            if _top_level(symbol, owner.facts):
                if any(self._imported(w, [], symbol, owner, lang, call.name) for w in caller.wildcards):
                    return Resolution.BY_IMPORT
                if lang in ("c", "cpp") and any(_includes(inc, owner) for inc in caller.includes):
                    return Resolution.BY_IMPORT
            return None
        if receiver in _SELF:
            if symbol.container and self._enclosing_owner(caller, call) == symbol.container and (
                    path == ref.path or lang == "go"):
                return Resolution.EXACT
            return None
        parts = _receiver_parts(receiver)
        if not parts:
            return None
        if parts[-1] == symbol.container.rsplit(".", 1)[-1] and len(parts) == 1 and (
                path == ref.path or (lang in ("go", "java") and _same_dir(path, ref.path))):
            return Resolution.EXACT  # `Thing::new()`, `Server.start` beside the class
        binding = caller.bindings.get(receiver) or caller.bindings.get(parts[0])
        if binding is not None:
            rest = parts[1:] if caller.bindings.get(receiver) is None else []
            return Resolution.BY_IMPORT if self._imported(binding, rest, symbol, owner, lang, call.name) else None
        if (lang == "rust" and "::" in receiver) or (lang == "rust" and len(parts) == 1 and parts[0].islower()):
            module = "/".join(p for p in parts if p not in ("crate", "self", "super"))
            if module and import_matches(owner.module_key, module, lang) and _top_level(symbol, owner.facts):
                return Resolution.BY_IMPORT  # a path-qualified call, `util::deep()`
        return None

    def _imported(self, binding: ImportBinding, rest: list[str], symbol: Symbol, owner: IndexedFile, lang: str,
                  called: str) -> bool:
        """Whether `binding` (and the receiver parts after it, then the called name) leads to `symbol` in `owner`."""
        module = [p for p in binding.module.split("/") if p]
        name = [] if binding.name in ("", "*", "default") else binding.name.split(".")
        if binding.local == called and name:  # `h()` after `from m import helper as h`: the call is `helper`
            path = [*module, *name]
        elif binding.name == "*":
            path = [*module, *rest, called]
        else:
            path = [*module, *name, *rest, called]
        qualname = symbol.qualname.split(".")
        if binding.name == "default" and not rest and binding.local == called:
            return import_matches(owner.module_key, "/".join(module), lang) and _top_level(symbol, owner.facts)
        for k in range(len(module) if lang == "go" else 1, len(path)):
            key = "/".join(path[:k])
            if not import_matches(owner.module_key, key, lang):
                continue
            tail = path[k:]
            if qualname == tail or qualname == path[k - 1:]:  # the last module part may be the class (Java)
                return True
        return False

    def _enclosing_owner(self, entry: IndexedFile, call: CallSite) -> str:
        """The qualified name of the class-like definition the call sits in ("" if none)."""
        index = call.caller
        symbols = entry.facts.symbols
        while index >= 0:
            symbol = symbols[index]
            if symbol.kind in CONTAINER_KINDS:
                return symbol.qualname
            if symbol.kind == "method" and symbol.container:
                return symbol.container
            index = symbol.parent
        return ""


def _drop(table: dict[str, dict[str, list[int]]], name: str, path: str) -> None:
    by_path = table.get(name)
    if by_path is not None:
        by_path.pop(path, None)
        if not by_path:
            del table[name]


def _under(path: str, prefix: str) -> bool:
    prefix = prefix.strip("/")
    return not prefix or prefix == "." or path == prefix or path.startswith(prefix + "/")


def _same_dir(a: str, b: str) -> bool:
    return a.rpartition("/")[0] == b.rpartition("/")[0]


def _top_level(symbol: Symbol, facts: FileFacts) -> bool:
    """A definition reachable by its bare name from its module (not nested in a function)."""
    index = symbol.parent
    while index >= 0:
        parent = facts.symbols[index]
        if parent.kind not in ("namespace", "module"):
            return False
        index = parent.parent
    return True


def _includes(include: str, owner: IndexedFile) -> bool:
    """Whether `#include "include"` brings in `owner`: it is that header, or its source file (same stem)."""
    if import_matches(owner.path, include, "c"):
        return True
    stem = include.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    return bool(stem) and owner.path.rsplit("/", 1)[-1].rsplit(".", 1)[0] == stem


def _receiver_parts(receiver: str) -> list[str]:
    text = receiver
    for sep in _CHAINED:
        text = text.replace(sep, "/")
    parts = [p.strip() for p in text.split("/")]
    if any(not p.replace("_", "a").replace("$", "a").isalnum() for p in parts):
        return []  # a call on an expression (`f().g()`, `a[0].b()`): nothing to tie it to
    return parts
