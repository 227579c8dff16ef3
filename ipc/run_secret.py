"""The per-run secret a worker proves it holds when it says hello on workers.sock.

The launcher makes a fresh secret for each run and hands it to the worker over an inherited pipe (never the
environment, argv or an event); the worker answers with `hello_proof`, an HMAC of its run id and the random
ZeroMQ identity it connected with, never the secret itself. No daemon-chosen nonce (which would cost a round
trip) is needed: the secret is used once — the first good hello binds the run to that identity and every
later hello for the run is refused, replayed or not — and a proof names the identity it was made for, so one
seen on another connection is worth nothing.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

__all__ = ["SECRET_BYTES", "hello_proof", "new_run_secret", "proves"]

SECRET_BYTES = 32
_CONTEXT = b"yagent worker hello v1\0"  # a proof of this secret means nothing in any other exchange


def new_run_secret() -> bytes:
    return secrets.token_bytes(SECRET_BYTES)


def hello_proof(secret: bytes, run_id: str, identity: bytes) -> bytes:
    """What a worker holding `secret` sends in its hello for `run_id` from the connection `identity`."""
    return hmac.new(secret, _CONTEXT + run_id.encode() + b"\0" + identity, hashlib.sha256).digest()


def proves(secret: bytes, run_id: str, identity: bytes, proof: bytes) -> bool:
    """Whether `proof` shows the secret for this run and connection; never true without a secret."""
    if len(secret) < SECRET_BYTES or not isinstance(proof, bytes):
        return False
    return hmac.compare_digest(hello_proof(secret, run_id, identity), proof)
