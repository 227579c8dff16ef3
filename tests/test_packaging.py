"""The built wheel carries every module and data file, installed under the `yagent` namespace."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FOLDERS = {"daemon": "yagent.daemon", "workers": "yagent.workers", "ipc": "yagent.ipc", "client": "yagent.client",
           "systemd": "yagent.systemd"}


def _expected_modules() -> list[str]:
    modules = []
    for folder, package in FOLDERS.items():
        for path in sorted((REPO / folder).rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            rel = path.relative_to(REPO / folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            modules.append(".".join([package, *parts]))
    return modules


def test_wheel_contains_and_imports_every_module(tmp_path: Path) -> None:
    wheel_dir = tmp_path / "wheel"
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                            "-w", str(wheel_dir), str(REPO)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    wheel = next(wheel_dir.glob("yagent-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = _expected_modules()
    for module in expected:
        as_file = module.replace(".", "/")
        assert f"{as_file}.py" in names or f"{as_file}/__init__.py" in names, f"{module} is missing from the wheel"
    assert "yagent/systemd/yagentd.service" in names
    assert any(n.startswith("yagent/workers/llm/") and n.endswith(".json") for n in names), "model catalog missing"

    target = tmp_path / "site"
    installed = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target),
                                str(wheel)], capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr
    probe = (
        "import importlib, json, sys\n"
        f"mods = {expected!r}\n"
        "files = {m: importlib.import_module(m).__file__ for m in mods}\n"
        "from yagent.client.unit_file import documentation_uri, render_unit\n"
        "assert 'Type=notify' in render_unit('/x')\n"
        "import pathlib, urllib.parse\n"
        "assert pathlib.Path(urllib.parse.unquote(documentation_uri()[len('file://'):])).is_file()\n"
        "print(json.dumps(files))\n"
    )
    env = {"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    result = subprocess.run([sys.executable, "-c", probe], cwd=str(tmp_path), env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    files = json.loads(result.stdout)
    outside = {m: f for m, f in files.items() if not f.startswith(str(target))}
    assert not outside, f"imported from outside the wheel: {outside}"


def test_every_package_folder_is_listed_in_pyproject() -> None:
    import tomllib

    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    for folder, package in FOLDERS.items():
        for init in (REPO / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(REPO / folder)
            name = ".".join([package, *rel.parts]) if rel.parts else package
            assert name in listed, f"{name} ({init.parent}) is not listed in pyproject.toml [tool.setuptools] packages"
