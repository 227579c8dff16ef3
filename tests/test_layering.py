"""The package boundaries of DESIGN §3, checked on the source: who may import whom."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

# package folder -> yagent packages it must never import
FORBIDDEN = {
    "ipc": ("yagent.daemon", "yagent.workers", "yagent.client"),
    "daemon": ("yagent.workers", "yagent.client"),
    "workers": ("yagent.daemon", "yagent.client"),
    "client": ("yagent.daemon", "yagent.workers"),
}

_IMPORT_CALLS = {"import_module", "__import__"}


def _package_of(path: Path, root: Path) -> str:
    """The package a file's relative imports start from: `daemon/x.py` and `daemon/__init__.py` → yagent.daemon."""
    module = ["yagent", *path.relative_to(root).with_suffix("").parts]
    return ".".join(module[:-1])  # a package's __init__ and its modules share the folder's package


def _resolve(name: str, level: int, package: str) -> str:
    """`from ..x import y` as an absolute name; past the top of the namespace it stays relative (a violation)."""
    if level == 0:
        return name
    base = package.split(".") if package else []
    if level - 1 >= len(base):
        return "." * level + name
    base = base[:len(base) - (level - 1)]
    return ".".join([*base, name] if name else base)


def _literal(node: ast.expr | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _call_import(node: ast.Call, package: str) -> str | None:
    """The module an `importlib.import_module("...")` or `__import__("...")` call with a literal name imports."""
    func = node.func
    called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    name = _literal(node.args[0]) if called in _IMPORT_CALLS and node.args else None
    if name is None:
        return None
    keywords = {k.arg: k.value for k in node.keywords}
    if called == "import_module":
        level = len(name) - len(name.lstrip("."))
        anchor = _literal(node.args[1] if len(node.args) > 1 else keywords.get("package"))
        return _resolve(name[level:], level, anchor if anchor is not None else package)
    level_node = node.args[4] if len(node.args) > 4 else keywords.get("level")
    level = level_node.value if isinstance(level_node, ast.Constant) and isinstance(level_node.value, int) else 0
    return _resolve(name, level, package)


def _imports(path: Path, package: str = "") -> list[tuple[int, str]]:
    """Every module `path` imports, as absolute names; relative forms are resolved against `package`."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = _resolve(node.module or "", node.level, package)
            if module == "yagent":  # a namespace: what is imported from it is a package
                found += [(node.lineno, f"yagent.{alias.name}") for alias in node.names]
            else:
                found.append((node.lineno, module))
        elif isinstance(node, ast.Call) and (called := _call_import(node, package)) is not None:
            found.append((node.lineno, called))
    return sorted(found, key=lambda item: item[0])  # ast.walk goes breadth-first; report in line order


def _violations(path: Path, root: Path) -> list[str]:
    folder = path.relative_to(root).parts[0]
    out = []
    for line, module in _imports(path, _package_of(path, root)):
        if module.startswith("."):
            out.append(f"{path.relative_to(root)}:{line} imports {module} (past the top of the yagent namespace)")
        elif any(module == b or module.startswith(b + ".") for b in FORBIDDEN[folder]):
            out.append(f"{path.relative_to(root)}:{line} imports {module}")
    return out


@pytest.mark.parametrize("folder", sorted(FORBIDDEN))
def test_package_imports_respect_the_layering(folder: str) -> None:
    violations = []
    files = sorted((REPO / folder).rglob("*.py"))
    assert files, f"no Python files under {folder}/"
    for path in files:
        violations += _violations(path, REPO)
    assert not violations, "\n".join(violations)


def test_the_checker_sees_a_violation(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from yagent.workers.entry import worker_main\nimport yagent.daemon.main as m\n")
    assert [m for _, m in _imports(bad)] == ["yagent.workers.entry", "yagent.daemon.main"]


def test_the_checker_resolves_relative_imports_against_the_files_package(tmp_path: Path) -> None:
    top = tmp_path / "daemon" / "x.py"
    nested = tmp_path / "daemon" / "commands" / "y.py"
    init = tmp_path / "daemon" / "commands" / "__init__.py"
    nested.parent.mkdir(parents=True)
    top.write_text("from ..workers import entry\nfrom . import z\nfrom .. import client\n")
    nested.write_text("from .. import workers\nfrom ... import workers as w\nfrom ..supervisor import Daemon\n"
                      "from .... import beyond\n")
    init.write_text("from . import submit\nfrom .. import registry\n")
    assert _package_of(top, tmp_path) == "yagent.daemon"
    assert _package_of(init, tmp_path) == "yagent.daemon.commands"
    assert [m for _, m in _imports(top, "yagent.daemon")] == ["yagent.workers", "yagent.daemon", "yagent.client"]
    # `..` of daemon/commands/y.py is yagent.daemon: its `workers` would be a daemon module, `...` is yagent.
    assert [m for _, m in _imports(nested, "yagent.daemon.commands")] == [
        "yagent.daemon", "yagent.workers", "yagent.daemon.supervisor", "...."]
    assert [m for _, m in _imports(init, "yagent.daemon.commands")] == ["yagent.daemon.commands", "yagent.daemon"]
    assert _violations(top, tmp_path) == ["daemon/x.py:1 imports yagent.workers", "daemon/x.py:3 imports yagent.client"]
    assert _violations(nested, tmp_path) == [
        "daemon/commands/y.py:2 imports yagent.workers",
        "daemon/commands/y.py:4 imports .... (past the top of the yagent namespace)"]
    assert _violations(init, tmp_path) == []


def test_the_checker_sees_imports_by_a_literal_name(tmp_path: Path) -> None:
    bad = tmp_path / "client" / "x.py"
    bad.parent.mkdir()
    bad.write_text(
        "import importlib\nfrom importlib import import_module\n"
        'importlib.import_module("yagent.daemon.main")\n'
        'import_module("..workers.entry", "yagent.client")\n'
        'import_module(".tui", package="yagent.client")\n'
        '__import__("yagent.workers")\n'
        '__import__("workers", globals(), None, [], 2)\n'
        "importlib.import_module(name)\n"
    )
    assert [m for _, m in _imports(bad, "yagent.client")] == [
        "importlib", "importlib", "yagent.daemon.main", "yagent.workers.entry", "yagent.client.tui",
        "yagent.workers", "yagent.workers"]
    assert [v.split(" imports ")[1] for v in _violations(bad, tmp_path)] == [
        "yagent.daemon.main", "yagent.workers.entry", "yagent.workers", "yagent.workers"]


def test_the_forbidden_table_states_the_rule() -> None:
    # DESIGN §3: ipc imports no other yagent package; daemon, workers and client may import ipc and nothing
    # else of each other. A table that forbids less (or names a package that does not exist) fails here.
    packages = {"ipc", "daemon", "workers", "client"}
    assert set(FORBIDDEN) == packages
    for folder, banned in FORBIDDEN.items():
        allowed = set() if folder == "ipc" else {"ipc"}
        assert sorted(banned) == sorted(f"yagent.{p}" for p in packages - {folder} - allowed), folder
        assert (REPO / folder / "__init__.py").is_file(), folder
