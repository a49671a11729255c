"""``keep_failed_runs`` (Koog's checkpoints): a run that raised stays pending with the
steps it recorded, and a resume goes on from there without calling their tools again."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest

import memoryd
from memoryd import messages
from memoryd.agents import AgentSystem
from memoryd.llm import ScriptedModel
from tests.agent.test_resume import counting_tools, tool_turns
from tests.helpers import BACKENDS, backend_store


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> memoryd.StoreHandle:
    """Each test on every backend: LMDB, Redis, and the daemon."""
    return backend_store(request, tmp_path, "keep")


def failing_at_step_three() -> ScriptedModel:
    """Two tool steps, then the model fails (an LLM outage), then the final answer."""
    return ScriptedModel([*tool_turns(), memoryd.LLMError("the model is down"), "all done"])


def kept(store: memoryd.StoreHandle, calls: list[str]) -> memoryd.Agent:
    """An agent keeping its failed runs, its model failing at step 3, its tools counted."""
    return memoryd.Agent(
        llm=failing_at_step_three(),
        memory=store,
        tools=counting_tools(calls),
        keep_failed_runs=True,
    )


def test_a_run_whose_model_failed_is_kept_and_resumed_without_its_tools(
    store: memoryd.StoreHandle,
) -> None:
    """The failed run is pending (orphaned: nothing runs it) with both tool steps; the
    resume asks the model once more and calls no tool again; nothing is left after."""
    calls: list[str] = []
    agent = kept(store, calls)
    with pytest.raises(memoryd.LLMError, match="down"):
        agent.run("do it", conversation_id="job")
    assert store.get("job") == []
    [pending] = agent.pending_runs()
    assert pending.orphaned
    assert [m["role"] for m in pending.messages] == ["user", *["assistant", "tool"] * 2]
    assert agent.resume(pending.run_id).text == "all done"
    assert calls == ["lookup:k1", "slow:k2"]
    assert [m["role"] for m in store.get("job")] == [
        "user",
        *["assistant", "tool"] * 2,
        "assistant",
    ]
    assert agent.pending_runs() == []


def test_a_run_on_an_event_loop_is_kept_the_same_way(store: memoryd.StoreHandle) -> None:
    """`Agent.arun` keeps its failed run too; the resume calls no tool again."""
    calls: list[str] = []
    agent = kept(store, calls)
    with pytest.raises(memoryd.LLMError):
        asyncio.run(agent.arun("do it", conversation_id="job"))
    [pending] = agent.pending_runs()
    assert agent.resume(pending.run_id).text == "all done"
    assert calls == ["lookup:k1", "slow:k2"]


def test_by_default_a_failed_run_drops_its_journal(store: memoryd.StoreHandle) -> None:
    """The same failure without the option leaves nothing pending (the control)."""
    agent = memoryd.Agent(llm=failing_at_step_three(), memory=store, tools=counting_tools([]))
    with pytest.raises(memoryd.LLMError):
        agent.run("do it", conversation_id="job")
    assert agent.pending_runs() == []
    assert store.conversations(include_empty=True) == []


def test_a_call_retried_with_its_request_id_goes_on_from_the_kept_steps(
    store: memoryd.StoreHandle,
) -> None:
    """Through an agent system: the call fails with the model's error, the same
    request_id finishes that run (no tool called twice), and a third call answers the
    committed result without running anything."""
    calls: list[str] = []
    model = failing_at_step_three()  # the resume gets its last answer

    def make(key: str) -> memoryd.Agent:
        return memoryd.Agent(
            llm=model, memory=store, tools=counting_tools(calls), keep_failed_runs=True
        )

    system = AgentSystem.start({"w": make}, store=store, name=f"keep-{uuid.uuid4().hex[:6]}")
    try:
        with pytest.raises(memoryd.LLMError):
            system.call("w", "k", "do it", request_id="job-1")
        [pending] = system.pending_runs()
        assert pending.orphaned
        assert system.call("w", "k", "do it", request_id="job-1").text == "all done"
        again = system.call("w", "k", "do it", request_id="job-1")
        assert again.text == "all done"
        assert calls == ["lookup:k1", "slow:k2"]
        assert len(store.events("w/k")) == 1 and system.pending_runs() == []
    finally:
        system.stop()


@pytest.mark.parametrize(
    ("options", "error", "needle"),
    [
        ({"memory": False}, ValueError, "keep_failed_runs needs a journal"),
        ({"journal": False}, ValueError, "keep_failed_runs needs a journal"),
        ({"keep_failed_runs": "yes"}, TypeError, "must be a bool"),
    ],
)
def test_keep_failed_runs_without_a_journal_or_not_a_bool_is_refused(
    store: memoryd.StoreHandle, options: dict[str, Any], error: type[Exception], needle: str
) -> None:
    """Nothing could be kept without a journal; the error says what to give."""
    settings: dict[str, Any] = {"memory": store, "keep_failed_runs": True, **options}
    with pytest.raises(error, match=needle):
        memoryd.Agent(llm=ScriptedModel([messages.assistant("x")]), **settings)


def conflicting(store: memoryd.StoreHandle, calls: list[str], *, keep: bool) -> memoryd.Agent:
    """An agent whose one tool step writes to the run's conversation behind its back, so
    the turn's commit finds the conversation changed."""

    @memoryd.tool
    def lookup(key: str) -> str:
        """Look a key up while someone else writes to the conversation."""
        calls.append(key)
        store.add("job", [messages.user("written meanwhile")])
        return f"value-of-{key}"

    turns = [messages.assistant(tool_calls=[messages.tool_call("c1", "lookup", {"key": "k"})])]
    return memoryd.Agent(
        llm=ScriptedModel([*turns, "first answer", "resumed answer"]),
        memory=store,
        tools=[lookup],
        keep_failed_runs=keep,
    )


def test_a_run_whose_commit_conflicted_is_kept_and_resumed_on_the_conversation_as_it_is(
    store: memoryd.StoreHandle,
) -> None:
    """Another writer adds to the conversation during the run: the commit's ConflictError
    keeps the run, and its resume commits after that write, calling no tool again."""
    calls: list[str] = []
    agent = conflicting(store, calls, keep=True)
    with pytest.raises(memoryd.ConflictError):
        agent.run("go", conversation_id="job")
    [pending] = agent.pending_runs()
    assert agent.resume(pending.run_id).text == "resumed answer"
    assert calls == ["k"]
    assert [m["content"] for m in store.get("job")] == [
        "written meanwhile",
        "go",
        None,
        "value-of-k",
        "resumed answer",
    ]


def test_by_default_a_run_whose_commit_conflicted_leaves_nothing_pending(
    store: memoryd.StoreHandle,
) -> None:
    """The caller is told nothing was stored and may run it again, so no journal is left
    for a recovery to commit the same turn a second time."""
    agent = conflicting(store, [], keep=False)
    with pytest.raises(memoryd.ConflictError, match="nothing was stored"):
        agent.run("go", conversation_id="job")
    assert agent.pending_runs() == []
    assert store.conversations(include_empty=True) == ["job"]
