"""Dense and hybrid retrieval with the real all-MiniLM-L6-v2 (the ``dense`` extra).

The model is loaded once for the whole session (the `model` fixture of conftest.py);
each test embeds a handful of records. The LLM is a ScriptedModel, as everywhere.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from structlog.testing import capture_logs

import memoryd
from memoryd import messages as m
from memoryd.llm import ScriptedModel
from memoryd.memory import Fact, LongTermMemory, records_conversation
from memoryd.memory import dense as dense_module
from tests.memory.test_long_term import fact, facts, memory_of

GLOBAL = records_conversation("global")
NOTES = [
    "Alice starts every day with a cup of matcha",
    "The deploy pipeline runs on Fridays",
    "Bob's dog is called Rex",
]
every_mode = pytest.mark.parametrize("mode", ["bm25", "dense", "hybrid"])


@pytest.fixture
def store() -> Iterator[memoryd.StoreHandle]:
    yield memoryd.EphemeralStore.start()


def seeded(store: memoryd.StoreHandle, **options: Any) -> LongTermMemory:
    memory = LongTermMemory(store, llm=ScriptedModel([facts(*map(fact, NOTES))]), **options)
    memory.append("notes", [m.user("notes")])
    return memory


def learn(store: memoryd.StoreHandle, said: str, *found: dict[str, Any]) -> None:
    """Session "a" hears ``said``, and the extraction finds the facts ``found``."""
    writer = LongTermMemory(store, llm=ScriptedModel([facts(*found)]))
    writer.append("a", [m.user(said)])


def test_dense_recall_finds_a_paraphrase_bm25_cannot(model: Any, store: Any) -> None:
    """No shared word: BM25 recalls nothing, dense (and hybrid) find the matcha record."""
    question = "What does the user drink in the morning?"
    assert seeded(store).recall("s", question).records == ()
    for mode in ("dense", "hybrid"):
        memory = LongTermMemory(store, llm=ScriptedModel([]), retrieval=mode)
        recalled = memory.recall("s", question).records
        assert recalled[0].text == NOTES[0], mode
        assert "Fridays" not in " ".join(r.text for r in recalled)  # below min_similarity


def test_an_unrelated_query_recalls_nothing_below_min_similarity(model: Any, store: Any) -> None:
    """min_similarity keeps unrelated records out; min_similarity=-1 keeps every one."""
    memory = seeded(store, retrieval="dense")
    assert memory.recall("s", "quantum chromodynamics lecture notes").records == ()
    loose = LongTermMemory(store, llm=ScriptedModel([]), retrieval="dense", min_similarity=-1)
    assert len(loose.recall("s", "quantum chromodynamics lecture notes").records) == 3


def test_record_embeddings_are_cached_by_id_and_version(model: Any, store: Any) -> None:
    """Recalls embed only records not seen before; an updated record is embedded again."""
    memory = seeded(store, retrieval="dense")
    embeddings = memory.searcher.embeddings
    assert embeddings.encoded == 3  # the snapshot, embedded where I/O is allowed
    memory.recall("s", "which pet does Bob have?")
    memory.recall("s", "when do we ship releases?")
    memory.history("s")
    assert embeddings.encoded == 3
    memory.remember("x", Fact(scope="global", kind="fact", body={"text": NOTES[2] + " Junior"}))
    dog = next(r for r in memory.records("s") if "Rex" in r.text)
    assert embeddings.encoded == 4
    memory.remember("x", Fact(scope="global", kind="fact", body={"text": NOTES[2] + " Junior"}))
    memory.records("s")
    assert embeddings.encoded == 4  # an unchanged restatement writes nothing
    before = dog.version
    store.record(GLOBAL, "memo", data={**dog.to_data("update"), "body": {"text": "Rex is old"}})
    [again] = [r for r in memory.records("s") if r.id == dog.id]
    assert again.version > before and embeddings.encoded == 5
    assert [r.id for r in memory.recall("s", "an elderly dog").records][:1] == [dog.id]


@every_mode
def test_session_records_never_reach_another_session_in_any_mode(
    model: Any, store: Any, mode: str
) -> None:
    """Recall and prepare: a's ticket stays in a; the global name reaches a and b."""
    learn(
        store,
        "I'm Alice, ticket 4242",
        fact("The user's name is Alice", scope="global"),
        fact("The user's ticket number is 4242", scope="session"),
    )
    memory = LongTermMemory(store, llm=ScriptedModel([]), retrieval=mode, min_similarity=-1)
    question = "what is my name and ticket number?"
    for cid, sees_ticket in (("a", True), ("b", False)):
        recalled = " ".join(r.text for r in memory.recall(cid, question).records)
        assert "Alice" in recalled
        assert ("4242" in recalled) is sees_ticket
        fresh = LongTermMemory(store, llm=ScriptedModel([]), retrieval=mode, min_similarity=-1)
        [block] = memory_of(fresh.prepare(cid, [*fresh.history(cid), m.user(question)]))
        assert "Alice" in block and ("4242" in block) is sees_ticket


