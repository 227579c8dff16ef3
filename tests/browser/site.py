"""The local test site the browser tests load: a real HTTP server on 127.0.0.1 with the pages a browser agent meets
(a form, a select, a page that renders late, a second tab, an alert) and the pages an attacker would serve (one that
never finishes loading, an endless alert loop, a download bomb, a script that goes to a denied host, a huge DOM).

Every handler is bounded: the hanging page waits on an event the fixture sets at teardown (at most `HANG_LIMIT`),
the bomb stops after `BOMB_LIMIT` bytes or when the browser hangs up.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = ["BOMB_LIMIT", "LocalSite"]

HANG_LIMIT = 60.0
BOMB_LIMIT = 64 * 1024 * 1024
_CHUNK = b"\0" * 65536

PAGES = {
    "/form": """<title>Form</title><h1>Sign up</h1>
<label>Name <input id="name"></label>
<label>Colour <select id="colour"><option value="r">Red</option><option value="g">Green</option></select></label>
<button onclick="document.getElementById('out').textContent =
  'Hello ' + document.getElementById('name').value + ' in ' + document.getElementById('colour').value">Send</button>
<input id="search" aria-label="Search" onkeyup="document.getElementById('keys').textContent = this.value.length">
<p id="out"></p><p>keys: <span id="keys">0</span></p>
<a href="/second" target="_blank">Open second</a>
<button onclick="alert('Saved!')">Alert me</button>
<a href="/small.txt">Get file</a>""",
    "/second": "<title>Second</title><p>This is the second tab.</p>",
    "/late": """<title>Late</title><div id="slot">loading…</div>
<script>setTimeout(() => {
  document.getElementById('slot').innerHTML = '<button>Ready now</button>'; }, 2000)</script>""",
    "/alerts": "<title>Alerts</title><script>while (true) { alert('again'); }</script>",
    "/to-denied": """<title>Leaving</title><p>going</p>
<script>setTimeout(() => { location.href = 'http://localhost:{port}/second'; }, 100)</script>""",
    "/huge": """<title>Huge</title><div id="root"></div>
<script>const root = document.getElementById('root'); let html = '';
for (let i = 0; i < 3000; i++) html += '<p><a href="#' + i + '">link number ' + i + '</a></p>';
root.innerHTML = html;</script>""",
    "/bomb-page": '<title>Bomb</title><a href="/bomb">Free download</a>',
}


class LocalSite:
    def __init__(self) -> None:
        self.release = threading.Event()  # lets the hanging page go
        self.requests: list[str] = []  # host:port/path, as the browser asked
        self.on_request: Callable[[str], None] | None = None
        site = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                site.requests.append(f"{self.headers.get('Host', '')}{self.path}")
                if site.on_request is not None:
                    site.on_request(self.path)
                if self.path == "/hang":
                    site.release.wait(HANG_LIMIT)
                    self._send(b"<title>Finally</title>")
                elif self.path == "/slow":  # answers once released: a call that stays in flight
                    site.release.wait(HANG_LIMIT)
                    self._send(b"<title>Slow</title>")
                elif self.path == "/small.txt":
                    self._send(b"hello file\n", "text/plain", attachment="small.txt")
                elif self.path == "/bomb":
                    self._bomb()
                elif self.path in PAGES:
                    body = PAGES[self.path].replace("{port}", str(site.port))
                    self._send(body.encode())
                else:
                    self.send_error(404)

            def _send(self, body: bytes, kind: str = "text/html", attachment: str = "") -> None:
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                if attachment:
                    self.send_header("Content-Disposition", f'attachment; filename="{attachment}"')
                self.end_headers()
                try:
                    self.wfile.write(body)
                except OSError:  # the browser gave up on it (the hanging page)
                    return

            def _bomb(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Disposition", 'attachment; filename="bomb.bin"')
                self.end_headers()
                sent = 0
                try:
                    while sent < BOMB_LIMIT:
                        self.wfile.write(_CHUNK)
                        sent += len(_CHUNK)
                except OSError:
                    return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def __enter__(self) -> LocalSite:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
