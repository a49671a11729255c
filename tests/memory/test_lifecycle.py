"""LongTermMemory: budget and purity of prepare, forgetting, persistence, the Agent."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from structlog.testing import capture_logs

import memoryd
import supervisors
from memoryd import messages as m
from memoryd.llm import ScriptedModel
from memoryd.memory import Fact, LongTermMemory, records_conversation
from tests.memory.test_long_term import fact, facts, memory_of, texts

GLOBAL = records_conversation("global")


@pytest.fixture
def store() -> memoryd.StoreHandle:
    return memoryd.EphemeralStore.start()


def test_prepare_injects_one_message_within_the_budget(store: memoryd.StoreHandle) -> None:
    """Only records that fit max_chars are injected, in ONE system message, best first."""
    long = "Alice tea " + "very " * 60 + "long"
    model = ScriptedModel([facts(fact(long), fact("Alice likes tea"), fact("Alice tea mug"))])
    memory = LongTermMemory(store, llm=model, max_chars=120)
    memory.append("s1", [m.user("notes")])
    memory.history("s1")
    [block] = memory_of(memory.prepare("s1", [m.user("Alice tea?")]))
    assert len(block) <= 120
    assert "Alice likes tea" in block and "Alice tea mug" in block and "very" not in block


def test_prepare_is_pure_and_needs_no_store(store: memoryd.StoreHandle) -> None:
    """prepare leaves its input untouched and works with the store stopped (no I/O)."""
    memory = LongTermMemory(store, llm=ScriptedModel([facts(fact("Alice likes tea"))]))
    memory.append("s1", [m.user("tea")])
    history = memory.history("s1")
    sent = [*history, m.user("what does Alice like?")]
    before = copy.deepcopy(sent)
    version = store.version(GLOBAL)
    store.stop()
    prepared = memory.prepare("s1", sent)
    assert sent == before
    assert memory_of(prepared) and prepared[-1] == sent[-1]
    again = memoryd.whereis(store.name)
    assert again is None or again.version(GLOBAL) == version


def test_prepare_without_a_loaded_snapshot_injects_nothing(store: memoryd.StoreHandle) -> None:
    """A conversation whose history was never loaded gets no memory (prepare reads nothing)."""
    memory = LongTermMemory(store, llm=ScriptedModel([facts(fact("Alice likes tea"))]))
    memory.append("s1", [m.user("tea")])
    assert memory_of(memory.prepare("other", [m.user("Alice tea")])) == []
    memory.history("other")
    assert memory_of(memory.prepare("other", [m.user("Alice tea")]))


def test_forget_deletes_session_records_and_global_ones_only_it_provided(
    store: memoryd.StoreHandle,
) -> None:
    """clear(forget=True): session + sole-provenance global records get delete events."""
    model = ScriptedModel(
        [
            facts(
                fact("a secret of s1", scope="session"),
                fact("only s1 said this"),
                fact("Alice likes tea", key="drink"),
            ),
            facts(fact("Alice likes tea", key="drink")),
        ]
    )
    memory = LongTermMemory(store, llm=model)
    memory.append("s1", [m.user("...")])
    memory.append("s2", [m.user("...")])
    memory.clear("s1", forget=True)
    assert store.get("s1") == []
    assert texts(memory, "s1") == ["Alice likes tea"]
    assert texts(memory, "s2") == ["Alice likes tea"]
    ops = [dict(e.data or {})["op"] for e in store.events(GLOBAL)]
    assert ops == ["add", "add", "update", "delete"]
    session_ops = [
        dict(e.data or {})["op"] for e in store.events(records_conversation("session", "s1"))
    ]
    assert session_ops == ["add", "delete"]


def test_clear_without_forget_keeps_the_records(store: memoryd.StoreHandle) -> None:
    """A plain clear empties the conversation; its records stay."""
    memory = LongTermMemory(store, llm=ScriptedModel([facts(fact("kept", scope="session"))]))
    memory.append("s1", [m.user("...")])
    memory.clear("s1")
    assert texts(memory, "s1") == ["kept"]


def test_records_survive_a_store_crash(store: memoryd.StoreHandle) -> None:
    """After supervisors.kill, a new LongTermMemory on the restarted store recalls them."""
    memory = LongTermMemory(store, llm=ScriptedModel([facts(fact("Alice likes tea"))]))
    memory.append("s1", [m.user("tea")])
    supervisors.kill(store.name)
    again = LongTermMemory(memoryd.whereis(store.name), llm=ScriptedModel([]))
    assert [r.text for r in again.recall("s9", "what does Alice like").records] == [
        "Alice likes tea"
    ]


def test_records_survive_stop_and_start_of_an_lmdb_store(tmp_path: Path) -> None:
    """A durable store stopped and started again keeps records, updates and deletes."""
    store = memoryd.LmdbStore.start(tmp_path / "data", name="ltm")
    model = ScriptedModel(
        [
            facts(fact("Alice likes tea", key="drink"), fact("temp", scope="session")),
            facts(fact("Alice likes coffee", key="drink"), fact("s2 note", scope="session")),
        ]
    )
    memory = LongTermMemory(store, llm=model)
    memory.append("s1", [m.user("...")])
    memory.append("s2", [m.user("...")])
    memory.forget("s1")
    store.stop()
    again = LongTermMemory(
        memoryd.LmdbStore.start(tmp_path / "data", name="ltm"), llm=ScriptedModel([])
    )
    assert texts(again, "s1") == ["Alice likes coffee"]
    assert texts(again, "s2") == ["Alice likes coffee", "s2 note"]


def test_an_agent_run_gets_memory_from_an_earlier_session(store: memoryd.StoreHandle) -> None:
    """An Agent on LongTermMemory: a fact from session a is in session b's LLM request."""
    model = ScriptedModel(
        [
            "Nice to meet you, Alice.",
            facts(fact("The user's name is Alice", key="name")),
            "You are Alice.",
            facts(),
        ]
    )
    agent = memoryd.Agent(llm=model, memory=LongTermMemory(store, llm=model))
    agent.run("Hi, I'm Alice", conversation_id="a")
    assert agent.run("What's my name?", conversation_id="b").text == "You are Alice."
    assert memory_of(model.calls[2]) == [
        "Long-term memory (facts from earlier conversations):\n- (fact) The user's name is Alice"
    ]
    assert [x["content"] for x in store.get("b")] == ["What's my name?", "You are Alice."]


