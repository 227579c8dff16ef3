"""Ranked search over the index's chunks: BM25 (`bm25s`, sparse matrices over numpy), and with an embeddings endpoint
configured, BM25 fused with cosine similarity of embeddings by reciprocal rank.

A `SearchModel` is built over a snapshot of the chunks (in the code server's indexing thread) and never changes;
files changed after its snapshot are masked out of its answers and their current chunks scored by term overlap, so a
search never shows a stale line and never waits for a rebuild, which follows each change in the background.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .terms import terms

__all__ = ["ChunkRef", "Hit", "SearchModel", "fuse", "overlap_score"]

RRF_K = 60  # reciprocal rank fusion's damping: the usual value


@dataclass(frozen=True, slots=True)
class ChunkRef:
    path: str
    chunk: int  # index into the file's chunks


@dataclass(frozen=True, slots=True)
class Hit:
    ref: ChunkRef
    score: float


class SearchModel:
    """BM25 over the chunks given at construction (an empty corpus answers nothing)."""

    def __init__(self, chunks: list[tuple[ChunkRef, dict[str, int]]], version: int) -> None:
        import bm25s
        import numpy

        self.version = version  # of the index it was built from
        self.refs = [ref for ref, _bag in chunks]
        self._numpy = numpy
        self._by_path: dict[str, list[int]] = {}
        for i, ref in enumerate(self.refs):
            self._by_path.setdefault(ref.path, []).append(i)
        self._model: Any = None
        corpus = [[term for term, count in bag.items() for _ in range(min(count, 50))] or ["\x00empty"]
                  for _ref, bag in chunks]
        if corpus:
            self._model = bm25s.BM25()
            self._model.index(corpus, show_progress=False)

    def __len__(self) -> int:
        return len(self.refs)

    def search(self, query_terms: list[str], k: int, *, stale: set[str] = frozenset(),  # type: ignore[assignment]
               within: str = "") -> list[Hit]:
        """The best `k` chunks for `query_terms`, leaving out files in `stale` and those not under `within`."""
        model = self._model
        if model is None or not query_terms:
            return []
        known = [t for t in query_terms if t in model.vocab_dict]
        if not known:
            return []
        numpy = self._numpy
        mask = None
        if stale or within:
            mask = numpy.ones(len(self.refs), dtype=numpy.float32)
            for path, indices in self._by_path.items():
                if path in stale or (within and not _under(path, within)):
                    mask[indices] = 0.0
        k = max(1, min(k, len(self.refs)))
        docs, scores = model.retrieve([known], k=k, show_progress=False, n_threads=0, weight_mask=mask)
        return [Hit(self.refs[int(d)], float(s)) for d, s in zip(docs[0], scores[0], strict=False) if float(s) > 0]


def overlap_score(query_terms: list[str], bag: dict[str, int]) -> float:
    """A plain score for a chunk the model has not seen yet: matched query terms, damped counts."""
    return sum(1.0 + min(bag.get(t, 0), 5) * 0.1 for t in set(query_terms) if t in bag)


def fuse(rankings: Iterable[list[ChunkRef]], k: int) -> list[ChunkRef]:
    """Reciprocal rank fusion of several rankings (best first) into one."""
    scores: dict[ChunkRef, float] = {}
    for ranking in rankings:
        for rank, ref in enumerate(ranking):
            scores[ref] = scores.get(ref, 0.0) + 1.0 / (RRF_K + rank + 1)
    return [ref for ref, _ in sorted(scores.items(), key=lambda item: -item[1])][:k]


def query_terms(text: str) -> list[str]:
    return list(dict.fromkeys(terms(text, 200)))


def _under(path: str, prefix: str) -> bool:
    prefix = prefix.strip("/")
    return not prefix or prefix == "." or path == prefix or path.startswith(prefix + "/")
