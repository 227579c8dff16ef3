"""A ratchet on hand-typed vocabulary: no new string literal in `client/`, `daemon/` or `tests/` spells a
distinctive wire word (an event type, an error code, a stop reason, the authorisation question kind);
code names the `yagent.ipc.vocabulary` member instead, so a renamed or removed word fails at import, not
on the wire.

The literals there today are listed in `vocabulary_ratchet.allowlist` (path, value, count). The test fails
on any literal beyond that list, and also when the list names more than exists: it only ever shrinks, and
whoever removes a literal lowers its line in the same commit.

Docstrings are prose and do not count; every other string constant does, the literal parts of f-strings
included. The wire spelling itself is pinned by `tests/ipc/test_vocabulary_golden.py`.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

from yagent.ipc.vocabulary import ErrorCode, EventType, QuestionKind, StopReason

REPO = Path(__file__).resolve().parent.parent
SCANNED = ("client", "daemon", "tests")
ALLOWLIST = Path(__file__).parent / "vocabulary_ratchet.allowlist"

# Distinctive: a snake_case compound, which no prose or unrelated key spells by accident. Single words are
# left out because they mean other things too: "thinking" is a tool, a provider's reasoning key and a TUI
# entry kind; "log", "busy" (a scripted-agent step, an sd_notify status), "internal", "malformed",
# "stopping", and stop reasons like "paused" or "cancelled" are ordinary words.
# `agent_exit` is left out as well: it is also the name of the tool that ends a run, which is what most of
# its literals (the model's tool calls in test scripts) name.
# `authorize` is a single word that only ever names the question kind.
_AMBIGUOUS = {StopReason.AGENT_EXIT}
DISTINCTIVE: dict[str, str] = {
    member.value: f"{enum.__name__}.{member.name}"
    for enum in (EventType, ErrorCode, StopReason)
    for member in enum
    if "_" in member.value and member not in _AMBIGUOUS
}
DISTINCTIVE[QuestionKind.AUTHORIZE.value] = "QuestionKind.AUTHORIZE"

Counts = dict[str, Counter[str]]  # path -> value -> literals


def _docstring_nodes(tree: ast.AST) -> set[int]:
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                found.add(id(first.value))
    return found


def vocabulary_literals(source: str) -> Counter[str]:
    """The distinctive vocabulary values spelled as string constants in `source`, docstrings excepted."""
    tree = ast.parse(source)
    docstrings = _docstring_nodes(tree)
    return Counter(node.value for node in ast.walk(tree)
                   if isinstance(node, ast.Constant) and isinstance(node.value, str)
                   and node.value in DISTINCTIVE and id(node) not in docstrings)


def scan(root: Path, folders: tuple[str, ...]) -> Counts:
    found: Counts = {}
    for folder in folders:
        for path in sorted((root / folder).rglob("*.py")):
            counts = vocabulary_literals(path.read_text(encoding="utf-8"))
            if counts:
                found[path.relative_to(root).as_posix()] = counts
    return found


def read_allowlist(path: Path) -> Counts:
    allowed: Counts = {}
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) != 3 or not parts[2].isdigit():
            raise AssertionError(f"{path.name}:{number}: expected `PATH VALUE COUNT`, got {raw!r}")
        file, value, count = parts
        allowed.setdefault(file, Counter())[value] += int(count)
    return allowed


def compare(found: Counts, allowed: Counts) -> tuple[list[str], list[str]]:
    """(literals beyond the allowlist, allowlist lines that name more than exists)."""
    new, stale = [], []
    for file in sorted(found.keys() | allowed.keys()):
        have, may = found.get(file, Counter()), allowed.get(file, Counter())
        for value in sorted(have.keys() | may.keys()):
            if have[value] > may[value]:
                new.append(f"{file}: {value!r} ×{have[value] - may[value]} — use {DISTINCTIVE.get(value, value)}")
            elif have[value] < may[value]:
                stale.append(f"{file} {value} {may[value]} → {have[value]}" if have[value]
                             else f"{file} {value} {may[value]} → delete the line")
    return new, stale


def test_no_new_hand_typed_vocabulary_and_the_allowlist_only_shrinks() -> None:
    new, stale = compare(scan(REPO, SCANNED), read_allowlist(ALLOWLIST))
    problems = []
    if new:
        problems.append("string literals spell the vocabulary; name the enum member instead:\n  "
                        + "\n  ".join(new))
    if stale:
        problems.append(f"fewer literals than {ALLOWLIST.name} allows: lower it, so they cannot come back:\n  "
                        + "\n  ".join(stale))
    assert not problems, "\n".join(problems)


def test_the_ratchet_counts_literals_and_f_string_parts_but_not_docstrings(tmp_path: Path) -> None:
    value = EventType.RUN_FINISHED.value
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "waits.py").write_text(
        f'"""Waits for {value}."""\n\n'
        f"def wait(events):\n"
        f'    """Returns the {value} events."""\n'
        f'    label = f"{value}{{len(events)}}"\n'
        f'    return of_type(events, "{value}"), label\n',
        encoding="utf-8")
    (tmp_path / "pkg" / "prose.py").write_text(f'"""Only a docstring names {value}."""\n', encoding="utf-8")
    found = scan(tmp_path, ("pkg",))
    assert found == {"pkg/waits.py": Counter({value: 2})}
    new, stale = compare(found, {})
    assert new == [f"pkg/waits.py: {value!r} ×2 — use EventType.RUN_FINISHED"] and stale == []
    new, stale = compare({}, {"pkg/waits.py": Counter({value: 1})})
    assert new == [] and stale == [f"pkg/waits.py {value} 1 → delete the line"]
