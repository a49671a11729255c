"""The pure parts of long-term memory: schema subset, records fold, fact parsing, block."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from memoryd.errors import ExtractionError
from memoryd.events import Event
from memoryd.kernel import ChatRequest, Context
from memoryd.memory import (
    Recall,
    RecallFilter,
    SchemaError,
    fold,
    records_conversation,
    validate_body,
)
from memoryd.memory.extract import parse_facts
from memoryd.memory.records import MemoryRecord, dedupe_key
from memoryd.memory.retrieve import memory_message, rank
from memoryd.memory.schema import DEFAULT_BODY_SCHEMA, check_schema


def memo(version: int, data: dict[str, Any]) -> Event:
    return Event(version=version, kind="memo", messages=(), timestamp=0.0, data=data)


def rec(rid: str, text: str, *, kind: str = "fact", importance: float = 0.5) -> MemoryRecord:
    return MemoryRecord(
        id=rid, scope="global", kind=kind, body={"text": text}, importance=importance
    )


def test_body_schema_accepts_a_matching_body() -> None:
    """A body with the required str text (and a str key) passes the default schema."""
    validate_body({"text": "Alice likes tea", "key": "drink"}, DEFAULT_BODY_SCHEMA)


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ({"key": "k"}, "text"),
        ({"text": 3}, "body.text"),
        ([], "type object"),
        ({"text": "x", "key": True}, "body.key"),
    ],
)
def test_body_schema_names_the_first_mismatch(body: Any, where: str) -> None:
    """A body missing a required property or of a wrong type is refused with its path."""
    with pytest.raises(SchemaError, match=where.replace(".", r"\.")):
        validate_body(body, DEFAULT_BODY_SCHEMA)


def test_schema_subset_checks_nested_items_and_integers() -> None:
    """items and integer are supported; a bool is not an integer."""
    schema = check_schema(
        {
            "type": "object",
            "properties": {
                "n": {"type": "integer"},
                "xs": {"type": "array", "items": {"type": "string"}},
            },
        }
    )
    validate_body({"n": 2, "xs": ["a"]}, schema)
    with pytest.raises(SchemaError, match=r"body\.xs\[1\]"):
        validate_body({"xs": ["a", 1]}, schema)
    with pytest.raises(SchemaError, match=r"body\.n"):
        validate_body({"n": True}, schema)


def test_a_malformed_schema_is_refused() -> None:
    """An unknown type name is a SchemaError when the schema is checked."""
    with pytest.raises(SchemaError, match="type"):
        check_schema({"type": "text"})


def test_session_records_live_under_a_hash_of_the_conversation_id() -> None:
    """The session records id is bounded whatever the conversation id's length."""
    cid = "é" * 128
    target = records_conversation("session", cid)
    assert target == "memoryd.memory/session/" + hashlib.sha256(cid.encode()).hexdigest()
    assert len(target.encode()) <= 256
    assert records_conversation("global") == "memoryd.memory/global"
    with pytest.raises(ValueError, match="scope"):
        records_conversation("team")


def test_fold_applies_add_update_delete_and_ignores_the_rest() -> None:
    """The fold keeps the latest state of live records; other or broken events are ignored."""
    a = rec("a", "one").to_data("add")
    b = rec("b", "two").to_data("add")
    events = [
        memo(1, a),
        memo(2, b),
        memo(3, {**a, "op": "update", "body": {"text": "uno"}}),
        memo(4, {"op": "delete", "id": "b"}),
        memo(5, {"op": "add", "id": "broken"}),
        Event(
            version=6, kind="appended", messages=({"role": "user", "content": "x"},), timestamp=0.0
        ),
    ]
    assert {k: r.text for k, r in fold(events).items()} == {"a": "uno"}


def test_dedupe_key_ignores_case_and_punctuation_and_prefers_the_key() -> None:
    """Restatements normalise to the same key; a body key wins over its text."""
    assert dedupe_key("Fact", {"text": "Alice likes TEA!"}) == dedupe_key(
        "fact", {"text": "alice likes tea"}
    )
    assert dedupe_key("pref", {"key": "drink", "text": "tea"}) == dedupe_key(
        "pref", {"key": "Drink", "text": "coffee"}
    )


def test_parse_facts_keeps_at_most_max_facts_and_says_how_many_it_dropped() -> None:
    """Of 1,000 valid facts, max_facts are kept; one problem counts the rest."""
    items = [{"body": {"text": f"f{n}"}} for n in range(1000)]
    facts, problems = parse_facts(json.dumps(items), DEFAULT_BODY_SCHEMA, max_facts=20)
    assert [f.body["text"] for f in facts] == [f"f{n}" for n in range(20)]
    assert problems == ["facts[20:] dropped: 980 more past max_facts=20"]


def test_parse_facts_keeps_valid_facts_and_reports_invalid_ones() -> None:
    """A fenced JSON reply is read; a fact with a bad body is reported, the others kept."""
    text = '```json\n{"facts": [{"scope": "global", "body": {"text": "ok"}}, {"body": {}}]}\n```'
    facts, problems = parse_facts(text, DEFAULT_BODY_SCHEMA)
    assert [(f.scope, f.kind, f.body) for f in facts] == [("global", "fact", {"text": "ok"})]
    assert len(problems) == 1 and "text" in problems[0]


