"""The daemon's and the workers' logs carry no per-request line of the HTTP client: it writes the URL whole, with
any `user:password@` or query key a configured `api_base_url` holds."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SECRET = "s3cret-pw-9f2"

# A real HTTP server on loopback and a real request to it, with the secret where a user could have put it.
_REQUEST = textwrap.dedent(f"""
    import http.server, threading, httpx

    class Answer(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{{}}")

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    with httpx.Client() as client:
        assert client.get(f"http://proxyuser:{SECRET}@127.0.0.1:{{port}}/v1/models?key={SECRET}").status_code == 200
    server.shutdown()
    import logging
    logging.getLogger("check").warning("request done")
""")


def _run(setup: str, tmp_path: Path) -> str:
    done = subprocess.run([sys.executable, "-c", setup + _REQUEST], cwd=str(REPO), capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert "request done" in done.stderr  # the log was live when the request went out
    return done.stderr


def _daemon_setup(home: Path, level: str) -> str:
    return ("import pathlib\nfrom yagent.daemon.log_files import setup_logging\n"
            f"setup_logging(pathlib.Path({str(home)!r}), {level!r})\n")


def test_the_daemons_log_has_no_request_line_and_so_no_url_secret(tmp_path: Path) -> None:
    stderr = _run(_daemon_setup(tmp_path, "info"), tmp_path)
    written = (tmp_path / "logs" / "yagentd.log").read_text()
    assert "request done" in written
    for text in (stderr, written):
        assert "HTTP Request" not in text
        assert SECRET not in text


def test_a_debug_log_chosen_on_purpose_still_shows_the_requests(tmp_path: Path) -> None:
    # Also proves the request above would be logged if nothing quieted it.
    stderr = _run(_daemon_setup(tmp_path, "debug"), tmp_path)
    assert "HTTP Request: GET" in stderr


@pytest.mark.parametrize("quieted", [True, False])
def test_a_workers_log_has_no_request_line(tmp_path: Path, quieted: bool) -> None:
    if quieted:
        setup = "from yagent.workers.entry import _log_as\n_log_as('r0123456789a')\n"
    else:  # the worker's log as it was before: the control that shows the request line appears at INFO
        setup = "import logging\nlogging.basicConfig(level=logging.INFO)\n"
    stderr = _run(setup, tmp_path)
    assert ("HTTP Request" in stderr) is not quieted
    assert (SECRET in stderr) is not quieted
