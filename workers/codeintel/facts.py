"""What the index keeps of one source file, and its compact stored form.

A file's facts are its definitions (`Symbol`: name, kind, where, signature, the first line of its documentation),
the call sites in it (`CallSite`: the called name, what it was called through, the definition it sits in), the
names its imports bind (`ImportBinding`) and the chunks ranked search reads (`Chunk`: a definition or a window of
text, as a bag of tokens). `pack` / `unpack` turn them into plain tuples for msgpack; `unpack` raises ValueError
on anything that is not exactly that shape (a damaged record is parsed again, never trusted).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["FORMAT", "CallSite", "Chunk", "FileFacts", "ImportBinding", "Symbol", "pack", "unpack"]

FORMAT = 1  # bumped whenever the stored shape or what extraction finds changes: older records are parsed again

# Kinds that hold members: a function defined in one is a method, and their names qualify what they hold.
CONTAINER_KINDS = frozenset({"class", "struct", "interface", "enum", "trait", "impl", "namespace", "module"})


@dataclass(slots=True)
class Symbol:
    name: str
    kind: str  # function, method, class, struct, interface, enum, trait, impl, type, module, namespace, macro…
    qualname: str  # "Outer.method"; a Go method or C++ `A::b` qualified by its owner
    line: int  # 1-based, first line of the definition
    end_line: int
    start_byte: int
    end_byte: int
    signature: str  # the header without the body, on one line
    doc: str  # the first line of its docstring or leading comment
    parent: int  # index of the enclosing definition, -1 at the top

    @property
    def container(self) -> str:
        """The owner's name ("" at the top): `Class` of `Class.method`."""
        return self.qualname.rsplit(".", 1)[0] if "." in self.qualname else ""


@dataclass(slots=True)
class CallSite:
    name: str  # the called name (the last part: `bar` of `foo.bar()`)
    receiver: str  # what it is called through (`foo`, `self`, `pkg`), "" for a bare call
    line: int
    caller: int  # index of the enclosing definition, -1 at module level


@dataclass(slots=True)
class ImportBinding:
    local: str  # the name bound in the importing file ("" for a C include; "*" for a wildcard)
    module: str  # the module's key: a path-like string, "/"-separated (`pkg/mod`, `./util` resolved, `fmt`)
    name: str  # the imported name within the module, "" when the module itself is bound
    line: int


@dataclass(slots=True)
class Chunk:
    symbol: int  # the definition it is, -1 for module-level code or a window of text
    line: int
    end_line: int
    title: str  # what a search hit shows: a qualified name, or the file and its lines
    tokens: dict[str, int]  # term frequencies
    digest: bytes  # of the chunk's text: an embedding made for this text can be kept across runs and renames


@dataclass(slots=True)
class FileFacts:
    lang: str
    lines: int
    problem: str = ""  # "" when the file parsed cleanly; else what went wrong, for answers to say
    symbols: list[Symbol] = field(default_factory=list)
    calls: list[CallSite] = field(default_factory=list)
    imports: list[ImportBinding] = field(default_factory=list)
    chunks: list[Chunk] = field(default_factory=list)


def pack(facts: FileFacts) -> list[Any]:
    return [FORMAT, facts.lang, facts.lines, facts.problem,
            [[s.name, s.kind, s.qualname, s.line, s.end_line, s.start_byte, s.end_byte, s.signature, s.doc, s.parent]
             for s in facts.symbols],
            [[c.name, c.receiver, c.line, c.caller] for c in facts.calls],
            [[i.local, i.module, i.name, i.line] for i in facts.imports],
            [[c.symbol, c.line, c.end_line, c.title, list(c.tokens.items()), c.digest] for c in facts.chunks]]


def unpack(data: Any) -> FileFacts:
    """The facts `pack` made; ValueError for any other shape (a damaged or older record)."""
    try:
        version, lang, lines, problem, symbols, calls, imports, chunks = data
        if version != FORMAT:
            raise ValueError(f"record format {version!r}, not {FORMAT}")
        facts = FileFacts(_str(lang), _int(lines), _str(problem))
        count = len(symbols)
        for name, kind, qualname, line, end, start_b, end_b, signature, doc, parent in symbols:
            if not -1 <= _int(parent) < count:
                raise ValueError("a definition's parent is out of range")
            facts.symbols.append(Symbol(_str(name), _str(kind), _str(qualname), _int(line), _int(end), _int(start_b),
                                        _int(end_b), _str(signature), _str(doc), parent))
        for name, receiver, line, caller in calls:
            if not -1 <= _int(caller) < count:
                raise ValueError("a call's definition is out of range")
            facts.calls.append(CallSite(_str(name), _str(receiver), _int(line), caller))
        for local, module, name, line in imports:
            facts.imports.append(ImportBinding(_str(local), _str(module), _str(name), _int(line)))
        for symbol, line, end, title, tokens, digest in chunks:
            if not -1 <= _int(symbol) < count or not isinstance(digest, bytes):
                raise ValueError("a chunk is damaged")
            bag = {_str(t): _int(n) for t, n in tokens}
            facts.chunks.append(Chunk(symbol, _int(line), _int(end), _str(title), bag, digest))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"not a file record ({exc})") from None
    return facts


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError("expected text")
    return value


def _int(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError("expected a whole number")
    return value
