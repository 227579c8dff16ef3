"""From a file's bytes to its facts (`facts.FileFacts`): one tree-sitter parse, one query over the tree, and a pass over
the captured nodes only.

A parse has a deadline (`PARSE_SECONDS`): a file that takes longer is recorded as not parsed, with why. A file with
syntax errors keeps what the parser recovered and says so (`problem`), so answers can say their facts about it may
be incomplete. Everything read from the tree is bounded: names, signatures and receivers are cut, a file yields at
most `MAX_SYMBOLS` definitions and `MAX_CALLS` call sites.
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
from bisect import bisect_right
from typing import Any

from .facts import CONTAINER_KINDS, CallSite, Chunk, FileFacts, ImportBinding, Symbol
from .languages import LanguageSpec, compiled
from .module_keys import resolve_relative
from .terms import bag_of_terms

__all__ = ["MAX_CALLS", "MAX_SYMBOLS", "PARSE_SECONDS", "extract", "extract_text", "imports_only"]

PARSE_SECONDS = 5.0
MAX_SYMBOLS = 20_000
MAX_CALLS = 100_000
TEXT_WINDOW = 40  # lines per search chunk of a text file (or of a file's code outside its definitions)
_SIGNATURE_BYTES = 600
_SIGNATURE_CHARS = 240
_DOC_CHARS = 160
_RECEIVER_CHARS = 120
_IDENT = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_SPACES = re.compile(r"\s+")
_CHUNK_KINDS = frozenset({"function", "method", "class", "struct", "interface", "enum", "trait", "type", "macro"})
_C_DECLARATORS = frozenset({"pointer_declarator", "function_declarator", "parenthesized_declarator",
                            "reference_declarator", "array_declarator", "attributed_declarator"})
_WRAPPERS = frozenset({"decorated_definition", "export_statement", "template_declaration", "type_declaration"})


def extract(source: bytes, spec: LanguageSpec, path: str) -> FileFacts:
    """The facts of the file at `path` (relative to the project root, for resolving relative imports)."""
    import tree_sitter

    language, query = compiled(spec)
    lines = source.count(b"\n") + (1 if source and not source.endswith(b"\n") else 0)
    parser = tree_sitter.Parser(language)
    deadline = time.monotonic() + PARSE_SECONDS
    try:
        tree = parser.parse(lambda offset, _point: source[offset:offset + 262144],
                            progress_callback=lambda _offset, _errors: time.monotonic() > deadline)
    except ValueError:
        tree = None
    if tree is None:
        facts = FileFacts(spec.name, lines, f"not parsed: parsing took longer than {PARSE_SECONDS:.0f}s")
        facts.chunks = _text_chunks(source, path)
        return facts
    root = tree.root_node
    problem = ""
    if root.has_error:
        problem = f"syntax errors (first near line {_first_error_line(root)}): what it defines may be incomplete"
    defs: list[tuple[str, Any, dict[str, list[Any]]]] = []
    calls: list[dict[str, list[Any]]] = []
    imports: list[Any] = []
    for _pattern, captures in tree_sitter.QueryCursor(query).matches(root):
        for key, nodes in captures.items():
            if key.startswith("def."):
                defs.append((key[4:], nodes[0], captures))
            elif key == "call":
                calls.append(captures)
            elif key == "import":
                imports.append(nodes[0])
    facts = FileFacts(spec.name, lines, problem)
    _SOURCE.data = source
    facts.symbols = _symbols(defs[:MAX_SYMBOLS], source, spec.name)
    starts = [s.start_byte for s in facts.symbols]
    facts.calls = _calls(calls[:MAX_CALLS], facts.symbols, starts)
    for node in imports:
        facts.imports.extend(_imports(node, spec.name, path))
    facts.chunks = _chunks(facts, source, path)
    return facts


def imports_only(source: bytes, spec: LanguageSpec, path: str) -> list[ImportBinding]:
    """The file's imports alone, by the same rules `extract` reads them with, from a query that asks for nothing
    else (the repository blueprint's import edges); [] when the parse runs past its deadline."""
    import tree_sitter

    language, query = _imports_query(spec)
    parser = tree_sitter.Parser(language)
    deadline = time.monotonic() + PARSE_SECONDS
    try:
        tree = parser.parse(lambda offset, _point: source[offset:offset + 262144],
                            progress_callback=lambda _offset, _errors: time.monotonic() > deadline)
    except ValueError:
        return []
    if tree is None:
        return []
    _SOURCE.data = source  # the bytes `_text` slices nodes from, as in `extract`
    found: list[ImportBinding] = []
    for node in tree_sitter.QueryCursor(query).captures(tree.root_node).get("import", []):
        found += _imports(node, spec.name, path)
    return found


_IMPORT_QUERIES: dict[str, tuple[Any, Any]] = {}


def _imports_query(spec: LanguageSpec) -> tuple[Any, Any]:
    found = _IMPORT_QUERIES.get(spec.name)
    if found is None:
        import tree_sitter

        language, _full = compiled(spec)
        patterns = "\n".join(line for line in spec.query.splitlines() if line.strip().endswith("@import"))
        found = _IMPORT_QUERIES[spec.name] = (language, tree_sitter.Query(language, patterns))
    return found


def extract_text(source: bytes, path: str) -> FileFacts:
    """A text file's facts: no definitions, its windows of lines as search chunks."""
    lines = source.count(b"\n") + (1 if source and not source.endswith(b"\n") else 0)
    facts = FileFacts("text", lines)
    facts.chunks = _text_chunks(source, path)
    return facts


# -- definitions ----------------------------------------------------------------------------------------


# The bytes being extracted, per thread (the index's thread and a query parsing one file may extract at once):
# `_text` slices what it needs from them, where `node.text` would copy a whole node (a 5 000-line class) each time.
_SOURCE = threading.local()


def _text(node: Any, limit: int = 200) -> str:
    start = node.start_byte
    return _SOURCE.data[start:min(node.end_byte, start + limit * 4)].decode("utf-8", "replace")[:limit]


def _symbols(defs: list[tuple[str, Any, dict[str, list[Any]]]], source: bytes, lang: str) -> list[Symbol]:
    found: list[tuple[int, int, Symbol]] = []
    seen: set[tuple[int, int]] = set()
    for kind, node, captures in defs:
        key = (node.start_byte, node.end_byte)
        if key in seen:
            continue
        name, owner = _name_of(kind, captures, lang)
        if not name:
            continue
        seen.add(key)
        if kind == "type" and "shape" in captures:
            shape = captures["shape"][0].type
            kind = "struct" if shape == "struct_type" else "interface" if shape == "interface_type" else "type"
        body = captures.get("body", [None])[0]
        symbol = Symbol(name=name, kind=kind, qualname=f"{owner}.{name}" if owner else name,
                        line=node.start_point[0] + 1, end_line=node.end_point[0] + 1, start_byte=node.start_byte,
                        end_byte=node.end_byte, signature=_signature(source, node, body),
                        doc=_doc(node, body, lang), parent=-1)
        found.append((node.start_byte, -node.end_byte, symbol))
    found.sort(key=lambda item: (item[0], item[1]))
    symbols = [item[2] for item in found]
    stack: list[int] = []
    for index, symbol in enumerate(symbols):
        while stack and symbols[stack[-1]].end_byte < symbol.end_byte:
            stack.pop()
        if stack:
            parent = symbols[stack[-1]]
            symbol.parent = stack[-1]
            if "." not in symbol.qualname:  # an explicit owner (Go receiver, C++ A::b) is kept as written
                symbol.qualname = f"{parent.qualname}.{symbol.name}"
            if symbol.kind == "function" and parent.kind in CONTAINER_KINDS:
                symbol.kind = "method"
        stack.append(index)
    return symbols


def _name_of(kind: str, captures: dict[str, list[Any]], lang: str) -> tuple[str, str]:
    """(name, explicit owner) of a definition."""
    if "decl" in captures:  # C and C++: the name sits inside nested declarators
        node = captures["decl"][0]
        while node is not None and node.type in _C_DECLARATORS:
            node = node.child_by_field_name("declarator")
        if node is None:
            return "", ""
        text = _text(node)
        if "::" in text:
            owner, _, name = text.rpartition("::")
            return _ident(name), _last_ident(owner)
        return (_ident(text) if node.type in ("identifier", "field_identifier") else text.strip()[:120]), ""
    node = captures.get("name", [None])[0]
    if node is None:
        return "", ""
    if kind == "impl":  # `impl<T> Trait for Foo<T>`: the type is the name its methods are qualified by
        return _last_ident(_text(node).split("<", 1)[0]), ""
    name = _text(node, 120)
    owner = ""
    if "owner" in captures:  # a Go method's receiver `(s *Server)`
        owner = _last_ident(_text(captures["owner"][0]).split("[", 1)[0])
    return name.strip(), owner


def _ident(text: str) -> str:
    match = _IDENT.search(text)
    return match.group() if match else ""


def _last_ident(text: str) -> str:
    found = _IDENT.findall(text)
    return found[-1] if found else ""


def _signature(source: bytes, node: Any, body: Any) -> str:
    end = body.start_byte if body is not None else node.end_byte
    raw = source[node.start_byte:min(end, node.start_byte + _SIGNATURE_BYTES)].decode("utf-8", "replace")
    text = _SPACES.sub(" ", raw).strip().rstrip("{").rstrip()
    if body is None and len(text) > _SIGNATURE_CHARS:
        text = text.split("{", 1)[0].strip()
    return text[:_SIGNATURE_CHARS]


def _doc(node: Any, body: Any, lang: str) -> str:
    if lang == "python" and body is not None:
        first = body.named_children[0] if body.named_child_count else None
        if first is not None and first.type == "expression_statement" and first.named_child_count \
                and first.named_children[0].type == "string":
            return _first_line(_text(first.named_children[0], 2000))
        return ""
    anchor = node
    while anchor.parent is not None and anchor.parent.type in _WRAPPERS:
        anchor = anchor.parent
    comment = anchor.prev_named_sibling
    if comment is None or "comment" not in comment.type or comment.end_point[0] < anchor.start_point[0] - 1:
        return ""
    while True:  # the first of the comment lines right above the definition
        before = comment.prev_named_sibling
        if before is None or "comment" not in before.type or before.end_point[0] < comment.start_point[0] - 1:
            break
        comment = before
    return _first_line(_text(comment, 2000))


def _first_line(text: str) -> str:
    for raw in text.splitlines():
        line = raw.strip().lstrip("/*#!").strip()
        for quote in ('"""', "'''", '"', "'"):
            if line.startswith(quote):
                line = line[len(quote):]
            if line.endswith(quote):
                line = line[: -len(quote)]
        line = line.strip().rstrip("*/").strip()
        if line:
            return line[:_DOC_CHARS]
    return ""


def _first_error_line(root: Any) -> int:
    cursor = root.walk()
    while True:  # down the first branch that holds an error: no recursion, a bounded descent
        node = cursor.node
        if node.is_error or node.is_missing:
            return node.start_point[0] + 1
        for child in node.children:
            if child.has_error or child.is_missing:
                cursor.reset(child)
                break
        else:
            return node.start_point[0] + 1


# -- calls ----------------------------------------------------------------------------------------------


def _calls(captured: list[dict[str, list[Any]]], symbols: list[Symbol], starts: list[int]) -> list[CallSite]:
    calls: list[CallSite] = []
    for captures in captured:
        callee = captures.get("callee", [None])[0]
        if callee is None:
            continue
        name = _last_ident(_text(callee).split("<", 1)[0])
        if not name:
            continue
        receiver = ""
        if "recv" in captures:
            receiver = _SPACES.sub(" ", _text(captures["recv"][0], _RECEIVER_CHARS)).strip()
        position = callee.start_byte
        calls.append(CallSite(name, receiver, callee.start_point[0] + 1, _enclosing(symbols, starts, position)))
    return calls


def _enclosing(symbols: list[Symbol], starts: list[int], position: int) -> int:
    index = bisect_right(starts, position) - 1
    while index >= 0:
        if symbols[index].end_byte > position:
            return index
        index = symbols[index].parent
    return -1


# -- imports --------------------------------------------------------------------------------------------


def _imports(node: Any, lang: str, path: str) -> list[ImportBinding]:
    line = node.start_point[0] + 1
    if lang == "python":
        return _python_imports(node, path, line)
    if lang in ("javascript", "typescript", "tsx"):
        return _js_imports(node, path, line)
    if lang == "go":
        return _go_import(node, line)
    if lang == "rust":
        return _rust_imports(_text(node, 2000), path, line)
    if lang == "java":
        return _java_import(_text(node, 1000), line)
    if lang in ("c", "cpp"):
        spec = _text(node.child_by_field_name("path") or node, 400).strip().strip('"<>')
        return [ImportBinding("", spec, "", line)] if spec else []
    return []


def _python_imports(node: Any, path: str, line: int) -> list[ImportBinding]:
    out: list[ImportBinding] = []
    if node.type == "import_statement":
        for child in node.named_children:
            if child.type == "aliased_import":
                module = _text(child.child_by_field_name("name") or child)
                alias = child.child_by_field_name("alias")
                out.append(ImportBinding(_text(alias) if alias else module, module.replace(".", "/"), "", line))
            elif child.type == "dotted_name":
                module = _text(child)
                out.append(ImportBinding(module, module.replace(".", "/"), "", line))
        return out
    module_node = node.child_by_field_name("module_name")
    module = _python_module(_text(module_node) if module_node else "", path)
    for child in node.named_children:
        if child == module_node:
            continue
        if child.type == "wildcard_import":
            out.append(ImportBinding("*", module, "*", line))
        elif child.type == "aliased_import":
            name = _text(child.child_by_field_name("name") or child)
            alias = child.child_by_field_name("alias")
            out.append(ImportBinding(_text(alias) if alias else name, module, name, line))
        elif child.type == "dotted_name":
            name = _text(child)
            out.append(ImportBinding(name, module, name, line))
    return out


def _python_module(spec: str, path: str) -> str:
    """`from ..a import b`: the module key `..a` names, relative to the package of `path`."""
    dots = len(spec) - len(spec.lstrip("."))
    rest = spec[dots:].replace(".", "/")
    if not dots:
        return rest
    package = path.rsplit("/", 1)[0] if "/" in path else ""
    for _ in range(dots - 1):
        package = package.rsplit("/", 1)[0] if "/" in package else ""
    return f"{package}/{rest}".strip("/") if rest else package


def _js_imports(node: Any, path: str, line: int) -> list[ImportBinding]:
    source = node.child_by_field_name("source")
    if source is None:
        return []
    spec = _text(source, 400).strip().strip("'\"`")
    module = resolve_relative(path, spec) if spec.startswith(".") else spec
    if not module:
        return []
    out: list[ImportBinding] = []
    clause = next((c for c in node.named_children if c.type == "import_clause"), None)
    if clause is None:
        return [ImportBinding("", module, "", line)]
    for part in clause.named_children:
        if part.type == "identifier":
            out.append(ImportBinding(_text(part), module, "default", line))
        elif part.type == "namespace_import":
            local = _last_ident(_text(part))
            if local:
                out.append(ImportBinding(local, module, "", line))
        elif part.type == "named_imports":
            for spec_node in part.named_children:
                if spec_node.type != "import_specifier":
                    continue
                name_node = spec_node.child_by_field_name("name")
                alias = spec_node.child_by_field_name("alias")
                name = _text(name_node) if name_node else ""
                if name:
                    out.append(ImportBinding(_text(alias) if alias else name, module, name, line))
    return out


def _go_import(node: Any, line: int) -> list[ImportBinding]:
    path_node = node.child_by_field_name("path")
    if path_node is None:
        return []
    module = _text(path_node, 400).strip().strip('"`')
    name_node = node.child_by_field_name("name")
    local = _text(name_node) if name_node is not None else module.rsplit("/", 1)[-1]
    if local in ("_",):
        return []
    return [ImportBinding(local, module, "", line)]


def _rust_imports(text: str, path: str, line: int) -> list[ImportBinding]:
    body = text.strip()
    body = re.sub(r"^(pub(\([^)]*\))?\s+)?use\s+", "", body).rstrip(";").strip()
    out: list[ImportBinding] = []
    for full, alias in _rust_paths(body, "")[:256]:
        parts = [p for p in full.split("::") if p]
        if not parts:
            continue
        parts = _rust_absolute(parts, path)
        name = parts[-1]
        if name == "*":
            out.append(ImportBinding("*", "/".join(parts[:-1]), "*", line))
        elif name == "self":
            module = "/".join(parts[:-1])
            out.append(ImportBinding(alias or (parts[-2] if len(parts) > 1 else ""), module, "", line))
        else:
            out.append(ImportBinding(alias or name, "/".join(parts[:-1]), name, line))
    return out


def _rust_paths(text: str, prefix: str, depth: int = 0) -> list[tuple[str, str]]:
    """`a::{b, c::d as e}` → [("a::b", ""), ("a::c::d", "e")]; nested braces to a bounded depth."""
    if depth > 8:
        return []
    text = text.strip()
    brace = text.find("{")
    if brace < 0:
        name, _, alias = text.partition(" as ")
        return [(prefix + name.strip(), alias.strip())] if name.strip() else []
    head = prefix + text[:brace]
    inner = text[brace + 1: text.rfind("}")]
    out: list[tuple[str, str]] = []
    level, start = 0, 0
    for i, ch in enumerate(inner):
        if ch == "{":
            level += 1
        elif ch == "}":
            level -= 1
        elif ch == "," and level == 0:
            out += _rust_paths(inner[start:i], head, depth + 1)
            start = i + 1
    out += _rust_paths(inner[start:], head, depth + 1)
    return out


def _rust_absolute(parts: list[str], path: str) -> list[str]:
    from .module_keys import file_module_key

    here = file_module_key(path, "rust").split("/") if path else []
    if parts[0] == "crate":
        return parts[1:] or parts
    if parts[0] == "self":
        return [*here, *parts[1:]]
    if parts[0] == "super":
        up = here[:-1]
        rest = parts[1:]
        while rest and rest[0] == "super":
            up, rest = up[:-1], rest[1:]
        return [*up, *rest]
    return parts


def _java_import(text: str, line: int) -> list[ImportBinding]:
    body = re.sub(r"^import\s+(static\s+)?", "", text.strip()).rstrip(";").strip()
    parts = [p for p in body.split(".") if p]
    if len(parts) < 2:
        return []
    if parts[-1] == "*":
        return [ImportBinding("*", "/".join(parts[:-1]), "*", line)]
    return [ImportBinding(parts[-1], "/".join(parts[:-1]), parts[-1], line)]


# -- search chunks --------------------------------------------------------------------------------------


def _chunks(facts: FileFacts, source: bytes, path: str) -> list[Chunk]:
    chunks: list[Chunk] = []
    covered: list[tuple[int, int]] = []
    members: dict[int, list[str]] = {}
    for symbol in facts.symbols:
        if symbol.parent >= 0:
            members.setdefault(symbol.parent, []).append(symbol.name)
    for index, symbol in enumerate(facts.symbols):
        if symbol.parent == -1:
            covered.append((symbol.line, symbol.end_line))
        if symbol.kind not in _CHUNK_KINDS:
            continue
        body = source[symbol.start_byte:symbol.end_byte]
        text = body.decode("utf-8", "replace")
        names = ""
        if symbol.kind in CONTAINER_KINDS:  # a class is found by its name, doc and members, not by their bodies
            names = " ".join(members.get(index, ()))
            text = ""
        bag = bag_of_terms(symbol.qualname, symbol.signature, symbol.doc, names, text, weights=(3, 1, 2, 1, 1))
        chunks.append(Chunk(index, symbol.line, symbol.end_line, symbol.qualname, bag,
                            hashlib.blake2b(body, digest_size=16).digest()))
    chunks.extend(_text_chunks(source, path, covered, facts.imports))
    return chunks


def _text_chunks(source: bytes, path: str, covered: list[tuple[int, int]] | None = None,
                 imports: list[ImportBinding] | None = None) -> list[Chunk]:
    """Windows of up to `TEXT_WINDOW` lines of what no top-level definition covers (all of a text file); the
    first also carries the file's imports."""
    lines = source.decode("utf-8", "replace").splitlines()
    taken = bytearray(len(lines) + 1)
    for start, end in covered or ():
        taken[max(start - 1, 0):min(end, len(lines))] = b"\x01" * max(0, min(end, len(lines)) - max(start - 1, 0))
    chunks: list[Chunk] = []
    window: list[str] = []
    first = last = 0
    extra = " ".join(i.local or i.module for i in imports or ())

    def flush() -> None:
        nonlocal window, extra
        if window and len(chunks) < 500:
            chunks.append(_window_chunk(path, first, last, window, extra))
            extra = ""
        window = []

    for i, line in enumerate(lines):
        if taken[i] or not line.strip():  # a window of loose code may span the definitions between its lines
            continue
        if not window:
            first = i + 1
        window.append(line)
        last = i + 1
        if len(window) >= TEXT_WINDOW:
            flush()
    flush()
    return chunks


def _window_chunk(path: str, first: int, last: int, window: list[str], extra: str) -> Chunk:
    text = "\n".join(window)
    bag = bag_of_terms(path, extra, text, weights=(1, 1, 1))
    return Chunk(-1, first, last, f"{path}:{first}-{last}", bag,
                 hashlib.blake2b(text.encode("utf-8", "replace"), digest_size=16).digest())
