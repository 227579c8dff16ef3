"""Run start latency: launch → worker hello, forkserver (preloaded) vs plain spawn, and confined (Landlock, a
Coding worker's rules) vs unconfined forkserver starts interleaved, in one run, and confined with the
read-only `.git` view (a private user and mount namespace, where they exist) among them; then warm starts
(a worker forked ahead of demand, `daemon/warm_pool.py`) interleaved with cold ones, unconfined and as a
confined Coding run with its `.git` view.

Targets: forkserver p50 ≤ 15 ms; confinement adds ≤ 1 ms at p50; a warm start ≤ 4 ms at p50. The worker side
is the real worker entry point; this script plays the daemon's part of the handshake on a real ROUTER socket,
the run's secret and the check of the hello's proof included (the check alone is timed apart too). A warm
start is timed from the launch to the hello as a cold one, with the pool refilled before the next launch (the
daemon refills it in the background between runs). Its floor, interleaved with it: a process forked by the same
forkserver that only waits on its pipe with an event loop and a ZeroMQ context made, and, handed a run id and its
secret, opens a DEALER, connects and says hello with its proof — what any warm start on this process model pays.
Usage: python bench/run_start_latency.py [N]
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import multiprocessing
import os
import select
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from multiprocessing.connection import Connection
from pathlib import Path

import zmq
import zmq.asyncio

from yagent.daemon.launcher import MultiprocessingLauncher, RunHandle
from yagent.daemon.main import PRELOAD
from yagent.ipc.confinement import ConfinementSpec, landlock_abi, user_namespaces
from yagent.ipc.messages import PROTOCOL_VERSION, ErrorReply, WorkerHello
from yagent.ipc.records import decode, encode
from yagent.ipc.run_secret import hello_proof, new_run_secret, proves
from yagent.ipc.sockets import bind_router, connect_dealer, random_identity
from yagent.ipc.vocabulary import ErrorCode


def measure(launcher: MultiprocessingLauncher, runs: int, endpoint: str, router: zmq.Socket,
            confinement: ConfinementSpec | None = None, warm: bool = False) -> list[float]:
    samples = []
    for i in range(runs):
        if warm:
            _wait_warm(launcher)
        run_id = f"bench{launcher.method[:2]}{'c' if confinement else ''}{'w' if warm else ''}{i}"
        loop = asyncio.new_event_loop() if warm else None
        t0 = time.perf_counter()
        secret = new_run_secret()
        if loop is not None:
            handle = _begin_launch(loop, launcher, run_id, endpoint, secret, confinement)
        else:
            handle = launcher.launch(run_id, "bench", endpoint, secret, confinement=confinement)
        identity, sample = _proven_hello(router, secret, run_id, t0)
        samples.append(sample)
        if loop is not None:
            loop.close()
        assert handle.warm == warm, "a warm start went cold, or a cold one warm"
        _refuse(router, identity)
        deadline = time.monotonic() + 10
        while handle.exitcode() is None and time.monotonic() < deadline:
            time.sleep(0.001)
        handle.close()
    return samples


def _proven_hello(router: zmq.Socket, secret: bytes, run_id: str, t0: float) -> tuple[bytes, float]:
    """The next hello's connection and the time from `t0` to its proof checked; the bench stops on a wrong proof."""
    identity, frame = router.recv_multipart()
    hello = decode(frame)
    admitted = isinstance(hello, WorkerHello) and proves(secret, run_id, identity, hello.proof)
    sample = time.perf_counter() - t0
    assert admitted, f"the hello of {run_id} does not prove its run's secret"
    return identity, sample


def _refuse(router: zmq.Socket, identity: bytes) -> None:
    """Refuse the run: its worker exits at once, as it would for an unknown run."""
    router.send_multipart([identity, encode(ErrorReply(id=0, code=ErrorCode.UNKNOWN_RUN, message="bench"))])


