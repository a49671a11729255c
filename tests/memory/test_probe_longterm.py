"""LongTermMemory keeps every storable fact: under concurrent writers, and past a bad one.

Found by running many conversations' extractions at once on one LmdbStore (most facts
were lost to ``ConflictError`` after three attempts) and by hostile extraction replies
(a fact the store cannot hold dropped every fact after it). The LLM is a ScriptedModel.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

import memoryd
from memoryd import messages as m
from memoryd.llm import ScriptedModel
from memoryd.memory import LongTermMemory, records_conversation
from memoryd.memory.extract import parse_facts
from memoryd.memory.schema import DEFAULT_BODY_SCHEMA

GLOBAL = records_conversation("global")


def facts(*items: dict[str, Any]) -> str:
    return json.dumps({"facts": list(items)})


def fact(text: str, *, scope: str = "global", **body: Any) -> dict[str, Any]:
    return {"scope": scope, "kind": "fact", "body": {"text": text, **body}}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[memoryd.StoreHandle]:
    handle = memoryd.LmdbStore.start(str(tmp_path / "db"), name=f"probe-{uuid.uuid4().hex[:8]}")
    yield handle
    handle.stop()


def texts(store: memoryd.StoreHandle, cid: str) -> list[str]:
    return sorted(r.text for r in LongTermMemory(store, llm=ScriptedModel([])).records(cid))


def test_a_fact_the_store_cannot_hold_is_skipped_and_the_facts_after_it_are_kept(
    store: memoryd.StoreHandle,
) -> None:
    """A NaN, or a body past max_message_bytes, is logged as invalid; the reply's other
    facts are still stored."""
    reply = (
        '{"facts": [{"scope": "global", "body": {"text": "scored", "score": NaN}},'
        f" {json.dumps(fact('x' * (store.max_message_bytes + 1)))},"
        f" {json.dumps(fact('The user lives in Lyon'))}]}}"
    )
    memory = LongTermMemory(store, llm=ScriptedModel([reply]))
    with capture_logs() as logs:
        memory.append("s1", [m.user("I live in Lyon")])
    assert texts(store, "s1") == ["The user lives in Lyon"]
    invalid = [x["error"] for x in logs if x["event"] == "memory_extraction_invalid"]
    assert [e.split(":")[0] for e in invalid] == [
        "facts[0] cannot be stored",
        "facts[1] cannot be stored",
    ]
    assert not [x for x in logs if x["event"] == "memory_extraction_failed"]


def test_concurrent_extractions_in_one_process_lose_no_facts(store: memoryd.StoreHandle) -> None:
    """Twelve conversations extracting at once, each with its own LongTermMemory, all
    writing the global records: every fact is stored once, none is given up."""
    threads, turns = 12, 4
    errors: list[BaseException] = []

    def converse(t: int) -> None:
        try:
            for k in range(turns):
                reply = facts(fact(f"fact {t}-{k}"), fact("The user is Alice", key="name"))
                memory = LongTermMemory(store, llm=ScriptedModel([reply]))
                memory.append(f"c{t}", [m.user(f"turn {k}")])
        except BaseException as exc:  # pragma: no cover (reported below)
            errors.append(exc)

    with capture_logs() as logs:
        running = [threading.Thread(target=converse, args=(t,)) for t in range(threads)]
        for thread in running:
            thread.start()
        for thread in running:
            thread.join()
    assert errors == []
    assert [x for x in logs if x["event"] == "memory_extraction_failed"] == []
    expected = sorted([f"fact {t}-{k}" for t in range(threads) for k in range(turns)])
    assert texts(store, "reader") == sorted([*expected, "The user is Alice"])
    [name] = [
        r for r in LongTermMemory(store, llm=ScriptedModel([])).records("r") if r.body.get("key")
    ]
    assert name.conversations == {f"c{t}" for t in range(threads)}


def test_a_write_outrun_by_other_processes_five_times_is_still_stored(
    store: memoryd.StoreHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writers in other processes (raw record writes here) landing between each of the
    first five reads and writes: the fact is retried until it goes in, and so are theirs."""
    real_events = store.events
    reads: list[str] = []

    def events(cid: str, *, after: int = 0) -> list[memoryd.Event]:
        found = real_events(cid, after=after)
        reads.append(cid)
        outrun = reads.count(GLOBAL) - 1  # the first read lists the known records
        if cid == GLOBAL and 1 <= outrun <= 5:  # the reads inside remember
            other = {"op": "add", "id": f"other-{outrun}", "scope": "global", "kind": "fact"}
            store.record(GLOBAL, "memo", data={**other, "body": {"text": f"other {outrun}"}})
        return found

    memory = LongTermMemory(store, llm=ScriptedModel([facts(fact("mine"))]))
    monkeypatch.setattr(store, "events", events)
    with capture_logs() as logs:
        memory.append("s1", [m.user("...")])
    monkeypatch.undo()
    assert texts(store, "s1") == ["mine", "other 1", "other 2", "other 3", "other 4", "other 5"]
    assert [x["attempt"] for x in logs if x["event"] == "memory_write_retried"] == [1, 2, 3, 4, 5]


def test_a_reply_with_prose_around_its_fenced_json_is_read() -> None:
    """'Here are the facts:' then a fenced block (a model not held to JSON) gives its facts."""
    reply = "Here are the facts:\n```json\n" + facts(fact("Alice likes tea")) + "\n```\nDone."
    found, problems = parse_facts(reply, DEFAULT_BODY_SCHEMA)
    assert [f.body["text"] for f in found] == ["Alice likes tea"] and problems == []