@pytest.mark.parametrize(
    "text", ["not json", '{"facts": 3}', '"just a string"', "[" * 100_000 + "]" * 100_000]
)
def test_parse_facts_refuses_a_malformed_reply(text: str) -> None:
    """A reply that is not JSON or has no facts list raises ExtractionError."""
    with pytest.raises(ExtractionError):
        parse_facts(text, DEFAULT_BODY_SCHEMA)


def test_rank_orders_by_bm25_and_drops_unrelated_records() -> None:
    """The record sharing the query's rare terms ranks first; unrelated ones are left out."""
    records = [
        rec("a", "Bob drinks coffee"),
        rec("b", "Alice likes green tea"),
        rec("c", "The project deadline is Friday"),
    ]
    assert [r.id for r in rank("what tea does Alice like", records, k=5)] == ["b"]
    assert rank("", records, k=5) == []


def test_memory_message_respects_the_character_budget() -> None:
    """Records are added best first while they fit; none fitting gives no message."""
    records = [rec("a", "x" * 100), rec("b", "short")]
    message = memory_message(records, max_chars=80)
    assert message is not None and message["role"] == "system"
    assert "short" in message["content"] and "x" * 100 not in message["content"]
    assert len(message["content"]) <= 80
    assert memory_message(records, max_chars=10) is None


class _Recaller:
    """A long-term memory reduced to what the recall filter asks of it."""

    max_chars = 500

    def __init__(self, records: tuple[MemoryRecord, ...]) -> None:
        self.records = records
        self.asked: list[tuple[str, str]] = []

    def recall(self, cid: str, query: str) -> Recall:
        self.asked.append((cid, query))
        return Recall(query=query, records=self.records)

    def cached_recall(self, cid: str, query: str) -> Recall | None:
        return None


def test_the_recall_filter_needs_only_a_recaller() -> None:
    """RecallFilter works with any object that recalls: it asks it for the newest user
    turn of the request's conversation and sends the records as one memory block."""
    recaller = _Recaller((rec("r1", "Alice drinks green tea"),))
    request = ChatRequest(
        messages=({"role": "user", "content": "What does Alice drink?"},),
        context=Context(conversation_id="c1"),
    )
    sent: list[tuple[dict[str, Any], ...]] = []

    def llm(req: ChatRequest) -> dict[str, Any]:
        sent.append(req.messages)
        return {"role": "assistant", "content": "Green tea."}

    reply = RecallFilter(recaller).around_chat(request, llm)
    assert reply["content"] == "Green tea."
    assert recaller.asked == [("c1", "What does Alice drink?")]
    (messages,) = sent
    assert [m["role"] for m in messages] == ["system", "user"]
    assert "Alice drinks green tea" in messages[0]["content"]


def test_the_flat_form_becomes_an_object_of_required_typed_fields() -> None:
    """Each field's type is the last type word of its description (free text: string);
    a (type, description) pair, a nested mapping and a nested JSON schema are understood."""
    schema = check_schema(
        {
            "preference": "short string",
            "score": "int",
            "ok": "bool",
            "tags": "list",
            "where": "用户所在城市",
            "note": ("str", "why it matters"),
            "project": {"name": "string"},
            "confidence": {"type": "number"},
        },
        "body_schema",
    )
    assert schema["type"] == "object"
    assert schema["required"] == [
        "preference",
        "score",
        "ok",
        "tags",
        "where",
        "note",
        "project",
        "confidence",
    ]
    types = {k: v["type"] for k, v in schema["properties"].items()}
    assert types == {
        "preference": "string",
        "score": "integer",
        "ok": "boolean",
        "tags": "array",
        "where": "string",
        "note": "string",
        "project": "object",
        "confidence": "number",
    }
    assert schema["properties"]["note"]["description"] == "why it matters"
    body = {
        "preference": "tea",
        "score": 2,
        "ok": True,
        "tags": [],
        "where": "上海",
        "note": "n",
        "project": {"name": "memoryd"},
        "confidence": 0.5,
    }
    validate_body(body, schema)
    with pytest.raises(SchemaError, match=r"body\.confidence"):
        validate_body({**body, "confidence": "high"}, schema)
    with pytest.raises(SchemaError, match=r"body\.project\.name"):
        validate_body({**body, "project": {"name": 1}}, schema)


def test_a_json_schema_is_not_read_as_the_flat_form() -> None:
    """A mapping with a JSON Schema key at its top is checked as JSON Schema."""
    assert check_schema(DEFAULT_BODY_SCHEMA) == DEFAULT_BODY_SCHEMA
    assert check_schema({"type": "object"}) == {"type": "object"}
    assert check_schema({"properties": {"text": {"type": "string"}}})["properties"] == {
        "text": {"type": "string"}
    }


def test_parse_facts_leaves_importance_unset_when_the_reply_gives_none() -> None:
    """No importance (or null) is None, so a restatement keeps the record's own; a number
    is clamped to [0, 1]; anything else is invalid."""
    text = (
        '{"facts": [{"body": {"text": "a"}}, {"body": {"text": "b"}, "importance": null},'
        ' {"body": {"text": "c"}, "importance": 7}, {"body": {"text": "d"}, "importance": "hi"}]}'
    )
    facts, problems = parse_facts(text, DEFAULT_BODY_SCHEMA)
    assert [f.importance for f in facts] == [None, None, 1.0]
    assert len(problems) == 1 and "importance" in problems[0]