def floor_start(endpoint: str, router: zmq.Socket, index: int) -> float:
    """One start of `_floor_worker`, timed as `measure` times a warm one: from handing it its run to its hello
    checked. The forkserver is the launcher's own (multiprocessing has one per process), preloaded alike."""
    mp = multiprocessing.get_context("forkserver")
    assignment, assign = mp.Pipe(duplex=False)
    ready, say_ready = mp.Pipe(duplex=False)
    process = mp.Process(target=_floor_worker, args=(assignment, say_ready), daemon=True)
    process.start()
    assignment.close()
    say_ready.close()
    ready.recv_bytes()  # it waits on its pipe now
    ready.close()
    run_id = f"benchfloor{index}"
    t0 = time.perf_counter()
    secret = new_run_secret()
    assign.send((run_id, endpoint))
    assign.send_bytes(secret)
    identity, sample = _proven_hello(router, secret, run_id, t0)
    _refuse(router, identity)
    process.join(10)
    assign.close()
    return sample


def _floor_worker(assignment: Connection, ready: Connection) -> None:
    """The least a warm worker does: made ahead, a loop and a ZeroMQ context (no thread until its first socket);
    assigned, a DEALER connected and a hello with its proof, then the daemon's answer awaited."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    context = zmq.asyncio.Context()
    ready.send_bytes(b"ready")
    ready.close()
    poller = select.poll()
    poller.register(assignment.fileno(), select.POLLIN)
    poller.poll()
    run_id, endpoint = assignment.recv()
    secret = assignment.recv_bytes()

    async def hello() -> None:
        identity = random_identity()
        sock = connect_dealer(context, endpoint, identity=identity)
        sock.send(encode(WorkerHello(version=PROTOCOL_VERSION, run=run_id, pid=os.getpid(),
                                     proof=hello_proof(secret, run_id, identity))))
        await sock.recv()
        sock.close(0)

    loop.run_until_complete(hello())
    context.term()


def _begin_launch(loop: asyncio.AbstractEventLoop, launcher: MultiprocessingLauncher, run_id: str, endpoint: str,
                  secret: bytes, confinement: ConfinementSpec | None) -> RunHandle:
    """A start as the daemon makes it (`begin_launch` on its loop, made before the clock starts as the daemon's
    exists): a warm worker is handed the run there, and the pool refilled `REFILL_DELAY` later — here never, as the
    loop is closed after the start (`_wait_warm` refills before the next one). `launch`, the synchronous entry,
    refills at once, and that fork would share the machine's two CPUs with the start being timed."""
    async def begin() -> RunHandle:
        started: asyncio.Future[RunHandle | Exception] = asyncio.get_running_loop().create_future()
        launcher.begin_launch(run_id, "bench", endpoint, secret, confinement=confinement, done=started.set_result)
        handle = await started
        if isinstance(handle, Exception):
            raise handle
        return handle

    return loop.run_until_complete(begin())


def _wait_warm(launcher: MultiprocessingLauncher, timeout: float = 30.0) -> None:
    """Until the pool has its worker forked and waiting on its pipe (bench-side polling, not the product's)."""
    if launcher.warm.ready() < launcher.warm.size:
        launcher.keep_warm(launcher.warm.size)  # what the daemon's loop does `REFILL_DELAY` after a start
    deadline = time.monotonic() + timeout
    while launcher.warm.ready() < launcher.warm.size:
        if time.monotonic() > deadline:
            raise RuntimeError("the warm pool did not refill within 30 s")
        time.sleep(0.002)
    time.sleep(0.02)  # the fresh worker reaches its pipe: its fork returned, its boot may not have


@contextlib.contextmanager
def quiet_workers() -> Iterator[None]:
    """Each refused worker logs an error line to the inherited stderr; hide them while measuring."""
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def proof_check_us(rounds: int = 20_000) -> float:
    """What the daemon adds per hello: one HMAC-SHA256 and a constant-time compare (µs each, median of 5)."""
    secret, identity = new_run_secret(), random_identity()
    proof = hello_proof(secret, "r0123456789", identity)
    runs = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(rounds):
            proves(secret, "r0123456789", identity, proof)
        runs.append((time.perf_counter() - t0) / rounds * 1e6)
    return statistics.median(runs)


