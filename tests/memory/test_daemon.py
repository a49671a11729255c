"""LongTermMemory on a real ``memoryd serve`` subprocess, through memoryd.connect (RemoteStore).

One daemon for the module (`tests.server.daemon.Daemon`); each test uses conversation ids
of its own. The LLM is a ScriptedModel.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import memoryd
from memoryd import messages as m
from memoryd.llm import ScriptedModel
from memoryd.memory import LongTermMemory, records_conversation
from tests.memory.test_long_term import fact, facts, memory_of
from tests.server.daemon import Daemon


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    running = Daemon().start()
    yield running
    running.close()


@pytest.fixture
def connect(daemon: Daemon) -> Iterator[Any]:
    """``connect()``: a new RemoteStore on the daemon's default store, closed after the test."""
    opened: list[Any] = []

    def new() -> Any:
        store = daemon.connect()
        opened.append(store)
        return store

    yield new
    for store in opened:
        store.close()


def test_records_extracted_in_one_session_are_recalled_in_another(connect: Any) -> None:
    """Extraction writes memo events on the daemon; a second client's session sees the
    global record, not the first session's own."""
    writer = LongTermMemory(
        connect(),
        llm=ScriptedModel(
            [
                facts(
                    fact("The user's name is Alice", key="name"),
                    fact("The user's ticket number is 4242", scope="session"),
                )
            ]
        ),
    )
    assert isinstance(writer.store, memoryd.RemoteStore)
    writer.append("rm-a", [m.user("I'm Alice, ticket 4242")])
    reader = LongTermMemory(connect(), llm=ScriptedModel([]))
    question = "what is my name and ticket number?"
    [block] = memory_of(reader.prepare("rm-b", [*reader.history("rm-b"), m.user(question)]))
    assert "Alice" in block and "4242" not in block
    assert {r.text for r in reader.recall("rm-a", question).records} == {
        "The user's name is Alice",
        "The user's ticket number is 4242",
    }
    ops = [dict(e.data or {})["op"] for e in reader.store.events(records_conversation("global"))]
    assert "add" in ops and all(op in ("add", "update", "delete") for op in ops)


def test_forgetting_over_the_daemon_survives_a_daemon_restart(daemon: Daemon, connect: Any) -> None:
    """clear(forget=True) deletes the session's records and its sole-provenance global
    ones; after SIGKILL and a restart the daemon still has exactly what was kept."""
    model = ScriptedModel(
        [
            facts(fact("rm-f secret", scope="session"), fact("only rm-f said this")),
            facts(fact("rm-g keeps this")),
        ]
    )
    memory = LongTermMemory(connect(), llm=model)
    memory.append("rm-f", [m.user("...")])
    memory.append("rm-g", [m.user("...")])
    assert {"rm-f secret", "only rm-f said this"} <= {r.text for r in memory.records("rm-f")}
    memory.clear("rm-f", forget=True)
    assert memory.store.get("rm-f") == []
    daemon.restart()
    again = LongTermMemory(connect(), llm=ScriptedModel([]))
    texts = {r.text for r in again.records("rm-f")}
    assert "rm-g keeps this" in texts
    assert not texts & {"rm-f secret", "only rm-f said this"}
    assert again.store.events(records_conversation("session", "rm-f"))[-1].data["op"] == "delete"


def test_dense_retrieval_works_on_records_read_from_the_daemon(model: Any, connect: Any) -> None:
    """A dense LongTermMemory on a RemoteStore recalls a paraphrased global record."""
    LongTermMemory(
        connect(), llm=ScriptedModel([facts(fact("rm-d starts the day with matcha"))])
    ).append("rm-d", [m.user("...")])
    memory = LongTermMemory(connect(), llm=ScriptedModel([]), retrieval="dense")
    recalled = memory.recall("rm-e", "What does rm-d drink in the morning?").records
    assert recalled[0].text == "rm-d starts the day with matcha"
