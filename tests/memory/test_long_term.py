"""LongTermMemory with ScriptedModel on real stores: extraction, scopes, rerank, forgetting."""

from __future__ import annotations

import json
from typing import Any

import pytest
from structlog.testing import capture_logs

import memoryd
from memoryd import messages as m
from memoryd.llm import LLMError, ScriptedModel
from memoryd.memory import LongTermMemory, SchemaError, records_conversation
from memoryd.memory.records import DEFAULT_IMPORTANCE
from memoryd.memory.retrieve import rank

GLOBAL = records_conversation("global")


def facts(*items: dict[str, Any]) -> str:
    """An extraction reply holding ``items``."""
    return json.dumps({"facts": list(items)})


def fact(
    text: str, *, key: str | None = None, scope: str = "global", kind: str = "fact"
) -> dict[str, Any]:
    body = {"text": text} if key is None else {"text": text, "key": key}
    return {"scope": scope, "kind": kind, "body": body}


def memory_of(sent: list[dict[str, Any]]) -> list[str]:
    """The contents of the injected long-term memory messages."""
    return [
        x["content"]
        for x in sent
        if x["role"] == "system" and x["content"].startswith("Long-term memory")
    ]


def texts(memory: LongTermMemory, cid: str) -> list[str]:
    return sorted(r.text for r in memory.records(cid))


@pytest.fixture
def store() -> memoryd.StoreHandle:
    return memoryd.EphemeralStore.start()


def test_append_extracts_facts_into_memo_events_with_provenance(
    store: memoryd.StoreHandle,
) -> None:
    """After append, each extracted fact is an `add` memo event naming where it came from."""
    model = ScriptedModel([facts(fact("Alice likes green tea", key="drink"))])
    memory = LongTermMemory(store, llm=model)
    version = memory.append("s1", [m.user("I'm Alice and I love green tea")])
    assert "I love green tea" in model.calls[0][-1]["content"]
    [event] = store.events(GLOBAL)
    assert event.kind == "memo"
    data = dict(event.data or {})
    assert data["op"] == "add" and data["body"] == {"text": "Alice likes green tea", "key": "drink"}
    assert data["provenance"] == [{"conversation_id": "s1", "versions": [version]}]
    assert [x["content"] for x in store.get("s1")] == ["I'm Alice and I love green tea"]
    assert store.get(GLOBAL) == []


def test_a_restated_fact_updates_the_record_instead_of_duplicating(
    store: memoryd.StoreHandle,
) -> None:
    """Same kind and key (or normalised text): one record, updated, provenance merged."""
    model = ScriptedModel(
        [
            facts(fact("Alice likes green tea", key="drink")),
            facts(fact("Alice now prefers coffee", key="Drink")),
            facts(fact("Alice now prefers coffee!", key="drink")),
        ]
    )
    memory = LongTermMemory(store, llm=model)
    memory.append("s1", [m.user("tea please")])
    memory.append("s2", [m.user("coffee from now on")])
    before = len(store.events(GLOBAL))
    memory.append("s2", [m.user("still coffee")])
    [record] = memory.records("s3")
    assert record.text == "Alice now prefers coffee!"
    assert [p.conversation_id for p in record.provenance] == ["s1", "s2"]
    assert [dict(e.data or {})["op"] for e in store.events(GLOBAL)] == ["add", "update", "update"]
    assert before == 2
    assert "Known records" in model.calls[1][-1]["content"]
    assert "green tea" in model.calls[1][-1]["content"]


def test_an_unchanged_restatement_writes_nothing(store: memoryd.StoreHandle) -> None:
    """A fact equal to its record (same conversation) adds no event."""
    reply = facts(fact("The repo uses Python 3.11"))
    memory = LongTermMemory(store, llm=ScriptedModel([reply, reply]))
    memory.append("s1", [m.user("we use 3.11")], idempotency_key="k")
    memory.append("s1", [m.user("we use 3.11")], idempotency_key="k")
    assert len(store.events(GLOBAL)) == 1