def secret_handover_us(rounds: int = 2_000) -> float:
    """The rest of what a start adds: the secret's pipe made, written, read and closed, and the worker's proof
    made (in one process: the descriptor's trip through the forkserver is one more fd in a message it sends
    anyway), µs each, median of 5."""
    runs = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(rounds):
            secret = new_run_secret()
            reader, writer = multiprocessing.Pipe(duplex=False)
            writer.send_bytes(secret)
            writer.close()
            hello_proof(reader.recv_bytes(256), "r0123456789", random_identity())
            reader.close()
        runs.append((time.perf_counter() - t0) / rounds * 1e6)
    return statistics.median(runs)


def git_view_us(project: Path, rounds: int = 200) -> float:
    """The read-only .git view alone, made in a freshly forked child as a worker makes it (µs, median): the
    start figures above move by more than this from machine load alone."""
    from yagent.workers.sandbox.git_namespace import protect_git
    samples = []
    for _ in range(rounds):
        reader, writer = os.pipe()
        pid = os.fork()
        if pid == 0:
            t0 = time.perf_counter()
            protect_git(str(project))
            os.write(writer, repr(time.perf_counter() - t0).encode())
            os._exit(0)
        os.close(writer)
        samples.append(float(os.read(reader, 64)) * 1e6)
        os.close(reader)
        os.waitpid(pid, 0)
    return statistics.median(samples)


