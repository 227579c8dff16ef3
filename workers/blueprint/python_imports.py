"""The import statements of a Python file, parsed from its text with two regular expressions.

The blueprint's derived layer needs the modules each file imports, for a whole repository, in milliseconds (a full
parse of every file costs a hundred times more). So the source is scanned twice: once for what can hide an
"import" at the start of a line — triple-quoted strings, found while single-quoted strings and comments are skipped
whole, so `'\"\"\"'` or `# \"\"\"` opens nothing — and once for `import` / `from … import` statements at the start
of a line, those inside a triple-quoted string dropped. For `from` statements the imported names are read too
(`from . import board_read` imports the module `board_read` of the package), with parentheses, comments and
continuation lines. Imports inside functions and `if` blocks count: they are dependencies all the same.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass

__all__ = ["PythonImport", "python_imports"]

_HIDING = re.compile(r"""'''(?:\\.|[^\\])*?'''|\"\"\"(?:\\.|[^\\])*?\"\"\""""
                     r"""|'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*"|#[^\n]*""")
_STATEMENT = re.compile(r"^[ \t]*(?:from[ \t]+(?P<from>\.*[A-Za-z_][\w.]*|\.+)[ \t]+import\b"
                        r"|import[ \t]+(?=[A-Za-z_]))", re.MULTILINE)
_NAME_LIST = re.compile(r"[ \t]*(?:\((?P<paren>[^)]*)\)|(?P<line>(?:[^\n\\]|\\\n)*))")
_COMMENT = re.compile(r"#[^\n]*")
_DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")


@dataclass(frozen=True, slots=True)
class PythonImport:
    """One statement: the leading dots of a relative `from`, the dotted module after them ("" for `import x` and
    for `from . import x`), and the dotted names it names (`import a.b, c` → a.b, c; `from m import x` → x)."""

    level: int
    module: str
    names: tuple[str, ...]
    line: int


def _names(text: str) -> tuple[str, ...]:
    text = _COMMENT.sub("", text.replace("\\\n", " ")).split(";")[0]
    found = []
    for part in text.split(","):
        words = part.split()
        if words and _DOTTED.fullmatch(words[0]):
            found.append(words[0])
    return tuple(found)


def _hidden_spans(source: str, until: int) -> tuple[list[int], list[int]]:
    """(starts, ends) of the triple-quoted strings that start before `until`, in order."""
    starts: list[int] = []
    ends: list[int] = []
    for match in _HIDING.finditer(source, 0, len(source)):
        if match.start() > until:
            break
        text = match.group()
        if text.startswith(("'''", '"""')):
            starts.append(match.start())
            ends.append(match.end())
    return starts, ends


def python_imports(source: str) -> list[PythonImport]:
    """Every import statement of `source`, in order."""
    statements = list(_STATEMENT.finditer(source))
    if not statements:
        return []
    # Only what comes before the last statement can hide one: most files' imports are at the top.
    last = statements[-1].start()
    starts, ends = _hidden_spans(source, last) if ("'''" in source or '"""' in source) else ([], [])
    found: list[PythonImport] = []
    line, counted = 1, 0
    for match in statements:
        at = match.start()
        inside = bisect_right(starts, at) - 1
        if inside >= 0 and at < ends[inside]:
            continue
        rest = _NAME_LIST.match(source, match.end())
        listed = (rest.group("paren") or rest.group("line") or "") if rest else ""
        line += source.count("\n", counted, at)
        counted = at
        spec = match.group("from")
        if spec is None:
            found.append(PythonImport(0, "", _names(listed), line))
        else:
            level = len(spec) - len(spec.lstrip("."))
            found.append(PythonImport(level, spec[level:], _names(listed), line))
    return found