def test_session_records_stay_in_their_session_and_global_ones_reach_all(
    store: memoryd.StoreHandle,
) -> None:
    """A session record is injected only in its own conversation; a global one everywhere."""
    model = ScriptedModel(
        [
            facts(
                fact("The user's name is Alice", scope="global"),
                fact("The user's ticket number is 4242", scope="session"),
            )
        ]
    )
    memory = LongTermMemory(store, llm=model)
    memory.append("a", [m.user("I'm Alice, ticket 4242")])
    for cid, expect_ticket in (("a", True), ("b", False)):
        history = memory.history(cid)
        sent = memory.prepare(cid, [*history, m.user("what is my name and ticket number?")])
        [block] = memory_of(sent)
        assert "Alice" in block
        assert ("4242" in block) is expect_ticket
    assert texts(memory, "b") == ["The user's name is Alice"]


def test_scopes_setting_limits_what_is_read_and_written(store: memoryd.StoreHandle) -> None:
    """With scopes=("session",), a global fact is skipped and nothing global is read."""
    model = ScriptedModel(
        [facts(fact("global thing", scope="global"), fact("session thing", scope="session"))]
    )
    memory = LongTermMemory(store, llm=model, scopes=("session",))
    memory.append("a", [m.user("hi")])
    assert store.events(GLOBAL) == []
    assert texts(memory, "a") == ["session thing"]
    with pytest.raises(ValueError, match="scopes"):
        LongTermMemory(store, llm=model, scopes=("team",))


@pytest.mark.parametrize(
    "reply",
    [
        "I think Alice likes tea",
        '{"facts": {"text": "x"}}',
        m.assistant(tool_calls=[m.tool_call("c", "f", {})]),
        LLMError("rate limited"),
    ],
    ids=["prose", "wrong-shape", "no-text", "llm-error"],
)
def test_bad_llm_output_is_logged_and_skipped_never_raised(
    store: memoryd.StoreHandle, reply: Any
) -> None:
    """Invalid extraction output or an LLM failure: the append succeeds, nothing recorded."""
    memory = LongTermMemory(store, llm=ScriptedModel([reply]))
    with capture_logs() as logs:
        version = memory.append("s1", [m.user("hello")])
    assert version == store.version("s1") == 1
    assert store.events(GLOBAL) == []
    expected = (
        "memory_extraction_failed" if isinstance(reply, LLMError) else ("memory_extraction_invalid")
    )
    assert [x["event"] for x in logs if x["event"].startswith("memory_extraction")] == [expected]


def test_an_invalid_fact_is_skipped_and_the_valid_ones_kept(store: memoryd.StoreHandle) -> None:
    """A fact whose body breaks the schema is logged; its siblings are stored."""
    schema = {
        "type": "object",
        "required": ["text", "confidence"],
        "properties": {"text": {"type": "string"}, "confidence": {"type": "number"}},
    }
    reply = json.dumps(
        {
            "facts": [
                {"scope": "global", "body": {"text": "kept", "confidence": 0.9}},
                {"scope": "global", "body": {"text": "dropped"}},
            ]
        }
    )
    memory = LongTermMemory(store, llm=ScriptedModel([reply]), body_schema=schema)
    with capture_logs() as logs:
        memory.append("s1", [m.user("hello")])
    assert texts(memory, "s1") == ["kept"]
    [problem] = [x for x in logs if x["event"] == "memory_extraction_invalid"]
    assert "confidence" in problem["error"]


def test_a_reply_listing_too_many_facts_stores_max_facts_and_logs_a_few_lines(
    store: memoryd.StoreHandle,
) -> None:
    """A reply of 1,000 facts (a model talked into listing everything) stores the first
    max_facts; 10 invalid ones among them are logged as five lines and a count, and the
    dropped rest as one line."""
    facts = [{"scope": "global", "body": {}} for _ in range(10)]
    facts += [{"scope": "global", "body": {"text": f"fact {n}"}} for n in range(990)]
    memory = LongTermMemory(store, llm=ScriptedModel([json.dumps({"facts": facts})]), max_facts=3)
    with capture_logs() as logs:
        memory.append("s1", [m.user("hello")])
    assert texts(memory, "s1") == ["fact 0", "fact 1", "fact 2"]
    problems = [x["error"] for x in logs if x["event"] == "memory_extraction_invalid"]
    assert len(problems) == 6
    assert problems[-1] == "6 more problems in this reply"
    with pytest.raises(ValueError, match="max_facts must be an int >= 1"):
        LongTermMemory(store, llm=ScriptedModel([]), max_facts=0)
    assert LongTermMemory(store, llm=ScriptedModel([])).max_facts == 20  # the stated default


