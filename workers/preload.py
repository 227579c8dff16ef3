"""Imported once by the forkserver, so every forked worker starts ready.

Importing the agents registers every agent kind; counting one string loads the tokenizer's ranks,
which forked workers then share copy-on-write instead of each loading their own.
"""

from __future__ import annotations

from . import agents  # noqa: F401 - registers the agent kinds
from .context.tokens import count_tokens_exact

count_tokens_exact("warm up the tokenizer")