def test_dense_prepare_is_pure_once_history_loaded_the_snapshot(model: Any, store: Any) -> None:
    """After history, prepare ranks by embeddings with the store stopped; input untouched."""
    memory = seeded(store, retrieval="dense")
    reader = LongTermMemory(store, llm=ScriptedModel([]), retrieval="dense")
    sent = [*reader.history("new"), m.user("When do we ship releases?")]
    before = copy.deepcopy(sent)
    store.stop()
    prepared = reader.prepare("new", sent)
    assert sent == before
    assert memory_of(prepared) == [
        "Long-term memory (facts from earlier conversations):\n- (fact) " + NOTES[1]
    ]
    assert memory.searcher.embeddings.encoded == 3


def test_prepare_falls_back_to_bm25_when_the_model_is_not_loaded(
    model: Any, store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no model in memory, prepare does not load it: BM25, memory_dense_not_ready."""
    memory = seeded(store, retrieval="dense")
    memory.history("s")
    monkeypatch.setattr(dense_module, "_model", {})
    with capture_logs() as logs:
        prepared = memory.prepare("s", [m.user("Bob dog")])
    assert [x["event"] for x in logs] == ["memory_dense_not_ready"]
    assert "Rex" in memory_of(prepared)[0]
    assert not dense_module.model_loaded()


def test_planned_queries_are_searched_densely_and_fused(model: Any, store: Any) -> None:
    """Two planned queries in hybrid mode recall the record each one is about."""
    memory = seeded(store, retrieval="hybrid", plan_queries=True, top_k=2)
    memory.llm = ScriptedModel(['{"queries": ["morning drink", "release schedule"]}'])
    recall = memory.recall("s", "Remind me of my habits and when we ship")
    assert {r.text for r in recall.records} == {NOTES[0], NOTES[1]}
    assert recall.diagnostics == ()


@every_mode
def test_the_rerank_of_one_session_never_sees_another_sessions_records(
    model: Any, store: Any, mode: str
) -> None:
    """With planning and rerank on, b's LLM prompts hold the global record, not a's."""
    learn(
        store,
        "...",
        fact("Alice's ticket tracker is Jira", scope="global"),
        fact("Alice writes tickets in English", scope="global"),
        fact("Alice's open ticket is 4242", scope="session"),
    )
    prompts: list[str] = []

    def keep_all(sent: list[dict[str, Any]]) -> str:
        prompts.append(sent[-1]["content"])
        ids = [line.split("]")[0][1:] for line in sent[-1]["content"].splitlines() if "[" in line]
        return '{"ids": ' + str(ids).replace("'", '"') + "}"

    script = ['{"queries": ["Alice ticket", "tracker"]}', keep_all]
    memory = LongTermMemory(
        store,
        llm=ScriptedModel(script * 2),
        retrieval=mode,
        min_similarity=-1,
        plan_queries=True,
        rerank=True,
    )
    seen = {cid: {r.text for r in memory.recall(cid, "my ticket?").records} for cid in "ab"}
    shared = {"Alice's ticket tracker is Jira", "Alice writes tickets in English"}
    assert seen["a"] == {*shared, "Alice's open ticket is 4242"}
    assert seen["b"] == shared
    assert len(prompts) == 2
    assert "4242" in prompts[0] and "4242" not in prompts[1]