def test_a_concurrent_record_write_is_retried_not_lost(
    store: memoryd.StoreHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write landing between remember's read and write: a retry keeps both records."""
    other = LongTermMemory(store, llm=ScriptedModel([]))
    real_events = store.events
    reads: list[str] = []

    def events(cid: str, *, after: int = 0) -> list[memoryd.Event]:
        reads.append(cid)
        found = real_events(cid, after=after)
        if cid == GLOBAL and reads.count(GLOBAL) == 2:  # the read inside remember
            other.remember("x", Fact(scope="global", kind="fact", body={"text": "from x"}))
        return found

    monkeypatch.setattr(store, "events", events)
    memory = LongTermMemory(store, llm=ScriptedModel([facts(fact("from s1"))]))
    with capture_logs() as logs:
        memory.append("s1", [m.user("...")])
    assert texts(memory, "s1") == ["from s1", "from x"]
    assert [x["attempt"] for x in logs if x["event"] == "memory_write_retried"] == [1]


def test_explain_reports_the_injected_memory(store: memoryd.StoreHandle) -> None:
    """memoryd.explain runs history then prepare: one more (system) message is sent."""
    memory = LongTermMemory(store, llm=ScriptedModel([facts(fact("Alice likes tea"))]))
    memory.append("s1", [m.user("tea")])
    report = memoryd.explain(memory, "s1", [m.user("what does Alice like?")])
    assert (report.loaded, report.sent) == (2, 3)


def test_the_rerank_filter_reranks_memory_in_agent_runs(store: memoryd.StoreHandle) -> None:
    """With filters=[memory.rerank_filter()], the run's request holds the reranked block."""
    writer = LongTermMemory(
        store,
        llm=ScriptedModel([facts(fact("Alice drinks green tea"), fact("Alice buys tea in Kyoto"))]),
    )
    writer.append("old", [m.user("notes")])
    kyoto = next(r.id for r in writer.records("x") if "Kyoto" in r.text)
    model = ScriptedModel([json.dumps({"ids": [kyoto]}), "In Kyoto.", facts()])
    memory = LongTermMemory(store, llm=model, rerank=True)
    agent = memoryd.Agent(
        llm=model, memory=memory, filters=[memory.rerank_filter()], system_prompt="Be brief."
    )
    assert agent.run("Where does Alice buy tea?", conversation_id="new").text == "In Kyoto."
    assert "Question: Where does Alice buy tea?" in model.calls[0][-1]["content"]
    sent = model.calls[1]
    assert memory_of(sent) == [
        "Long-term memory (facts from earlier conversations):\n- (fact) Alice buys tea in Kyoto"
    ]
    assert sent[0]["content"] == "Be brief." and sent[-1]["role"] == "user"
