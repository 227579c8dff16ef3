"""Which module a file is, and which module an import names, both as "/"-separated keys, so that an import can be
matched to the project's files whatever the language spells: `pkg.mod` (Python), `./util` (JavaScript, resolved
against the importing file), `crate::a::b` (Rust), `com.x.Foo` (Java), `"dir/file.h"` (C), a Go import path.

Matching is by whole trailing segments (`src/pkg/mod` is the file of `import pkg.mod`); a Go import path is matched
the other way round (`example.com/proj/util` names the directory `util`). No key ever claims a file outside the
project: an import that matches nothing is a library's.
"""

from __future__ import annotations

import posixpath

__all__ = ["file_module_key", "import_matches", "resolve_relative"]

_STRIP = {"python": (".pyi", ".py"), "javascript": (".jsx", ".js", ".mjs", ".cjs"),
          "typescript": (".ts", ".mts", ".cts", ".d"), "tsx": (".tsx",), "rust": (".rs",), "java": (".java",)}
_INDEX_NAMES = {"python": ("__init__",), "javascript": ("index",), "typescript": ("index",), "tsx": ("index",),
                "rust": ("mod", "lib", "main")}


def file_module_key(path: str, lang: str) -> str:
    """The key of the module the file at `path` (relative, "/"-separated) is."""
    if lang == "go":
        return posixpath.dirname(path)
    if lang in ("c", "cpp"):
        return path
    key = path
    for ext in _STRIP.get(lang, ()):
        if key.endswith(ext):
            key = key[: -len(ext)]
            break
    if lang == "typescript" and key.endswith(".d"):  # foo.d.ts declares foo
        key = key[:-2]
    head, _, last = key.rpartition("/")
    if last in _INDEX_NAMES.get(lang, ()):
        key = head
    return key


def resolve_relative(importer: str, spec: str) -> str:
    """`spec` ("./x", "../y/z") against the directory of `importer`, without an extension; "" when it climbs out
    of the project."""
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(importer), spec))
    if joined.startswith("../") or joined == "..":
        return ""
    base, ext = posixpath.splitext(joined)
    return base if ext in (".js", ".jsx", ".ts", ".tsx", ".mjs", ".cjs", ".mts", ".cts") else joined


def import_matches(file_key: str, import_key: str, lang: str) -> bool:
    """Whether the file whose module key is `file_key` is the one an import of `import_key` names."""
    if not import_key:
        return False
    if lang == "go":
        return bool(file_key) and _ends_with(import_key, file_key)
    return _ends_with(file_key, import_key)


def _ends_with(longer: str, suffix: str) -> bool:
    return longer == suffix or longer.endswith("/" + suffix)
