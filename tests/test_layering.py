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


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
    return found


@pytest.mark.parametrize("folder", sorted(FORBIDDEN))
def test_package_imports_respect_the_layering(folder: str) -> None:
    violations = []
    files = sorted((REPO / folder).rglob("*.py"))
    assert files, f"no Python files under {folder}/"
    for path in files:
        for line, module in _imports(path):
            if any(module == banned or module.startswith(banned + ".") for banned in FORBIDDEN[folder]):
                violations.append(f"{path.relative_to(REPO)}:{line} imports {module}")
    assert not violations, "\n".join(violations)


def test_the_checker_sees_a_violation(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from yagent.workers.entry import worker_main\nimport yagent.daemon.main as m\n")
    assert [m for _, m in _imports(bad)] == ["yagent.workers.entry", "yagent.daemon.main"]