def report(name: str, samples: list[float]) -> float:
    ms = sorted(s * 1000 for s in samples)
    p50 = statistics.median(ms)
    p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    print(f"{name:<24} n={len(ms):<4} p50={p50:7.2f} ms  p99={p99:7.2f} ms  min={ms[0]:6.2f} ms")
    return p50


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    root = Path(tempfile.mkdtemp(prefix="ygb-", dir="/tmp"))
    # As under yagentd: the forkserver works out the listing around the daemon's own home and runtime dir.
    os.environ["YAGENT_HOME"], os.environ["YAGENT_RUNTIME_DIR"] = str(root / "home"), str(root)
    with quiet_workers():
        # The forkserver must start before any zmq context exists, as in the daemon.
        fork_launcher = MultiprocessingLauncher("forkserver", preload=PRELOAD)
        fork_launcher.start()
        ctx = zmq.Context()
        endpoint = f"ipc://{root}/workers.sock"
        router = bind_router(ctx, endpoint)
        try:
            # The first start waits for the forkserver to finish preloading, as right after the daemon starts.
            cold = measure(fork_launcher, 1, endpoint, router)[0]
            fork = measure(fork_launcher, runs, endpoint, router)
            spec = _confinement(root)
            with_git = dataclasses.replace(spec, git_namespace=True) if user_namespaces() else None
            plain, confined, namespaced = [], [], []
            if spec.abi:
                for _ in range(runs):  # interleaved: machine load falls on all alike
                    plain += measure(fork_launcher, 1, endpoint, router)
                    confined += measure(fork_launcher, 1, endpoint, router, spec)
                    if with_git is not None:
                        namespaced += measure(fork_launcher, 1, endpoint, router, with_git)
            cold_i, warm_i, cold_c, warm_c, floor_i = [], [], [], [], []
            fork_launcher.keep_warm(1)
            coding = with_git if with_git is not None else (spec if spec.abi else None)
            for i in range(runs):  # interleaved, as above
                cold_i += _cold(fork_launcher, endpoint, router)
                warm_i += measure(fork_launcher, 1, endpoint, router, warm=True)
                floor_i.append(floor_start(endpoint, router, i))
                if coding is not None:
                    cold_c += _cold(fork_launcher, endpoint, router, coding)
                    warm_c += measure(fork_launcher, 1, endpoint, router, coding, warm=True)
            fork_launcher.keep_warm(0)
            spawn_launcher = MultiprocessingLauncher("spawn", preload=PRELOAD)
            spawn = measure(spawn_launcher, max(10, runs // 4), endpoint, router)
        finally:
            router.close(0)
            ctx.term()
    print("run start latency: launch → worker hello (the worker has connected and spoken)")
    print(f"first start while the forkserver preloads: {cold * 1000:.1f} ms (not in the figures below)")
    f50 = report("forkserver (preloaded)", fork)
    s50 = report("spawn (baseline)", spawn)
    print(f"ratio forkserver/spawn p50 = {f50 / s50:.3f}  (target: forkserver p50 ≤ 15 ms)")
    check, handover = proof_check_us(), secret_handover_us()
    print(f"hello proof check (daemon side): {check:.2f} µs; secret pipe + proof (launcher and worker side): "
          f"{handover:.2f} µs; together {(check + handover) / 1000 / f50:.5f} of the forkserver p50")
    if confined:
        u50 = report("unconfined (interleaved)", plain)
        c50 = report("confined (Landlock)", confined)
        print(f"confinement adds {c50 - u50:+.2f} ms at p50, ratio confined/unconfined = {c50 / u50:.3f}  "
              "(target: ≤ 1 ms added)")
        if namespaced:
            n50 = report("confined + .git view", namespaced)
            print(f"the read-only .git view adds {n50 - c50:+.2f} ms at p50 over confined, ratio {n50 / c50:.3f}; "
                  f"confined + view against unconfined: {n50 - u50:+.2f} ms; the view alone in a forked "
                  f"child: {git_view_us(root / 'project'):.0f} µs (median)")
        else:
            print("the read-only .git view not measured: no unprivileged user namespaces here")
    else:
        print("confined starts not measured: this kernel has no Landlock")
    c50, w50 = report("cold (interleaved)", cold_i), report("warm (a ready worker)", warm_i)
    print(f"a warm start: {w50:.2f} ms at p50 against {c50:.2f} ms cold, ratio warm/cold = {w50 / c50:.3f}  "
          "(target: warm p50 ≤ 4 ms)")
    b50 = report("floor (pipe → hello)", floor_i)
    print(f"the floor of a warm start (a bare forked process: socket, connect, hello with its proof): {b50:.2f} ms at "
          f"p50; a warm start is {w50 - b50:+.2f} ms over it, ratio warm/floor = {w50 / b50:.3f}")
    if warm_c:
        cc50, wc50 = report("cold Coding (confined)", cold_c), report("warm Coding (confined)", warm_c)
        print(f"a confined Coding run{' with its .git view' if with_git is not None else ''}: warm {wc50:.2f} ms "
              f"against {cc50:.2f} ms cold at p50, ratio {wc50 / cc50:.3f}")


def _cold(launcher: MultiprocessingLauncher, endpoint: str, router: zmq.Socket,
          confinement: ConfinementSpec | None = None) -> list[float]:
    """One cold start while the pool keeps a worker: the pool's worker is set aside for it."""
    _wait_warm(launcher)
    size = launcher.warm.size
    launcher.warm.resize(0)
    try:
        return measure(launcher, 1, endpoint, router, confinement)
    finally:
        launcher.warm.resize(size)
        launcher.keep_warm(size)


def _confinement(root: Path) -> ConfinementSpec:
    """A Coding run's spec, its directories made as the daemon makes them."""
    home, project = root / "home", root / "project"
    for d in (home / "tasks" / "t1", home / "scratch" / "r1", home / "approvals", home / "breaker", project):
        d.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(project)], check=True)  # a .git with hooks and config to bind
    return ConfinementSpec(abi=landlock_abi(), agent="coding", project_root=str(project), home=str(home),
                           runtime_dir=str(root), task_dir=str(home / "tasks" / "t1"),
                           scratch_dir=str(home / "scratch" / "r1"),
                           shared_dirs=[str(home / "breaker")], approvals_dir=str(home / "approvals"),
                           deny_read=[str(Path.home() / p) for p in (".ssh", ".gnupg", ".aws")])


if __name__ == "__main__":
    main()
