"""What a run's journal costs a durable store, counted from its fsyncs in `stats()`."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import memoryd
from memoryd import messages
from memoryd.llm import ScriptedModel


@pytest.fixture
def store(tmp_path: Path) -> Iterator[memoryd.StoreHandle]:
    handle = memoryd.LmdbStore.start(tmp_path / "data", name=f"cost-{uuid.uuid4().hex[:8]}")
    yield handle
    handle.stop()


@memoryd.tool
def echo(text: str) -> str:
    """Echo the text."""
    return text


def fsyncs(store: memoryd.StoreHandle) -> int:
    return int(store.stats()["fsyncs"])


def tool_step(n: int, calls: int = 1) -> dict[str, object]:
    return messages.assistant(
        tool_calls=[
            messages.tool_call(f"s{n}c{i}", "echo", {"text": f"{n}.{i}"}) for i in range(calls)
        ]
    )


def test_a_turn_without_tools_costs_one_fsync(store: memoryd.StoreHandle) -> None:
    """The turn's commit is its only write."""
    agent = memoryd.Agent(llm=ScriptedModel(["hi", "again"]), memory=store)
    agent.run("warm up", conversation_id="c")
    before = fsyncs(store)
    agent.run("hello", conversation_id="c")
    assert fsyncs(store) - before == 1


def test_a_turn_with_k_tool_steps_costs_k_plus_one_fsyncs(store: memoryd.StoreHandle) -> None:
    """One write per tool step, parallel calls of a step included, and the commit."""
    k = 3
    script = [tool_step(0, calls=4), tool_step(1), tool_step(2, calls=2), "done"]
    agent = memoryd.Agent(llm=ScriptedModel(script), memory=store, tools=[echo])
    before = fsyncs(store)
    result = agent.run("go", conversation_id="c")
    assert fsyncs(store) - before == k + 1
    assert len(result.messages) == 1 + 3 + 4 + 1 + 2 + 1
    assert store.conversations(include_empty=True) == ["c"]
    assert agent.pending_runs() == []
