"""The derived layer: modules, files, import edges parsed (never guessed) in Python and through the code server's
extraction for other languages, entry points and manifests, and a fingerprint per section that moves with the
structure and not with an edit inside a file."""

from __future__ import annotations

from pathlib import Path

from yagent.workers.blueprint.derivation import REPO, derive, module_of
from yagent.workers.blueprint.python_imports import python_imports

from .fixtures import make_project

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_modules_files_and_import_edges_are_parsed_across_languages(tmp_path: Path) -> None:
    derived = derive(make_project(tmp_path / "shop"))
    assert set(derived.modules) == {"shop", "core", "web", "tools", "tools/fmtx", "native"}  # build/: ignored
    assert derived.modules["shop"].files == ("__init__.py", "__main__.py", "cli.py", "orders.py", "pricing.py")
    assert derived.edges == [("shop", "core"), ("tools", "tools/fmtx")]  # package-dir, a Go import path
    assert derived.modules["core"].imported_by == ("shop",)
    assert derived.modules["web"].imports == () and derived.modules["native"].imports == ()  # within one module
    assert "__main__.py (python -m)" in derived.modules["shop"].entry_points
    assert "main.go (package main)" in derived.modules["tools"].entry_points
    assert "shop = shop.cli:main (pyproject.toml)" in derived.entry_points
    assert derived.modules["web"].manifests == ("package.json",) and derived.manifests == ("pyproject.toml",)
    assert module_of("shop/cli.py", derived.modules) == "shop" and module_of("docs/guide.md", derived.modules) is None
    assert module_of("tools/fmtx/fmtx.go", derived.modules) == "tools/fmtx"


def test_an_edited_pyproject_is_read_again_and_a_damaged_one_declares_nothing(tmp_path: Path) -> None:
    project = make_project(tmp_path / "shop")
    assert "shop = shop.cli:main (pyproject.toml)" in derive(project).entry_points  # now remembered
    manifest = project / "pyproject.toml"
    manifest.write_text(manifest.read_text().replace('shop = "shop.cli:main"', 'shop-admin = "shop.cli:admin"'))
    assert "shop-admin = shop.cli:admin (pyproject.toml)" in derive(project).entry_points
    manifest.write_text("[project\nname = ")  # damaged in the middle of an edit
    derived = derive(project)
    assert not any("pyproject.toml" in e for e in derived.entry_points) and derived.manifests == ("pyproject.toml",)


def test_imports_in_strings_and_comments_are_not_imports_and_lazy_ones_are() -> None:
    source = ('"""Docs.\n\nimport not_a_module\nfrom x import y\n"""\nimport a.b as c, d  # import e\n'
              "s = 'import nope'\ndef f():\n    from ..pkg import (one,  # a comment\n        two)\n"
              "    if True:\n        import lazy\nx = '''\nimport hidden\n'''\n")
    found = [(i.level, i.module, i.names) for i in python_imports(source)]
    assert found == [(0, "", ("a.b", "d")), (2, "pkg", ("one", "two")), (0, "", ("lazy",))]


def test_the_fingerprint_moves_with_the_structure_not_with_edits(tmp_path: Path) -> None:
    root = make_project(tmp_path / "shop")
    first = derive(root)
    (root / "core" / "ledger.py").write_text("import json\n\nLEDGER = {}  # an edit inside the file\n")
    edited = derive(root)
    assert edited.modules["core"].fingerprint == first.modules["core"].fingerprint
    assert edited.repo_fingerprint == first.repo_fingerprint
    (root / "core" / "ledger.py").write_text("from shop.pricing import price\n")  # a new edge: core → shop
    edged = derive(root)
    assert edged.modules["core"].fingerprint != first.modules["core"].fingerprint
    assert edged.modules["core"].imports == ("shop",)
    (root / "shop" / "refunds.py").write_text("")  # a file added
    assert derive(root).modules["shop"].fingerprint != first.modules["shop"].fingerprint
    (root / "billing").mkdir()
    (root / "billing" / "invoice.py").write_text("")
    assert derive(root).repo_fingerprint != first.repo_fingerprint


def test_this_repository_derives_with_its_package_dir_mapping() -> None:
    derived = derive(REPO_ROOT)
    assert {"daemon", "ipc", "workers/blueprint", "client/tui"} <= set(derived.modules)
    assert ("daemon", "ipc") in derived.edges and ("workers/blueprint", "workers/codeintel") in derived.edges
    assert ("ipc", "daemon") not in derived.edges  # the layering holds, as tests/test_layering.py says
    assert REPO not in derived.modules  # no source file at the top