def seeded(
    store: memoryd.StoreHandle, rerank_replies: list[Any], **options: Any
) -> tuple[LongTermMemory, ScriptedModel]:
    """A memory holding three tea-related global records plus one unrelated."""
    model = ScriptedModel(
        [
            facts(
                fact("Alice drinks green tea"),
                fact("Alice buys tea in Kyoto"),
                fact("Alice brews tea at 80 degrees"),
                fact("The deploy runs on Fridays"),
            ),
            *rerank_replies,
        ]
    )
    memory = LongTermMemory(store, llm=model, rerank=True, **options)
    memory.append("s1", [m.user("notes")])
    return memory, model


def test_rerank_orders_the_candidates_and_prepare_uses_it(store: memoryd.StoreHandle) -> None:
    """A valid rerank reply sets the order; prepare injects the cached recall."""

    def choose(sent: list[dict[str, Any]]) -> str:
        prompt = sent[-1]["content"]
        ids = {line.split("]")[0][1:]: line for line in prompt.splitlines() if line.startswith("[")}
        wanted = [i for i, line in ids.items() if "Kyoto" in line]
        return json.dumps({"ids": wanted})

    memory, model = seeded(store, [choose])
    recall = memory.recall("s1", "where does Alice buy tea?")
    assert [r.text for r in recall.records] == ["Alice buys tea in Kyoto"]
    assert recall.diagnostics == ()
    assert "Fridays" not in model.calls[1][-1]["content"]  # BM25 candidates only
    sent = memory.prepare("s1", [m.system("Be brief."), m.user("where does Alice buy tea?")])
    assert [x["role"] for x in sent] == ["system", "system", "user"]
    assert sent[0]["content"] == "Be brief."
    assert memory_of(sent) == [
        "Long-term memory (facts from earlier conversations):\n- (fact) Alice buys tea in Kyoto"
    ]
    assert model.remaining == 0


def test_rerank_is_skipped_below_the_minimum_candidates(store: memoryd.StoreHandle) -> None:
    """One candidate and rerank_min_candidates=2: no LLM call, memory_rerank_skipped."""
    memory, model = seeded(store, [])
    with capture_logs() as logs:
        recall = memory.recall("s1", "deploy day?")
    assert [r.text for r in recall.records] == ["The deploy runs on Fridays"]
    assert [d.event for d in recall.diagnostics] == ["memory_rerank_skipped"]
    assert [x["event"] for x in logs] == ["memory_rerank_skipped"]
    assert len(model.calls) == 1


def test_a_failing_rerank_falls_back_to_the_deterministic_order(
    store: memoryd.StoreHandle,
) -> None:
    """An error, then (one retry) an unknown id: BM25 order, memory_rerank_failed."""
    memory, model = seeded(store, [LLMError("down"), '{"ids": ["no-such-id"]}'])
    with capture_logs() as logs:
        recall = memory.recall("s1", "Alice tea")
    expected = rank("Alice tea", memory.records("s1"), k=5)
    assert [r.id for r in recall.records] == [r.id for r in expected]
    assert len(expected) == 3
    assert [d.event for d in recall.diagnostics] == ["memory_rerank_failed"]
    [event] = [x for x in logs if x["event"] == "memory_rerank_failed"]
    assert "no-such-id" in event["error"] and event["fallback"] == "deterministic"
    assert model.remaining == 0


def test_an_empty_rerank_keeps_the_candidates_by_default(store: memoryd.StoreHandle) -> None:
    """A rerank keeping nothing: the candidates are injected, memory_rerank_empty_fallback."""
    memory, _ = seeded(store, ['{"ids": []}'])
    recall = memory.recall("s1", "Alice tea")
    assert len(recall.records) == 3
    assert [d.event for d in recall.diagnostics] == ["memory_rerank_empty_fallback"]
    assert memory_of(memory.prepare("s1", [m.user("Alice tea")]))


