"""The languages the code server parses: file extensions, the grammar wheel of each, and one tree-sitter query per
language naming what the index keeps — definitions (`@def.<kind>` with `@name`, `@body`), call sites (`@call` with
`@callee` and, when the call goes through something, `@recv`) and imports (`@import`).

Matching runs in tree-sitter's C code; Python sees only the captured nodes, never walks the tree (a file of 100 000
nested brackets costs no recursion here). Each grammar comes from its own wheel, which ships the compiled parser:
nothing is downloaded at run time.
"""

from __future__ import annotations

import importlib
import threading
from dataclasses import dataclass
from typing import Any

__all__ = ["LANGUAGES", "TEXT_EXTENSIONS", "LanguageSpec", "compiled", "language_of"]


@dataclass(frozen=True, slots=True)
class LanguageSpec:
    name: str
    extensions: tuple[str, ...]
    module: str  # the grammar wheel's module
    entry: str  # its function returning the language
    query: str


_JS_COMMON = """
(function_declaration name: (_) @name body: (_) @body) @def.function
(generator_function_declaration name: (_) @name body: (_) @body) @def.function
(class_declaration name: (_) @name body: (_) @body) @def.class
(method_definition name: (_) @name body: (_) @body) @def.method
(variable_declarator name: (identifier) @name value: (arrow_function body: (_) @body)) @def.function
(variable_declarator name: (identifier) @name value: (function_expression body: (_) @body)) @def.function
(call_expression function: (identifier) @callee) @call
(call_expression function: (member_expression object: (_) @recv property: (_) @callee)) @call
(new_expression constructor: (identifier) @callee) @call
(import_statement) @import
"""

_TS_EXTRA = """
(interface_declaration name: (_) @name body: (_) @body) @def.interface
(type_alias_declaration name: (_) @name) @def.type
(enum_declaration name: (_) @name body: (_) @body) @def.enum
(abstract_class_declaration name: (_) @name body: (_) @body) @def.class
(function_signature name: (_) @name) @def.function
(method_signature name: (_) @name) @def.method
(abstract_method_signature name: (_) @name) @def.method
"""

_C_COMMON = """
(function_definition declarator: (_) @decl body: (_) @body) @def.function
(declaration declarator: (function_declarator) @decl) @def.declaration
(struct_specifier name: (_) @name body: (_) @body) @def.struct
(enum_specifier name: (_) @name body: (_) @body) @def.enum
(union_specifier name: (_) @name body: (_) @body) @def.struct
(type_definition declarator: (type_identifier) @name) @def.type
(call_expression function: (identifier) @callee) @call
(call_expression function: (field_expression argument: (_) @recv field: (_) @callee)) @call
(preproc_include path: (_) @path) @import
"""

_CPP_EXTRA = """
(class_specifier name: (_) @name body: (_) @body) @def.class
(namespace_definition name: (_) @name body: (_) @body) @def.namespace
(field_declaration declarator: (function_declarator) @decl) @def.declaration
(call_expression function: (qualified_identifier scope: (_) @recv name: (_) @callee)) @call
(call_expression function: (template_function name: (_) @callee)) @call
(new_expression type: (_) @callee) @call
"""

