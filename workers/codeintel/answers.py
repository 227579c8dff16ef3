"""The six tools' answers, shaped for a model: a header saying what was asked and how it was answered, then one line
per finding in the `path:line: …` form, bounded in length and paged with `offset`.

Every tie between a call and a definition is labelled with how it was made (exact / by import / by name only,
`code_index.Resolution`). An answer never looks like "nothing found" while it is not known: during the first build
(or an update of many files) it says how far the index is and what to use meanwhile; a name with no definition in
the project still lists its call sites, saying they are matched by name only.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .code_index import CallEdge, CodeIndex, DefRef, Resolution
from .facts import FileFacts, Symbol
from .indexer import ProjectIndexer
from .ranking import ChunkRef, fuse, overlap_score, query_terms

__all__ = ["MAX_ANSWER_CHARS", "CodeQueries", "Refused"]

MAX_ANSWER_CHARS = 16_000
MAX_LINES = 300  # lines of one skeleton or snippet page
DEFAULT_CALLERS = 40
MAX_LIMIT = 200
MAX_DEPTH = 4
GRAPH_NODES = 80
_LINE_CHARS = 160


class Refused(ValueError):
    """An argument the tool cannot use; the message says what to send instead."""


@dataclass(frozen=True, slots=True)
class Wanted:
    name: str
    owner: str
    qualifier: str  # everything before the name, "/"-joined


class CodeQueries:
    """Answers over one project's index; every method takes the indexer's lock itself."""

    def __init__(self, indexer: ProjectIndexer, *, embed_query: Callable[[str], bytes] | None = None,
                 ranking_name: str = "") -> None:
        self.indexer = indexer
        self.embed_query = embed_query
        self.ranking_name = ranking_name or "embeddings"  # what BM25 is fused with, when embeddings are configured

    # -- the index's state ----------------------------------------------------------------------------------

    def waiting(self, tool: str) -> str | None:
        """What to say instead of an answer while the index cannot give one (None: it can)."""
        with self.indexer.lock:
            status = self.indexer.status
            if status.phase == "building":
                shown = f"{status.done} of {status.total} files" if status.total else "listing the project's files"
                return (f"index building: {shown} read ({status.seconds:.0f}s so far). {tool} needs the whole "
                        "index, so this is not an answer: nothing was searched. Meanwhile use search_by_regex to find "
                        "text and read_file to read it (query_code_skeleton and query_code_snippet already work for "
                        "a file you name by path), or ask again in a little while.")
            if status.phase == "updating":
                return (f"index updating: {status.done} of {status.total} changed files read. {tool} will answer "
                        "once they are in; meanwhile use search_by_regex and read_file, or ask again shortly.")
            if status.phase == "failed":
                return (f"the code index could not be built ({status.problem}); {tool} cannot answer. Use "
                        "search_by_regex and read_file; `yagent mcp` shows the code server's state.")
        return None

    def _note(self) -> str:
        with self.indexer.lock:
            problems = []
            if self.indexer.store_problem:
                problems.append(self.indexer.store_problem)
            skipped = self.indexer.skipped
            if skipped:
                problems.append("not indexed: " + ", ".join(f"{n} {r}" for r, n in sorted(skipped.items())))
        return ("\n[" + "; ".join(problems) + "]") if problems else ""

    # -- semantic_search ------------------------------------------------------------------------------------

    def semantic_search(self, query: str, path: str = "", limit: int = 10) -> str:
        wait = self.waiting("semantic_search")
        if wait:
            return wait
        wanted = query_terms(query)
        within = self._relative(path) if path else ""
        limit = _bounded(limit, 1, 50)
        if not wanted:
            raise Refused("the query has no searchable words: name what the code does or is called "
                          "(e.g. \"parse duration\", \"retry backoff\")")
        with self.indexer.lock:
            model = self.indexer.model
            stale = self.indexer.stale_paths()
            index = self.indexer.index
            ranked = model.search(wanted, limit * 3, stale=stale, within=within) if model is not None else []
            fresh = [] if model is not None else list(index.files)
            fresh += [p for p in stale if p in index.files]
            extra = []
            for where in fresh:
                if within and not _under(where, within):
                    continue
                for i, chunk in enumerate(index.files[where].facts.chunks):
                    score = overlap_score(wanted, chunk.tokens)
                    if score > 0:
                        extra.append((score, ChunkRef(where, i)))
            extra.sort(key=lambda item: -item[0])
            lexical = [h.ref for h in ranked] + [ref for _score, ref in extra[:limit * 3]]
            chunks_total = len(model) if model is not None else 0
        how = "ranked by BM25 keyword relevance"
        order = lexical
        if self.embed_query is not None:
            semantic, note = self._by_embedding(query, limit * 3, within)
            if semantic:
                order = fuse([lexical, semantic], limit * 3)
                how = f"ranked by BM25 keyword relevance fused with {self.ranking_name}"
            how += note
        with self.indexer.lock:
            index = self.indexer.index
            lines = []
            for ref in order:
                entry = index.files.get(ref.path)
                if entry is None or ref.chunk >= len(entry.facts.chunks):
                    continue
                lines.append(_hit_line(entry.path, entry.facts, ref.chunk))
                if len(lines) >= limit:
                    break
            files = len(index.files)
            if model is None:
                chunks_total = sum(len(e.facts.chunks) for e in index.files.values())
        scope = f" under {within}" if within else ""
        head = (f"semantic_search {query!r}{scope}: {len(lines)} result{'s' if len(lines) != 1 else ''}, {how} over "
                f"{chunks_total} functions, classes and text windows of {files} files.")
        if not lines:
            return (f"{head}\nNo chunk contains any of the words {', '.join(wanted[:8])}. Try other words (what the "
                    "code is called, what it does) or search_by_regex for exact text." + self._note())
        return _bounded_text(head + "\n" + "\n".join(lines) + self._note())

    def _by_embedding(self, query: str, k: int, within: str) -> tuple[list[ChunkRef], str]:
        import numpy

        assert self.embed_query is not None
        try:
            vector = numpy.frombuffer(self.embed_query(query), dtype=numpy.float32)
        except Exception as exc:  # the endpoint is untrusted and may be down: BM25 alone answers then
            return [], f" (the embeddings endpoint failed: {str(exc)[:200]}; BM25 only)"
        with self.indexer.lock:
            have, total = self.indexer.embedded_count()
            refs, rows = [], []
            for path, entry in self.indexer.index.files.items():
                if within and not _under(path, within):
                    continue
                for i, chunk in enumerate(entry.facts.chunks):
                    stored = self.indexer.vectors.get(chunk.digest)
                    if stored is not None and len(stored) == vector.nbytes:
                        refs.append(ChunkRef(path, i))
                        rows.append(stored)
        note = "" if have >= total else f" ({have} of {total} chunks embedded so far)"
        if not rows:
            return [], note
        matrix = numpy.frombuffer(b"".join(rows), dtype=numpy.float32).reshape(len(rows), -1)
        scores = matrix @ vector
        best = numpy.argsort(-scores)[:k]
        return [refs[int(i)] for i in best], note

    # -- query_code_skeleton --------------------------------------------------------------------------------

    def skeleton(self, paths: list[str], offset: int = 0) -> str:
        if not paths:
            raise Refused("name at least one file or directory in `paths` (relative to the project root)")
        offset = _bounded(offset, 0, 10_000_000)
        lines: list[str] = []
        for raw in paths[:50]:
            rel = self._relative(raw)
            with self.indexer.lock:
                under = sorted(p for p in self.indexer.index.files if _under(p, rel) and p != rel) if rel else \
                    sorted(self.indexer.index.files)
                building = self.indexer.status.phase != "ready"
            if (rel and not under) or self._is_file(rel):
                facts, why = self.indexer.facts_of(rel)
                if facts is None:
                    lines.append(f"File: {rel}  ({why or 'not found'})")
                    continue
                lines.extend(_file_skeleton(rel, facts))
                continue
            if building:
                wait = self.waiting("query_code_skeleton of a directory")
                lines.append(f"Directory: {rel or '.'}  ({wait})")
                continue
            lines.append(f"Directory: {rel or '.'}  ({len(under)} indexed files)")
            for where in under:
                with self.indexer.lock:
                    entry = self.indexer.index.files.get(where)
                if entry is not None and entry.facts.lang != "text":
                    lines.extend(_file_skeleton(where, entry.facts))
        return _paged(lines, offset, "query_code_skeleton") + self._note()

    def _is_file(self, rel: str) -> bool:
        try:
            return os.path.isfile(self.indexer.root / rel) and not os.path.islink(self.indexer.root / rel)
        except OSError:
            return False

    # -- query_code_snippet ---------------------------------------------------------------------------------

    def snippet(self, name: str, path: str = "", offset: int = 0) -> str:
        wanted = _wanted(name)
        rel = self._relative(path) if path else ""
        offset = _bounded(offset, 0, 10_000_000)
        if rel and self._is_file(rel) and self.waiting("x") is not None:  # during the build: parse the one file
            facts, why = self.indexer.facts_of(rel)
            if facts is None:
                return f"query_code_snippet {name}: {rel} cannot be read ({why})."
            found = [i for i, s in enumerate(facts.symbols) if _matches(s, wanted)]
            if not found:
                return f"query_code_snippet {name}: {rel} defines nothing named {wanted.name}."
            return self._snippet_text(rel, facts.symbols[found[0]], offset, [])
        wait = self.waiting("query_code_snippet without a file path")
        if wait:
            return wait
        with self.indexer.lock:
            refs = _definitions(self.indexer.index, wanted, rel)
            if not refs:
                return self._not_defined("query_code_snippet", wanted, rel)
            chosen = refs[0]
            symbol = self.indexer.index.symbol(chosen)
            others = [f"{r.path}:{self.indexer.index.symbol(r).line} ({self.indexer.index.symbol(r).qualname})"
                      for r in refs[1:11]]
        return self._snippet_text(chosen.path, symbol, offset, others, more=len(refs) - 11)

    def _snippet_text(self, rel: str, symbol: Symbol, offset: int, others: list[str], more: int = 0) -> str:
        lines = self.indexer.read_lines(rel)
        body = lines[symbol.line - 1:symbol.end_line]
        head = f"File: {rel}  ({symbol.kind} {symbol.qualname}, lines {symbol.line}-{symbol.end_line})"
        numbered = [f"{symbol.line + i:>6}| {text}" for i, text in enumerate(body)]
        text = head + "\n" + _paged(numbered, offset, "query_code_snippet")
        if others:
            text += f"\n\nAlso named {symbol.name}: " + "; ".join(others) + (f"; and {more} more" if more > 0 else "") \
                + " (pass `path` to pick one)"
        return text

    # -- find_function_caller -------------------------------------------------------------------------------

    def callers(self, name: str, path: str = "", offset: int = 0, limit: int = DEFAULT_CALLERS) -> str:
        wait = self.waiting("find_function_caller")
        if wait:
            return wait
        wanted = _wanted(name)
        rel = self._relative(path) if path else ""
        offset, limit = _bounded(offset, 0, 10_000_000), _bounded(limit, 1, MAX_LIMIT)
        with self.indexer.lock:
            index = self.indexer.index
            targets = _definitions(index, wanted, rel)
            edges = _caller_edges(index, wanted.name, targets)
            if not targets:
                head = (f"find_function_caller {name}: no definition named {wanted.name} in the index "
                        f"({len(index.files)} files)")
                if not edges:
                    return head + "; and no call of that name either." + _suggest(index, wanted.name) + self._note()
                head += (f"; {len(edges)} call site{'s' if len(edges) != 1 else ''} of the name, matched by name only "
                         "(it may be a library's, a builtin or made at run time):")
            else:
                counts = {how: sum(1 for e in edges if e.how is how) for how in Resolution}
                head = (f"find_function_caller {name}: {_defs_text(index, targets)}\n{len(edges)} call site"
                        f"{'s' if len(edges) != 1 else ''}: " + ", ".join(f"{counts[h]} {h.label}" for h in Resolution))
            page = edges[offset:offset + limit]
            rows = [(e, index.call(e.path, e.call), index.caller_of(e.path, index.call(e.path, e.call)),
                     index.symbol(e.target) if e.target and len(targets) > 1 else None) for e in page]
        quoted = self._quoter()
        lines = []
        for edge, call, caller, target in rows:
            where = f"in {caller.qualname}" if caller else "at module level"
            label = edge.how.label
            if target is not None and edge.how is not Resolution.NAME_ONLY:
                label += f" → {edge.target.path}:{target.line}"  # type: ignore[union-attr]
            elif edge.how is Resolution.NAME_ONLY and len(targets) > 1:
                label += f": {len(targets)} definitions share the name"
            lines.append(f"{edge.path}:{call.line}: {where}: {quoted(edge.path, call.line)}  [{label}]")
        text = head + "\n" + "\n".join(lines)
        if offset + limit < len(edges):
            text += f"\n[{len(edges) - offset - limit} more: call again with offset={offset + limit}]"
        return _bounded_text(text + self._note())

    # -- find_function_callee -------------------------------------------------------------------------------

    def callees(self, name: str, path: str = "") -> str:
        wait = self.waiting("find_function_callee")
        if wait:
            return wait
        wanted = _wanted(name)
        rel = self._relative(path) if path else ""
        with self.indexer.lock:
            index = self.indexer.index
            targets = [t for t in _definitions(index, wanted, rel) if index.symbol(t).kind != "declaration"]
            if not targets:
                return self._not_defined("find_function_callee", wanted, rel)
            sections = []
            for ref in targets[:3]:
                symbol = index.symbol(ref)
                out = _callee_edges(index, ref)
                rows = [(e, index.call(e.path, e.call), index.symbol(e.target) if e.target else None,
                         len(index.definitions(_called_name(index, e)))) for e in out]
                sections.append((ref, symbol, rows))
        quoted = self._quoter()
        parts = [f"find_function_callee {name}:" + (f" {len(targets)} definitions share the name; the first 3:"
                                                     if len(targets) > 3 else "")]
        for ref, symbol, rows in sections:
            parts.append(f"{ref.path}:{symbol.line}: {symbol.kind} {symbol.qualname} — {symbol.signature} — "
                         f"{len(rows)} call{'s' if len(rows) != 1 else ''}:")
            for edge, call, target, count in rows:
                if target is None:
                    to = "not defined in the project (a library, a builtin or made at run time)" if count == 0 else \
                        f"{count} definitions share the name"
                    label = "by name only" if count else "unresolved"
                else:
                    to = f"{edge.target.path}:{target.line} {target.qualname}"  # type: ignore[union-attr]
                    label = edge.how.label
                parts.append(f"  {edge.path}:{call.line}: {quoted(edge.path, call.line)} → {to}  [{label}]")
        return _bounded_text("\n".join(parts) + self._note())

    # -- query_call_graph -----------------------------------------------------------------------------------

    def call_graph(self, name: str, path: str = "", depth: int = 2, direction: str = "callees") -> str:
        wait = self.waiting("query_call_graph")
        if wait:
            return wait
        if direction not in ("callees", "callers"):
            raise Refused("direction is `callees` (what it calls, the default) or `callers` (what calls it)")
        depth = _bounded(depth, 1, MAX_DEPTH)
        wanted = _wanted(name)
        rel = self._relative(path) if path else ""
        with self.indexer.lock:
            index = self.indexer.index
            roots = [t for t in _definitions(index, wanted, rel) if index.symbol(t).kind != "declaration"]
            if not roots:
                return self._not_defined("query_call_graph", wanted, rel)
            lines: list[str] = [f"query_call_graph {name} ({direction}, depth {depth}); each edge says how it was "
                                "resolved; `(shown above)` marks a definition already expanded:"]
            seen: set[DefRef] = set()
            for root in roots[:3]:
                self._graph(index, root, direction, depth, 0, seen, lines, "")
                if len(lines) > GRAPH_NODES:
                    break
        if len(lines) > GRAPH_NODES:
            lines = [*lines[:GRAPH_NODES], f"[cut at {GRAPH_NODES} lines: ask for a smaller depth, or start from one "
                                           "of the names above]"]
        return _bounded_text("\n".join(lines) + self._note())

    def _graph(self, index: CodeIndex, ref: DefRef, direction: str, depth: int, level: int, seen: set[DefRef],
               lines: list[str], how: str) -> None:
        symbol = index.symbol(ref)
        indent = "  " * level
        tag = f"  [{how}]" if how else ""
        if ref in seen:
            lines.append(f"{indent}{ref.path}:{symbol.line}: {symbol.qualname}{tag} (shown above)")
            return
        seen.add(ref)
        lines.append(f"{indent}{ref.path}:{symbol.line}: {symbol.qualname}{tag}")
        if level >= depth or len(lines) > GRAPH_NODES:
            return
        if direction == "callees":
            edges = _callee_edges(index, ref)
            unresolved: dict[str, int] = {}
            for edge in edges:
                if edge.target is None:
                    called = index.call(edge.path, edge.call).name
                    unresolved[called] = unresolved.get(called, 0) + 1
                    continue
                self._graph(index, edge.target, direction, depth, level + 1, seen, lines, edge.how.label)
                if len(lines) > GRAPH_NODES:
                    return
            if unresolved:
                shown = ", ".join(sorted(unresolved)[:12]) + (" …" if len(unresolved) > 12 else "")
                lines.append(f"{indent}  (not tied to one definition in the project: {shown})")
        else:
            targets = index.definitions(symbol.name)
            done: set[DefRef] = set()
            for edge in _caller_edges(index, symbol.name, targets):
                if edge.target is not None and edge.target != ref and edge.how is not Resolution.NAME_ONLY:
                    continue  # tied to another definition of the same name
                call = index.call(edge.path, edge.call)
                if call.caller < 0:
                    lines.append(f"{indent}  {edge.path}:{call.line}: (module level)  [{edge.how.label}]")
                    continue
                caller = DefRef(edge.path, call.caller)
                if caller in done:
                    continue
                done.add(caller)
                self._graph(index, caller, direction, depth, level + 1, seen, lines, edge.how.label)
                if len(lines) > GRAPH_NODES:
                    return

    # -- shared ---------------------------------------------------------------------------------------------

    def _not_defined(self, tool: str, wanted: Wanted, rel: str) -> str:
        index = self.indexer.index
        scope = f" under {rel}" if rel else ""
        return (f"{tool} {wanted.name}: no definition named {wanted.name}{scope} in the index ({len(index.files)} "
                "files)." + _suggest(index, wanted.name) + self._note())

    def _relative(self, raw: str) -> str:
        text = str(raw).strip()
        if "\x00" in text:
            raise Refused("a path cannot hold a NUL character")
        if os.path.isabs(text):
            try:
                text = str(Path(os.path.normpath(text)).relative_to(self.indexer.root))
            except ValueError:
                raise Refused(f"{raw} is outside the project ({self.indexer.root}); name a path inside it") from None
        text = os.path.normpath(text).replace(os.sep, "/")
        if text in (".", ""):
            return ""
        if text == ".." or text.startswith("../"):
            raise Refused(f"{raw} is outside the project; name a path inside it")
        return text

    def _quoter(self) -> Callable[[str, int], str]:
        cache: dict[str, list[str]] = {}

        def quoted(rel: str, line: int) -> str:
            lines = cache.get(rel)
            if lines is None:
                lines = cache[rel] = self.indexer.read_lines(rel) if len(cache) < 64 else []
            text = lines[line - 1].strip() if 0 < line <= len(lines) else ""
            return text[:_LINE_CHARS] + ("…" if len(text) > _LINE_CHARS else "")

        return quoted


def _wanted(name: str) -> Wanted:
    text = str(name).strip().rstrip("()")
    if not text or len(text) > 400 or "\x00" in text:
        raise Refused("name a function, method or class (e.g. `parse_config`, `Server.start`)")
    parts = [p for p in text.replace("::", ".").replace("->", ".").replace("#", ".").split(".") if p]
    if not parts:
        raise Refused("name a function, method or class (e.g. `parse_config`, `Server.start`)")
    return Wanted(parts[-1], parts[-2] if len(parts) > 1 else "", "/".join(parts[:-1]))


def _matches(symbol: Symbol, wanted: Wanted) -> bool:
    return symbol.name == wanted.name and (not wanted.owner or symbol.container.rsplit(".", 1)[-1] == wanted.owner)


def _definitions(index: CodeIndex, wanted: Wanted, rel: str) -> list[DefRef]:
    """Definitions of a name as the model wrote it: `Class.method`, or `module.function` (the qualifier then names
    the module), else every definition of the name."""
    refs = index.definitions(wanted.name, path=rel, owner=wanted.owner)
    if refs or not wanted.owner:
        return refs
    everything = index.definitions(wanted.name, path=rel)
    by_module = [r for r in everything if index.files[r.path].module_key.endswith(wanted.qualifier)]
    return by_module or everything


def _caller_edges(index: CodeIndex, name: str, targets: list[DefRef]) -> list[CallEdge]:
    everything = index.definitions(name)
    narrowed = set(targets) != set(everything)
    edges = []
    for where, i in index.call_sites(name):
        call = index.call(where, i)
        if not targets:
            edges.append(CallEdge(where, i, Resolution.NAME_ONLY, None))
            continue
        if narrowed:  # a call tied exactly or by import to another definition of the name is not a caller of these
            how, target = index.resolve(where, call, everything)
            if how is not Resolution.NAME_ONLY and target not in targets:
                continue
        how, target = index.resolve(where, call, targets)
        if call.name != name and how is Resolution.NAME_ONLY:
            continue  # a local name an import gave some other function
        edges.append(CallEdge(where, i, how, target))
    edges.sort(key=lambda e: (e.how, e.path, index.call(e.path, e.call).line))
    return edges


def _callee_edges(index: CodeIndex, ref: DefRef) -> list[CallEdge]:
    edges = []
    bindings = index.files[ref.path].bindings
    for i in index.calls_in(ref):
        call = index.call(ref.path, i)
        binding = bindings.get(call.name) if not call.receiver else None
        named = binding.name if binding is not None and binding.name not in ("", "*", "default") else call.name
        targets = index.definitions(named)
        if not targets:
            edges.append(CallEdge(ref.path, i, Resolution.NAME_ONLY, None))
            continue
        how, target = index.resolve(ref.path, call, targets)
        edges.append(CallEdge(ref.path, i, how, target))
    return edges


def _called_name(index: CodeIndex, edge: CallEdge) -> str:
    """The name a call reaches: an imported alias (`h` of `import helper as h`) is the imported name."""
    call = index.call(edge.path, edge.call)
    binding = index.files[edge.path].bindings.get(call.name) if not call.receiver else None
    return binding.name if binding is not None and binding.name not in ("", "*", "default") else call.name


def _defs_text(index: CodeIndex, refs: list[DefRef]) -> str:
    shown = [f"{r.path}:{index.symbol(r).line} ({index.symbol(r).kind} {index.symbol(r).qualname})" for r in refs[:5]]
    more = f" and {len(refs) - 5} more" if len(refs) > 5 else ""
    return f"{len(refs)} definition{'s' if len(refs) != 1 else ''}: " + "; ".join(shown) + more


def _suggest(index: CodeIndex, name: str) -> str:
    near = index.names_like(name)
    return f" Names like it that are defined: {', '.join(near)}." if near else ""


def _file_skeleton(rel: str, facts: FileFacts) -> list[str]:
    shown = [s for s in facts.symbols if s.kind != "declaration" or facts.lang in ("c", "cpp")]
    head = f"File: {rel}  ({facts.lang}, {facts.lines} lines, {len(shown)} definitions)"
    lines = [head]
    if facts.problem:
        lines.append(f"  ({facts.problem})")
    depth: dict[int, int] = {}
    for i, symbol in enumerate(facts.symbols):
        level = depth.get(symbol.parent, -1) + 1 if symbol.parent >= 0 else 0
        depth[i] = level
        if symbol.kind == "declaration" and facts.lang not in ("c", "cpp"):
            continue
        doc = f"  — {symbol.doc}" if symbol.doc else ""
        lines.append(f"{'  ' * (level + 1)}{symbol.line}: {symbol.signature or symbol.qualname}{doc}")
    if not shown and not facts.problem:
        lines.append("  (no definitions: module-level code only)")
    return lines


def _hit_line(path: str, facts: FileFacts, chunk_index: int) -> str:
    chunk = facts.chunks[chunk_index]
    if chunk.symbol >= 0:
        symbol = facts.symbols[chunk.symbol]
        doc = f" — {symbol.doc}" if symbol.doc else ""
        return f"{path}:{chunk.line}: {symbol.kind} {symbol.qualname} (lines {chunk.line}-{chunk.end_line}) — " \
               f"{symbol.signature}{doc}"
    return f"{path}:{chunk.line}: lines {chunk.line}-{chunk.end_line} (text outside definitions)"


def _paged(lines: list[str], offset: int, tool: str) -> str:
    page = lines[offset:offset + MAX_LINES]
    text = "\n".join(page)
    if len(text) > MAX_ANSWER_CHARS:
        kept, size = [], 0
        for line in page:
            size += len(line) + 1
            if size > MAX_ANSWER_CHARS:
                break
            kept.append(line)
        page, text = kept, "\n".join(kept)
    shown_to = offset + len(page)
    if shown_to < len(lines):
        text += f"\n[lines {offset + 1}-{shown_to} of {len(lines)}: call {tool} again with offset={shown_to}]"
    elif offset and not page:
        text = f"[offset {offset} is past the end: {len(lines)} lines in all]"
    return text


def _bounded_text(text: str) -> str:
    if len(text) <= MAX_ANSWER_CHARS:
        return text
    cut = text.rfind("\n", 0, MAX_ANSWER_CHARS)
    end = cut if cut > 0 else MAX_ANSWER_CHARS
    return text[:end] + "\n[cut: the answer was longer; narrow it with `path` or page with `offset`]"


def _bounded(value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise Refused(f"expected a whole number from {low} to {high}, got {value!r}"[:200])
    return max(low, min(high, value))


def _under(path: str, prefix: str) -> bool:
    return not prefix or path == prefix or path.startswith(prefix + "/")
