"""`python -m yagent.workers.codeintel --root PROJECT --index DIR …`: the code server's process, as the daemon starts
it (`daemon/codeintel_server.py`).

Before anything else — before numpy, the MCP SDK or any thread exists (Landlock confines only the threads started
after it) — it makes its files private (umask 077) and confines itself: it reads the system and Python trees and the
project (around the state home, the runtime directory and `[sandbox] deny_read`), and writes only its index
directory. It processes untrusted input (every file of the project) and so runs under the same kind of rules as a
read-only worker, although MCP servers of the user's own run unconfined. Where Landlock is missing it runs
unconfined and says so on stderr — unless `--sandbox-required`, when it refuses to start.
"""

from __future__ import annotations

import argparse
import os
import sys

from yagent.ipc.codeintel_settings import EMBEDDINGS_KEY_ENV

_QUIET_BLAS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS")


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m yagent.workers.codeintel",
                                     description="yagent's built-in code-intelligence MCP server (stdio)")
    parser.add_argument("--root", required=True, help="the project root it indexes")
    parser.add_argument("--index", required=True, help="the directory it keeps its index in")
    parser.add_argument("--home", default="", help="$YAGENT_HOME: never readable")
    parser.add_argument("--runtime-dir", default="", help="the daemon's runtime directory: never readable")
    parser.add_argument("--deny-read", action="append", default=[], help="more paths never read")
    parser.add_argument("--landlock-abi", type=int, default=0, help="the Landlock ABI to confine with (0: none)")
    parser.add_argument("--unconfined-reason", default="", help="why it runs unconfined, when it does")
    parser.add_argument("--sandbox-required", action="store_true", help="refuse to run unconfined")
    parser.add_argument("--max-file-bytes", type=int, default=1024 * 1024)
    parser.add_argument("--max-files", type=int, default=200_000)
    parser.add_argument("--exclude", action="append", default=[])
    parser.add_argument("--embeddings-url", default="")
    parser.add_argument("--embeddings-model", default="")
    return parser.parse_args(argv)


def confine(args: argparse.Namespace) -> str:
    """Confine this process as `args` say; "" when confined, else why not (the caller decides what follows)."""
    if args.landlock_abi < 1:
        return args.unconfined_reason or "Landlock is not available on this system"
    from yagent.workers.sandbox._landlock import LandlockError, restrict_self
    from yagent.workers.sandbox.policy import code_server_rules

    hidden = [p for p in (args.home, args.runtime_dir, *args.deny_read) if p]
    try:
        restrict_self(args.landlock_abi, code_server_rules(os.path.abspath(args.root), os.path.abspath(args.index),
                                                           hidden))
    except (LandlockError, OSError) as exc:
        return f"Landlock could not be applied ({exc})"
    return ""


def main(argv: list[str] | None = None) -> int:
    os.umask(0o077)
    for name in _QUIET_BLAS:  # numpy's BLAS would start a thread per core; the index needs none
        os.environ[name] = "1"
    args = _arguments(argv)
    api_key = os.environ.pop(EMBEDDINGS_KEY_ENV, "")
    try:
        os.makedirs(args.index, mode=0o700, exist_ok=True)
    except OSError as exc:
        print(f"yagent code server: cannot make its index directory {args.index}: {exc.strerror}", file=sys.stderr)
        return 2
    unconfined = confine(args)
    if unconfined and args.sandbox_required:
        print(f"yagent code server: not started: [sandbox] required = true, but {unconfined}", file=sys.stderr)
        return 2
    if unconfined:
        print(f"yagent code server: running unconfined: {unconfined}", file=sys.stderr, flush=True)
    from .server import ServerOptions, serve

    serve(ServerOptions(root=os.path.abspath(args.root), index=os.path.abspath(args.index),
                        max_file_bytes=args.max_file_bytes, max_files=args.max_files, exclude=tuple(args.exclude),
                        embeddings_url=args.embeddings_url, embeddings_model=args.embeddings_model,
                        embeddings_key=api_key, confined=not unconfined))
    return 0


if __name__ == "__main__":
    sys.exit(main())
