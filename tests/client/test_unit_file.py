"""The systemd unit `yagent daemon install-unit` writes: its `Documentation=` is real, never a placeholder."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote, urlparse

from yagent.client.unit_file import render_unit


def test_the_unit_documents_itself_with_the_installed_readme_of_the_service() -> None:
    text = render_unit("/opt/bin/yagentd")
    uris = re.findall(r"^Documentation=(.+)$", text, re.M)
    assert len(uris) == 1 and "@" not in uris[0] and "github.com/yagent" not in uris[0]
    uri = urlparse(uris[0])
    assert uri.scheme == "file"
    readme = Path(unquote(uri.path))
    assert readme.is_file() and readme.name == "README.md"
    doc = readme.read_text()
    # The page a reader of `systemctl --user help yagentd` needs: what it is, how to run it, where its logs are.
    for fact in ("yagent daemon install-unit", "systemctl --user enable --now yagentd",
                 "journalctl --user -u yagentd", "KillMode=mixed"):
        assert fact in doc, fact
    assert "KillMode=mixed" in text  # what the page explains is what the unit says
