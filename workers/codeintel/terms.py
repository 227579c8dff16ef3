"""How code and questions become search terms: identifiers split at case changes, underscores and digits, lower-cased,
each whole compound kept too (`getUserName` → `getusername`, `get`, `user`, `name`), keywords and one-letter words
left out. Chunks and queries go through the same function, so a question's words meet the code's."""

from __future__ import annotations

import re
from collections import Counter
from functools import lru_cache

__all__ = ["MAX_CHUNK_TERMS", "bag_of_terms", "terms"]

MAX_CHUNK_TERMS = 400  # terms read from one chunk's body: a huge function is found by its start
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PARTS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")

_STOP = frozenset(" ".join("""
a an and are as at be by do else for from if in is it of on or the to with not no none null nil true false
self this cls def return import class function func fn var let const int void char str string bool new pub use
mod impl struct enum type public private protected static final package end then elif while break continue try
except finally catch throw throws raise pass lambda yield async await go defer chan map range switch case
default
""".splitlines()).split())


@lru_cache(maxsize=200_000)
def _split(word: str) -> tuple[str, ...]:
    parts = [p.lower() for p in _PARTS.findall(word)]
    whole = word.lower().strip("_")
    out = [p for p in parts if len(p) > 1 and p not in _STOP and not p.isdigit()]
    if len(parts) != 1 and len(whole) > 1 and whole not in _STOP:  # a compound, or a word of no letters' parts
        out.append(whole)
    return tuple(out)


def terms(text: str, limit: int | None = None) -> list[str]:
    """The search terms of `text`, in order (at most `limit` words of it are read)."""
    out: list[str] = []
    for i, match in enumerate(_WORD.finditer(text)):
        if limit is not None and i >= limit:
            break
        out.extend(_split(match.group()))
    return out


def bag_of_terms(*texts: str, weights: tuple[int, ...] = (), limit: int = MAX_CHUNK_TERMS) -> dict[str, int]:
    """Term frequencies over `texts`, the i-th counted `weights[i]` times (default 1); each text read up to `limit`
    words. Words are counted first (in C) and each distinct word split once."""
    bag: Counter[str] = Counter()
    for i, text in enumerate(texts):
        if not text:
            continue
        weight = weights[i] if i < len(weights) else 1
        words = _WORD.findall(text)
        for word, count in Counter(words[:limit] if len(words) > limit else words).items():
            for term in _split(word):
                bag[term] += count * weight
    return dict(bag)
