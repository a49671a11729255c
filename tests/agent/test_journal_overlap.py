"""A tool step's journal write overlaps the run's next LLM call, never its next tool.

The store actor's test-only ``fault_hook`` holds the commit of a run's first journal
write; what the run does meanwhile is what these tests look at, on a real LMDB store.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import memoryd
from memoryd import messages
from memoryd.agent.journal import journal_id
from memoryd.errors import RunInterrupted
from memoryd.llm import ScriptedModel
from memoryd.store import actor as store_actor


@pytest.fixture
def store(tmp_path: Path) -> Iterator[memoryd.StoreHandle]:
    handle = memoryd.LmdbStore.start(tmp_path / "data", name=f"overlap-{uuid.uuid4().hex[:8]}")
    yield handle
    store_actor.fault_hook = None
    handle.stop()


def tool_step(n: int) -> dict[str, Any]:
    return messages.assistant(tool_calls=[messages.tool_call(f"c{n}", "act", {"n": n})])


class Hold:
    """Holds the store's next commit once ``armed``, until ``release`` is set (at most 5 s)."""

    def __init__(self, store: memoryd.StoreHandle) -> None:
        self.name = store.name
        self.armed = False
        self.held = threading.Event()
        self.release = threading.Event()
        self.released_at = 0.0

    def __call__(self, point: str, name: str) -> None:
        if point == "before_commit" and name == self.name and self.armed:
            self.armed = False
            self.held.set()
            self.release.wait(5.0)
            self.released_at = time.monotonic()


def test_the_next_llm_call_runs_while_the_step_is_committed_and_the_next_tool_after(
    store: memoryd.StoreHandle,
) -> None:
    """The first tool step's commit is held until the model's second call has been
    made: the run makes that call while its write is in flight (a run that waited for
    the write would be called only after the hold ran out, 5 s later); its second tool
    runs only after the write is durable, and sees it in the journal."""
    hold = Hold(store)
    ran: list[tuple[int, float, int]] = []
    llm_calls_while_held: list[bool] = []

    @memoryd.tool
    def act(n: int) -> str:
        """Act."""
        ran.append((n, time.monotonic(), len(store.events(journal_id("r")))))
        if n == 0:
            hold.armed = True  # hold the commit of this step's journal write
        return "ok"

    def second_call(sent: list[dict[str, Any]]) -> dict[str, Any]:
        llm_calls_while_held.append(hold.released_at == 0.0)  # the write's commit is to come
        hold.release.set()
        return tool_step(1)

    store_actor.fault_hook = hold
    agent = memoryd.Agent(
        llm=ScriptedModel([tool_step(0), second_call, "done"]), memory=store, tools=[act]
    )
    result = agent.run("go", conversation_id="c", run_id="r")
    assert result.text == "done"
    assert llm_calls_while_held == [True]
    (first, _, _), (second, second_at, journaled) = ran
    assert (first, second) == (0, 1)
    assert second_at >= hold.released_at  # the second tool waited for the write
    assert journaled == 1  # and found the first step in the journal
    assert agent.pending_runs() == []


def test_a_model_error_during_the_overlapped_call_leaves_no_journal(
    store: memoryd.StoreHandle,
) -> None:
    """The model fails while the step's write is in flight: the error reaches the
    caller, the write is waited for, then the run's journal is dropped; nothing pending,
    nothing hidden left behind, the conversation untouched."""

    def fails(sent: list[dict[str, Any]]) -> dict[str, Any]:
        raise RuntimeError("the model's provider is down")

    calls: list[int] = []

    @memoryd.tool
    def act(n: int) -> str:
        """Act."""
        calls.append(n)
        return "ok"

    agent = memoryd.Agent(llm=ScriptedModel([tool_step(0), fails]), memory=store, tools=[act])
    with pytest.raises(RuntimeError, match="provider is down"):
        agent.run("go", conversation_id="c", run_id="r")
    assert calls == [0]
    assert agent.pending_runs() == []
    assert store.get(journal_id("r")) == [] and store.get("c") == []


def test_a_run_stopped_at_the_boundary_keeps_the_step_written_in_flight(
    store: memoryd.StoreHandle,
) -> None:
    """A run stopped at the boundary before its next LLM call (an instance's kill),
    while its step's write is held: the stop waits for the write, so the run is pending
    with that step, and the resume does not run its tool again."""
    hold = Hold(store)
    calls: list[int] = []

    @memoryd.tool
    def act(n: int) -> str:
        """Act."""
        calls.append(n)
        if n == 0:
            hold.armed = True
        return "ok"

    def stop_after_the_first_step(run_id: str) -> None:
        if calls:
            hold.release.set()  # the write is still held when the stop is raised
            raise RunInterrupted(f"run {run_id} stopped")

    store_actor.fault_hook = hold
    agent = memoryd.Agent(
        llm=ScriptedModel([tool_step(0), tool_step(1), "done"]), memory=store, tools=[act]
    )
    agent.step_hook = stop_after_the_first_step
    with pytest.raises(RunInterrupted):
        agent.run("go", conversation_id="c", run_id="r")
    assert hold.held.is_set()
    (pending,) = agent.pending_runs()
    assert [m.get("tool_call_id") for m in pending.messages if m.get("role") == "tool"] == ["c0"]

    agent.step_hook = None
    again = memoryd.Agent(llm=ScriptedModel([tool_step(1), "done"]), memory=store, tools=[act])
    assert again.resume("r").text == "done"
    assert calls == [0, 1]  # the recorded step's tool did not run again
    assert agent.pending_runs() == []


def test_a_run_cancelled_during_its_commit_raises_only_once_the_commit_is_done(
    store: memoryd.StoreHandle,
) -> None:
    """`arun` cancelled while its commit is held in the store: the cancellation waits for
    the commit's outcome before it is raised, so the conversation is as it will stay (the
    turn committed, nothing pending) and the next run on it works at once. The turn used
    to land after `CancelledError`, so a run started meanwhile failed with a
    `ConflictError` ("changed while run ... was running")."""
    import asyncio

    hold = Hold(store)
    store_actor.fault_hook = hold
    agent = memoryd.Agent(llm=ScriptedModel(["first", "second"]), memory=store)

    async def scenario() -> tuple[bool, int]:
        hold.armed = True
        task = asyncio.ensure_future(agent.arun("one", "c"))
        await asyncio.to_thread(hold.held.wait, 5.0)
        task.cancel()
        for _ in range(3):  # let the cancellation reach the run, waiting on its commit
            await asyncio.sleep(0)
        hold.release.set()
        try:
            await task
        except asyncio.CancelledError:
            cancelled = True
        else:
            cancelled = False
        return cancelled, store.version("c")

    cancelled, version_at_cancel = asyncio.run(scenario())
    assert cancelled
    assert version_at_cancel == 1  # the commit was done when CancelledError came
    assert agent.pending_runs("c") == []
    assert agent.run("two", "c").text == "second"
    assert [m["content"] for m in store.get("c")] == ["one", "first", "two", "second"]