LANGUAGES: tuple[LanguageSpec, ...] = (
    LanguageSpec("python", (".py", ".pyi"), "tree_sitter_python", "language", """
(function_definition name: (_) @name body: (_) @body) @def.function
(class_definition name: (_) @name body: (_) @body) @def.class
(call function: (identifier) @callee) @call
(call function: (attribute object: (_) @recv attribute: (_) @callee)) @call
(import_statement) @import
(import_from_statement) @import
"""),
    LanguageSpec("javascript", (".js", ".jsx", ".mjs", ".cjs"), "tree_sitter_javascript", "language", _JS_COMMON),
    LanguageSpec("typescript", (".ts", ".mts", ".cts"), "tree_sitter_typescript", "language_typescript",
                 _JS_COMMON + _TS_EXTRA),
    LanguageSpec("tsx", (".tsx",), "tree_sitter_typescript", "language_tsx", _JS_COMMON + _TS_EXTRA),
    LanguageSpec("go", (".go",), "tree_sitter_go", "language", """
(function_declaration name: (_) @name body: (_) @body) @def.function
(method_declaration receiver: (_) @owner name: (_) @name body: (_) @body) @def.method
(type_spec name: (_) @name type: (_) @shape) @def.type
(call_expression function: (identifier) @callee) @call
(call_expression function: (selector_expression operand: (_) @recv field: (_) @callee)) @call
(import_spec) @import
"""),
    LanguageSpec("rust", (".rs",), "tree_sitter_rust", "language", """
(function_item name: (_) @name body: (_) @body) @def.function
(function_signature_item name: (_) @name) @def.function
(struct_item name: (_) @name) @def.struct
(enum_item name: (_) @name) @def.enum
(trait_item name: (_) @name body: (_) @body) @def.trait
(impl_item type: (_) @name body: (_) @body) @def.impl
(mod_item name: (_) @name body: (_) @body) @def.module
(type_item name: (_) @name) @def.type
(macro_definition name: (_) @name) @def.macro
(call_expression function: (identifier) @callee) @call
(call_expression function: (scoped_identifier path: (_) @recv name: (_) @callee)) @call
(call_expression function: (field_expression value: (_) @recv field: (_) @callee)) @call
(use_declaration) @import
"""),
    LanguageSpec("java", (".java",), "tree_sitter_java", "language", """
(class_declaration name: (_) @name body: (_) @body) @def.class
(interface_declaration name: (_) @name body: (_) @body) @def.interface
(enum_declaration name: (_) @name body: (_) @body) @def.enum
(record_declaration name: (_) @name body: (_) @body) @def.class
(method_declaration name: (_) @name body: (_) @body) @def.method
(method_declaration name: (_) @name !body) @def.method
(constructor_declaration name: (_) @name body: (_) @body) @def.method
(method_invocation object: (_) @recv name: (_) @callee) @call
(method_invocation !object name: (_) @callee) @call
(object_creation_expression type: (_) @callee) @call
(import_declaration) @import
"""),
    LanguageSpec("c", (".c", ".h"), "tree_sitter_c", "language", _C_COMMON),
    LanguageSpec("cpp", (".cc", ".cpp", ".cxx", ".c++", ".hh", ".hpp", ".hxx", ".h++", ".ipp"), "tree_sitter_cpp",
                 "language", _C_COMMON + _CPP_EXTRA),
)

# Text the ranked search reads as well (in windows of lines), without definitions or calls.
TEXT_EXTENSIONS = (".md", ".rst", ".txt", ".toml", ".yaml", ".yml", ".cfg", ".ini")

_BY_EXTENSION = {ext: spec for spec in LANGUAGES for ext in spec.extensions}
_COMPILED: dict[str, tuple[Any, Any]] = {}
_LOCK = threading.Lock()


def language_of(name: str) -> LanguageSpec | None:
    """The language of a file name by its extension (lower-cased), None for one the server does not parse."""
    dot = name.rfind(".")
    return _BY_EXTENSION.get(name[dot:].lower()) if dot > 0 else None


def compiled(spec: LanguageSpec) -> tuple[Any, Any]:
    """(tree_sitter.Language, tree_sitter.Query) of `spec`, loaded once per process."""
    found = _COMPILED.get(spec.name)
    if found is not None:
        return found
    with _LOCK:
        found = _COMPILED.get(spec.name)
        if found is None:
            import tree_sitter

            grammar = getattr(importlib.import_module(spec.module), spec.entry)()
            language = tree_sitter.Language(grammar)
            found = _COMPILED[spec.name] = (language, tree_sitter.Query(language, spec.query))
    return found
