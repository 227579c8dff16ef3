"""The floor under a delegation: the same chain of processes and libraries as yagent's, doing nothing else.

`bench/delegation_session.py` measures what a delegation costs yagent between its two model requests (~20 ms on
the 2-core machine this was written on, against a target of 10 ms). This bench measures what the process model
alone costs on the same machine, so that figure can be read against its floor. It replays the same session shape —
a Director asks the model, delegates, the sub-agent asks the model, its answer goes back, the Director asks again,
twenty times — through a skeleton of the same parts and nothing more:

- a Director process holding an httpx client and a ZeroMQ DEALER (asyncio), which reads its model's streamed answer
  to the end, asks the daemon for a delegation and, given the result, sends its next request;
- a daemon process with a ZeroMQ ROUTER (asyncio) that hands the delegation to a warm worker (its assignment written
  to the pipe the worker waits on), checks the worker's hello (an HMAC of its secret), starts it, and relays its
  result to the Director;
- a forkserver process that has imported what a worker needs and forks warm workers ahead, each waiting on its pipe
  with its ZeroMQ context and HTTP client made and every page it shares with the forkserver already copied;
- a worker that, once assigned, confines itself with Landlock (no new privileges, a ruleset of a few read rules and
  one write rule), starts connecting to the provider, opens its ZeroMQ DEALER, says hello, waits for its start, sends
  its model request, reads the streamed answer to the end, sends its result and waits for the acknowledgement.

No events, no registry, no tool surface, no prompt, no notes, no checkpoints: what is left is what any implementation
with this process model, these libraries and this interpreter pays. Measured like the session bench, at the provider
(idle per delegation, both hops) minus a bare replay of the same bodies; the fake provider runs in its own process.
Usage: python bench/delegation_floor.py [DELEGATIONS] [MODEL_SECONDS]
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

DIRECTOR_MARKER = "yagent floor: director"
CHAT_MARKER = "yagent floor: chat"
WARM = 2


class Marks:
    """Wall-clock stamps of one process, written to the state directory when it is done (never on the way)."""

    def __init__(self, state: str, role: str) -> None:
        self._path = os.path.join(state, f"marks-{role}-{os.getpid()}.json")
        self._stamps: list[tuple[str, str, float]] = []

    def __call__(self, key: str, tag: str) -> None:
        self._stamps.append((key, tag, time.time()))

    def save(self) -> None:
        with open(self._path, "w") as out:
            json.dump(self._stamps, out)


def _body(marker: str, task: str) -> bytes:
    return json.dumps({"model": "fake-model", "stream": True, "stream_options": {"include_usage": True},
                       "messages": [{"role": "system", "content": marker}, {"role": "user", "content": task}]}).encode()


async def _ask_model(client: Any, url: str, body: bytes) -> int:  # an httpx.AsyncClient: imported in the roles only
    """Send one streamed request and read its answer to the end, decoding each event; the number of events."""
    events = 0
    async with client.stream("POST", url, content=body, headers={"authorization": "Bearer fake-key",
                                                                    "content-type": "application/json"}) as response:
        async for line in response.aiter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                json.loads(line[6:])
                events += 1
    return events


# -- the Director ------------------------------------------------------------------------------------------------

def director(endpoint: str, url: str, state: str, n: int) -> None:
    import httpx
    import zmq
    import zmq.asyncio

    async def main() -> None:
        ctx = zmq.asyncio.Context()
        sock = ctx.socket(zmq.DEALER)
        sock.connect(endpoint)
        mark = Marks(state, "director")
        async with httpx.AsyncClient() as client:
            for i in range(n):
                await _ask_model(client, url, _body(DIRECTOR_MARKER, f"delegation {i}"))
                mark(str(i), "director read its answer")
                await sock.send(json.dumps({"kind": "delegate", "task": f"question {i}"}).encode())
                reply = json.loads(await sock.recv())
                mark(str(i), "director has the result")
                assert reply["kind"] == "result", reply
            await _ask_model(client, url, _body(DIRECTOR_MARKER, "done"))
        mark.save()
        sock.close(0)
        ctx.term()

    asyncio.run(main())


# -- the forkserver and its warm workers --------------------------------------------------------------------------

def forkserver(state: str) -> None:
    """Fork warm workers ahead; say `ready PIPE` for each on stdout; fork another at each `refill` on stdin."""
    import anyio._backends._asyncio  # noqa: F401 - what a worker needs, imported once here as yagent's preload does
    import httpcore  # noqa: F401
    import httpx
    import zmq.asyncio  # noqa: F401

    import yagent.workers.llm._connect_ahead  # for the workers, as the imports above
    import yagent.workers.page_warmth  # noqa: F401
    from yagent.workers.sandbox import _landlock

    tls = httpx.create_ssl_context()  # the CA bundle, loaded once for every worker (20 ms each otherwise)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # workers are reaped by the kernel
    made = 0
    children: list[tuple[int, str]] = []

    def fork_one() -> None:
        nonlocal made
        made += 1
        pipe = os.path.join(state, f"warm-{made}.pipe")
        os.mkfifo(pipe, 0o600)
        # Opened here, before the fork and the `ready`: the daemon may write to it at once (a FIFO with no reader
        # refuses a non-blocking writer). Read-write, so the open itself does not wait for a writer.
        fd = os.open(pipe, os.O_RDWR)
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                worker(fd, pipe, state, _landlock, tls)
            except BaseException:
                import traceback
                traceback.print_exc()
                code = 1
            finally:
                os._exit(code)
        os.close(fd)
        children.append((pid, pipe))
        print(f"ready {pipe}", flush=True)

    try:
        for _ in range(WARM):
            fork_one()
        for line in sys.stdin:
            if line.strip() == "refill":
                fork_one()
    except BrokenPipeError:
        pass  # the daemon is gone (killed after a failed Director): nobody will assign the workers
    finally:
        for pid, pipe in children:  # the warm workers never assigned (their pipe is still there) wait on it for ever
            if os.path.exists(pipe):
                os.kill(pid, signal.SIGKILL)


def worker(fd: int, pipe: str, state: str, landlock: Any, tls: Any) -> None:
    """One warm worker waiting on `fd`, its pipe `pipe` opened; `landlock` and `tls` are the forkserver's (yagent's
    Landlock module, its TLS context)."""
    import httpx
    import zmq
    import zmq.asyncio

    from yagent.workers import page_warmth
    from yagent.workers.llm._connect_ahead import ConnectAheadTransport

    # Made while waiting, as a warm worker of yagent's makes them: objects only, no thread and no socket yet.
    ctx = zmq.asyncio.Context()
    transport = ConnectAheadTransport(tls)
    client = httpx.AsyncClient(transport=transport)
    # Every page of the forkserver's copied now, not on first touch: the best a learned page profile can do.
    page_warmth.prefault(page_warmth.writable_ranges(), limit=1 << 20)
    assignment = json.loads(os.read(fd, 65536))  # blocks until assigned
    os.close(fd)
    mark = Marks(state, "worker")
    run = assignment["run"]
    mark(run, "worker woke")
    os.unlink(pipe)
    abi = landlock.kernel_abi()
    if abi:
        landlock.set_no_new_privs()
        tree = os.path.dirname(os.path.dirname(os.__file__))
        trees = ("/usr", "/etc", "/proc", "/dev", sys.prefix, tree, str(REPO))
        rules = [landlock.Rule(path, landlock.READ) for path in trees]
        rules.append(landlock.Rule(state, landlock.READ | landlock.WRITE))
        landlock.restrict_self(abi, rules)
    mark(run, "worker confined")

    async def main() -> None:
        transport.open_ahead(assignment["url"], 5.0)  # its handshake travels while the hello does
        sock = ctx.socket(zmq.DEALER)
        identity = os.urandom(8)
        sock.setsockopt(zmq.IDENTITY, identity)
        sock.connect(assignment["endpoint"])
        proof = hmac.new(bytes.fromhex(assignment["secret"]), assignment["run"].encode() + identity,
                         hashlib.sha256).hexdigest()
        await sock.send(json.dumps({"kind": "hello", "run": assignment["run"], "proof": proof}).encode())
        mark(run, "worker said hello")
        start = json.loads(await sock.recv())
        mark(run, "worker started")
        assert start["kind"] == "start", start
        async with client:
            await _ask_model(client, assignment["url"], _body(CHAT_MARKER, start["task"]))
            mark(run, "worker read its answer")
        mark.save()  # before the result: once the daemon has every result, every worker's stamps are on disk
        await sock.send(json.dumps({"kind": "result", "summary": "answer"}).encode())
        ack = json.loads(await sock.recv())
        assert ack["kind"] == "ack", ack
        sock.close(0)
        ctx.term()

    asyncio.run(main())


# -- the daemon -----------------------------------------------------------------------------------------------------

def daemon(endpoint: str, url: str, state: str, n: int) -> None:
    server = subprocess.Popen([sys.executable, __file__, "forkserver", state], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, bufsize=1)
    import zmq
    import zmq.asyncio

    async def main() -> None:
        loop = asyncio.get_running_loop()
        warm: asyncio.Queue[str] = asyncio.Queue()
        assert server.stdout is not None and server.stdin is not None

        pool_full = asyncio.Event()  # as a long-lived daemon's pool is: the first delegation waits for no fork

        pending = [b""]  # what the forkserver said past its last full line

        def ready() -> None:
            # Raw reads, split here: a buffered readline would leave a second line in its buffer, unseen by the loop.
            chunk = os.read(server.stdout.fileno(), 65536)
            if not chunk:
                loop.remove_reader(server.stdout.fileno())
                return
            *lines, pending[0] = (pending[0] + chunk).split(b"\n")
            for line in lines:
                if line.startswith(b"ready "):
                    warm.put_nowait(line[len(b"ready "):].decode())
            if warm.qsize() >= WARM:
                pool_full.set()

        loop.add_reader(server.stdout.fileno(), ready)
        ctx = zmq.asyncio.Context()
        router = ctx.socket(zmq.ROUTER)
        router.bind(endpoint)
        async with asyncio.timeout(60):
            await pool_full.wait()
        print("listening", flush=True)
        runs: dict[str, dict] = {}  # run id → its secret, task, parent and worker
        done = 0
        mark = Marks(state, "daemon")
        while done < n:
            peer, frame = await router.recv_multipart()
            msg = json.loads(frame)
            if msg["kind"] == "delegate":
                run = os.urandom(6).hex()
                secret = os.urandom(32)
                runs[run] = {"secret": secret, "task": msg["task"], "parent": peer}
                mark(run, "daemon has the delegation")
                pipe = await warm.get()
                fd = os.open(pipe, os.O_WRONLY | os.O_NONBLOCK)
                os.write(fd, json.dumps({"run": run, "secret": secret.hex(), "endpoint": endpoint,
                                         "url": url}).encode())
                os.close(fd)
                mark(run, "daemon assigned a warm worker")
                server.stdin.write("refill\n")
                server.stdin.flush()
            elif msg["kind"] == "hello":
                record = runs[msg["run"]]
                expected = hmac.new(record["secret"], msg["run"].encode() + peer, hashlib.sha256).hexdigest()
                if not hmac.compare_digest(expected, msg["proof"]):
                    continue
                record["worker"] = peer
                mark(msg["run"], "daemon has the hello")
                await router.send_multipart([peer, json.dumps({"kind": "start", "task": record["task"]}).encode()])
            elif msg["kind"] == "result":
                run = next(r for r, record in runs.items() if record.get("worker") == peer)
                record = runs.pop(run)
                mark(run, "daemon has the result")
                await router.send_multipart([peer, json.dumps({"kind": "ack"}).encode()])
                await router.send_multipart([record["parent"], json.dumps({"kind": "result",
                                                                           "summary": msg["summary"]}).encode()])
                done += 1
        mark.save()
        loop.remove_reader(server.stdout.fileno())
        router.close(0)
        ctx.term()

    try:
        asyncio.run(main())
    finally:
        server.stdin.close()
        server.wait(10)


# -- the bench ------------------------------------------------------------------------------------------------------

def floor_session(n: int, model_time: float) -> dict:
    from delegation_session import bare_baseline, provider_gaps

    from tests.fake_provider import Script, Step
    from tests.fake_provider.provider_process import start_provider_process

    root = Path(tempfile.mkdtemp(prefix="ygf-"))
    state = root / "state"
    state.mkdir()
    text = "x" * 100
    director_steps = [Step(text=f"delegating {i}", latency=model_time / 4) for i in range(n)]
    director_steps.append(Step(text=text, chunk_size=10, latency=model_time / 12))
    chat_steps = [Step(text=text, chunk_size=10, latency=model_time / 12) for _ in range(n)]
    bare = [step for pair in zip(director_steps, chat_steps, strict=False) for step in pair] + [director_steps[-1]]
    provider, base_url = start_provider_process([Script("director", DIRECTOR_MARKER, director_steps),
                                                 Script("chat", CHAT_MARKER, chat_steps)], root)
    url = f"{base_url}/v1/chat/completions"
    endpoint = f"ipc://{root}/workers.sock"
    the_daemon = None
    try:
        the_daemon = subprocess.Popen([sys.executable, __file__, "daemon", endpoint, url, str(state), str(n)],
                                      stdout=subprocess.PIPE, text=True)
        assert the_daemon.stdout is not None
        assert the_daemon.stdout.readline().strip() == "listening"
        started = time.perf_counter()
        subprocess.run([sys.executable, __file__, "director", endpoint, url, str(state), str(n)], check=True,
                       timeout=600)
        wall = time.perf_counter() - started
        assert the_daemon.wait(30) == 0
        baseline, requests = bare_baseline(base_url, bare, skip=0)
    finally:
        # A Director that failed leaves the daemon waiting for results: killed, it closes its forkserver's stdin,
        # and the forkserver then ends its unassigned workers and itself.
        if the_daemon is not None and the_daemon.poll() is None:
            the_daemon.kill()
            the_daemon.wait()
        provider.communicate("")
    return {"wall": wall, "baseline": baseline, "gaps": provider_gaps(requests, 0, n),
            "rows": floor_breakdown(state, requests[:2 * n + 1], n)}


FLOOR_PHASES = ("director: model's last byte → answer read", "→ delegation at the daemon",
                "→ warm worker assigned", "→ worker awake", "Landlock", "→ connection ahead, ZeroMQ socket, hello",
                "→ hello at the daemon", "→ start at the worker", "→ request at the model",
                "sub-agent: model's last byte → answer read", "→ result at the daemon", "→ result at the Director",
                "→ next request at the model")


def floor_breakdown(state: Path, requests: list[dict], n: int) -> list[list[float]]:
    """Per delegation, each of `FLOOR_PHASES` in ms, from every process's stamps and the provider's own record."""
    stamps: dict[str, dict[str, float]] = {}
    for path in state.glob("marks-*.json"):
        for key, tag, at in json.loads(path.read_text()):
            stamps.setdefault(key, {})[tag] = at
    runs = sorted((key for key in stamps if not key.isdigit()),
                  key=lambda run: stamps[run]["daemon has the delegation"])
    rows = []
    for i, run in enumerate(runs[:n]):
        d, r = stamps[str(i)], stamps[run]
        asked, answered, next_asked = requests[2 * i], requests[2 * i + 1], requests[2 * i + 2]
        points = [asked["finished_wall"], d["director read its answer"], r["daemon has the delegation"],
                  r["daemon assigned a warm worker"], r["worker woke"], r["worker confined"], r["worker said hello"],
                  r["daemon has the hello"], r["worker started"], answered["received_wall"]]
        second = [answered["finished_wall"], r["worker read its answer"], r["daemon has the result"],
                  d["director has the result"], next_asked["received_wall"]]
        rows.append([(b - a) * 1000 for a, b in itertools.pairwise(points)]
                    + [(b - a) * 1000 for a, b in itertools.pairwise(second)])
    return rows


def main() -> None:
    from delegation_session import print_phases

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    model_time = float(sys.argv[2]) if len(sys.argv) > 2 else 0.25
    got = floor_session(n, model_time)
    gaps, bare_gaps = got["gaps"]
    idle, bare_idle = statistics.median(gaps), statistics.median(bare_gaps)
    print(f"== the floor (the same processes and libraries, nothing else): {n} delegations")
    print(f"wall {got['wall']:.2f} s; baseline (same responses, bare httpx loop) {got['baseline']:.2f} s")
    print(f"at the provider, idle per delegation (answer → next request, both hops), p50: {idle:.2f} ms in the "
          f"skeleton, {bare_idle:.2f} ms in the bare replay → {idle - bare_idle:.2f} ms of orchestration "
          f"(mean {statistics.fmean(gaps) - statistics.fmean(bare_gaps):.2f})")
    print_phases(FLOOR_PHASES, got["rows"])


if __name__ == "__main__":
    role = sys.argv[1] if len(sys.argv) > 1 else ""
    if role == "director":
        director(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
    elif role == "daemon":
        daemon(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
    elif role == "forkserver":
        forkserver(sys.argv[2])
    else:
        main()
