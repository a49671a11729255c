"""The retrieval modes: BM25, dense, or both fused; several queries fused into one ranking.

* ``"bm25"``: `memoryd.memory.retrieve.rank` (bm25s, the ``memory`` extra);
* ``"dense"``: `memoryd.memory.dense.dense_rank` (all-MiniLM-L6-v2, the ``dense`` extra);
* ``"hybrid"``: both rankings fused by reciprocal rank (`fuse`).

The rankings of several queries (a planned search) are fused the same way. A `Searcher`
only orders the records it is given: which records a conversation may see (its scope) is
decided before, by `LongTermMemory.records`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memoryd.memory.dense import Embeddings, dense_rank, load_model, model_loaded, require_dense
from memoryd.memory.records import MemoryRecord
from memoryd.memory.retrieve import rank

__all__ = ["RETRIEVALS", "RRF_CONSTANT", "Searcher", "check_retrieval", "fuse"]

RETRIEVALS = ("bm25", "dense", "hybrid")
RRF_CONSTANT = 60
"""The ``c`` of reciprocal rank fusion: a record at rank r scores 1 / (c + r)."""


def check_retrieval(value: Any) -> str:
    """Validate a retrieval mode.

    Args:
        value: The mode asked for.

    Returns:
        The mode.

    Raises:
        ValueError: Not one of `RETRIEVALS`.
    """
    if not isinstance(value, str) or value not in RETRIEVALS:
        raise ValueError(f"retrieval must be one of {', '.join(RETRIEVALS)}; got {value!r}")
    return value


def fuse(rankings: Sequence[Sequence[MemoryRecord]], *, k: int) -> list[MemoryRecord]:
    """Reciprocal rank fusion of several rankings, deterministically. Pure.

    A record scores the sum of ``1 / (RRF_CONSTANT + rank)`` over the rankings holding
    it (rank from 1); ties go to the best single rank, then to the earlier ranking.

    Args:
        rankings: Rankings, each best first.
        k: At most this many.

    Returns:
        Records, best first.
    """
    if len(rankings) == 1:
        return list(rankings[0][:k])
    scores: dict[str, float] = {}
    first: dict[str, tuple[int, int]] = {}
    by_id: dict[str, MemoryRecord] = {}
    for which, ranking in enumerate(rankings):
        for position, record in enumerate(ranking):
            scores[record.id] = scores.get(record.id, 0.0) + 1.0 / (RRF_CONSTANT + position + 1)
            first[record.id] = min(first.get(record.id, (position, which)), (position, which))
            by_id.setdefault(record.id, record)
    order = sorted(scores, key=lambda i: (-round(scores[i], 12), first[i]))
    return [by_id[i] for i in order[:k]]


class Searcher:
    """Orders records for queries in one retrieval mode; owns the embedding cache.

    Args:
        retrieval: ``"bm25"``, ``"dense"`` or ``"hybrid"``.
        min_similarity: Dense results below this cosine similarity are left out.
        embeddings: The embedding cache (dense and hybrid); default a new `Embeddings`.

    Attributes:
        embeddings: The embedding cache.

    Raises:
        ValueError: An unknown mode, or ``min_similarity`` outside [-1, 1].
        DenseUnavailable: Dense or hybrid without the ``dense`` extra.
    """

    def __init__(
        self,
        retrieval: str = "bm25",
        *,
        min_similarity: float = 0.0,
        embeddings: Embeddings | None = None,
    ) -> None:
        self.retrieval = check_retrieval(retrieval)
        if (
            isinstance(min_similarity, bool)
            or not isinstance(min_similarity, int | float)
            or not -1.0 <= min_similarity <= 1.0
        ):
            raise ValueError(f"min_similarity must be a number in [-1, 1], got {min_similarity!r}")
        self.min_similarity = float(min_similarity)
        self.dense = self.retrieval != "bm25"
        if self.dense:
            require_dense()
        self.embeddings = embeddings if embeddings is not None else Embeddings()

    @property
    def ready(self) -> bool:
        """Whether `search` needs no loading (BM25, or the model is in memory)."""
        return not self.dense or model_loaded()

    def warm(self, records: Sequence[MemoryRecord]) -> None:
        """Load the model and embed ``records`` now (does I/O the first time).

        Call it where I/O is allowed (reading records), so a later pure `search` on the
        same records only embeds its query.

        Args:
            records: The records about to be searched.
        """
        if self.dense:
            load_model()
            if records:
                self.embeddings.records(records)

    def search(
        self, queries: Sequence[str], records: Sequence[MemoryRecord], *, k: int
    ) -> list[MemoryRecord]:
        """The ``k`` best records for ``queries``, their rankings fused.

        Args:
            queries: One or more queries (blank ones are ignored).
            records: The records a conversation may see.
            k: At most this many.

        Returns:
            Records, best first.
        """
        queries = [q.strip() for q in queries if q.strip()]
        if not records or not queries or k <= 0:
            return []
        fused = self.retrieval == "hybrid" or len(queries) > 1
        depth = max(k * 4, 20) if fused else k
        rankings: list[list[MemoryRecord]] = []
        vectors = self.embeddings.records(records) if self.dense else None
        for query in queries:
            if self.retrieval != "dense":
                rankings.append(rank(query, records, k=depth))
            if vectors is not None:
                rankings.append(
                    dense_rank(
                        self.embeddings.query(query),
                        records,
                        vectors,
                        k=depth,
                        min_similarity=self.min_similarity,
                    )
                )
        return fuse(rankings, k=k)
