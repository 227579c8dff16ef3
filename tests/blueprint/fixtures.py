"""A small polyglot project for the blueprint tests, written here file by file."""

from __future__ import annotations

from pathlib import Path

FILES = {
    "pyproject.toml": '[project]\nname = "shop"\n[project.scripts]\nshop = "shop.cli:main"\n'
                      '[tool.setuptools]\npackage-dir = {"shop.core" = "core"}\n',
    "shop/__init__.py": "",
    "shop/cli.py": 'import sys\nfrom shop import orders\nfrom .pricing import price\n\n\ndef main():\n'
                   '    """Run it.\n\n    import this_is_a_docstring\n    """\n    return orders.place(price(1))\n',
    "shop/orders.py": "from shop.core.ledger import record  # via package-dir\n\n\ndef place(amount):\n"
                      "    from .pricing import price  # a lazy import counts too\n    return record(price(amount))\n",
    "shop/pricing.py": "def price(n):\n    return n * 2\n",
    "shop/__main__.py": "from .cli import main\nmain()\n",
    "core/__init__.py": "",
    "core/ledger.py": "import json\n\nLEDGER = []\n\n\ndef record(entry):\n    LEDGER.append(entry)\n"
                      "    return entry\n",
    "web/app.js": "import { place } from './api';\nimport React from 'react';\n",
    "web/api.js": "export function place() { return fetch('/orders'); }\n",
    "web/package.json": '{"name": "web", "main": "app.js"}\n',
    "tools/main.go": 'package main\n\nimport (\n\t"fmt"\n\t"example.com/shop/tools/fmtx"\n)\n\n'
                     'func main() { fmt.Println() }\n',
    "tools/fmtx/fmtx.go": "package fmtx\n\nfunc Pretty() {}\n",
    "native/lib.c": '#include "native/lib.h"\n#include <stdio.h>\n',
    "native/lib.h": "int add(int, int);\n",
    "docs/guide.md": "# Guide\n",
    ".gitignore": "build/\n",
    "build/gen.py": "import shop\n",
}


def make_project(root: Path, files: dict[str, str] | None = None) -> Path:
    for rel, text in (files or FILES).items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root