def test_an_empty_rerank_injects_nothing_when_told(store: memoryd.StoreHandle) -> None:
    """keep_candidates_on_empty_rerank=False: no memory message, memory_rerank_empty."""
    memory, _ = seeded(store, ['{"ids": []}'], keep_candidates_on_empty_rerank=False)
    recall = memory.recall("s1", "Alice tea")
    assert recall.records == ()
    assert [d.event for d in recall.diagnostics] == ["memory_rerank_empty"]
    assert memory_of(memory.prepare("s1", [m.user("Alice tea")])) == []


def test_a_restatement_keeps_the_importance_unless_it_gives_one(
    store: memoryd.StoreHandle,
) -> None:
    """Importance 0.9, then restated with none: still 0.9; restated with 0.2: 0.2."""
    first = {**fact("Alice likes green tea", key="drink"), "importance": 0.9}
    model = ScriptedModel(
        [
            facts(first),
            facts(fact("Alice likes oolong tea", key="drink")),
            facts({**fact("Alice likes oolong tea", key="drink"), "importance": 0.2}),
        ]
    )
    memory = LongTermMemory(store, llm=model)
    memory.append("s1", [m.user("green tea")])
    memory.append("s2", [m.user("oolong now")])
    [record] = memory.records("s3")
    assert (record.text, record.importance) == ("Alice likes oolong tea", 0.9)
    memory.append("s2", [m.user("oolong, not that important")])
    [record] = memory.records("s3")
    assert record.importance == 0.2
    assert [dict(e.data or {})["importance"] for e in store.events(GLOBAL)] == [0.9, 0.9, 0.2]


def test_a_new_record_without_importance_gets_the_default(store: memoryd.StoreHandle) -> None:
    """An extraction naming no importance stores DEFAULT_IMPORTANCE (0.5)."""
    memory = LongTermMemory(store, llm=ScriptedModel([facts(fact("The repo uses Python"))]))
    memory.append("s1", [m.user("python")])
    [record] = memory.records("s1")
    assert record.importance == DEFAULT_IMPORTANCE == 0.5


AGENTLY_SCHEMA = {"preference": "string", "project": "string", "evidence": "short string"}


def test_agentlys_flat_body_schema_is_enforced_and_stated_to_the_model(
    store: memoryd.StoreHandle,
) -> None:
    """body_schema={"preference": "string", ...}: a body with every field as a string is
    kept; one lacking a field or with a number is refused (memory_extraction_invalid);
    the extraction prompt states the fields."""
    good = {"preference": "answers in Chinese", "project": "memoryd", "evidence": "said so"}
    reply = json.dumps(
        {
            "facts": [
                {"scope": "global", "kind": "preference", "body": good},
                {"scope": "global", "body": {"preference": "tea"}},
                {"scope": "global", "body": {**good, "preference": 3}},
                {"scope": "global", "body": {"text": "free text"}},
            ]
        }
    )
    model = ScriptedModel([reply])
    memory = LongTermMemory(store, llm=model, body_schema=AGENTLY_SCHEMA)
    assert memory.body_schema["required"] == ["preference", "project", "evidence"]
    with capture_logs() as logs:
        memory.append("s1", [m.user("please answer in Chinese")])
    [record] = memory.records("s1")
    assert record.body == good
    problems = [x["error"] for x in logs if x["event"] == "memory_extraction_invalid"]
    assert len(problems) == 3
    assert "'project'" in problems[0] and "preference" in problems[1]
    prompt = model.calls[0][-1]["content"]
    assert '"evidence"' in prompt and "short string" in prompt


@pytest.mark.parametrize(
    "schema",
    [{"preference": 3}, {"preference": ["string"]}, {"preference": ""}],
    ids=["number", "list", "blank"],
)
def test_a_flat_body_schema_it_cannot_read_is_refused(
    store: memoryd.StoreHandle, schema: dict[str, Any]
) -> None:
    """A flat form holding something other than type descriptions: SchemaError naming the
    field, at construction; never accepted and ignored."""
    with pytest.raises(SchemaError, match=r"body_schema\['preference'\]"):
        LongTermMemory(store, llm=ScriptedModel([]), body_schema=schema)
