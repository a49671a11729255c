"""Runs cancelled at the seams: while a step's write is in flight, in the LLM call after
a step, during a commit on a session, and during a resume. A cancelled run is pending or
never journaled by the time its `CancelledError` is raised, leaves nothing of itself in
the process, and a session sees a turn that was committed."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

import memoryd
from memoryd import messages
from memoryd.agent import journal as journal_module
from memoryd.llm import ScriptedModel


@pytest.fixture
def lmdb(tmp_path: Path) -> memoryd.StoreHandle:
    return memoryd.LmdbStore.start(tmp_path / "data", name=f"cancel-{uuid.uuid4().hex[:8]}")


def _noted(calls: list[str]) -> Any:
    @memoryd.tool
    async def note(key: str) -> str:
        """Note a key.

        Args:
            key: The key.
        """
        calls.append(key)
        return f"noted {key}"

    return note


def _step(key: str) -> dict[str, Any]:
    return messages.assistant(tool_calls=[messages.tool_call(f"c-{key}", "note", {"key": key})])


class _CancelAfterStep:
    """A model: one tool step, then the final answer. With ``cancel`` set, the final
    answer cancels the run's task as it is returned, so the cancellation lands at the
    run's next wait: its step's write, still in flight. With ``hang`` the final answer
    never comes."""

    def __init__(self, *, cancel: bool = True, hang: bool = False) -> None:
        self.cancel, self.hang = cancel, hang

    def complete(self, sent: list[Any], *, tools: Any = None) -> Any:
        return _step("a") if sent[-1]["role"] == "user" else messages.assistant("done")

    async def acomplete(self, sent: list[Any], *, tools: Any = None) -> Any:
        if sent[-1]["role"] == "user":
            return _step("a")
        if self.cancel:
            task = asyncio.current_task()
            assert task is not None
            asyncio.get_running_loop().call_soon(task.cancel)
        if self.hang:
            await asyncio.Event().wait()
        return messages.assistant("done")


def test_a_run_cancelled_while_its_step_write_is_in_flight_is_pending_when_it_raises(
    lmdb: memoryd.StoreHandle,
) -> None:
    """The cancellation lands while the run waits for its first step's write: when the
    CancelledError reaches the caller the run is already pending, every time (it raised
    with the write in flight, and the run turned pending later: 46 times in 50)."""
    calls: list[str] = []
    agent = memoryd.Agent(llm=_CancelAfterStep(), memory=lmdb, tools=[_noted(calls)])

    async def main() -> list[bool]:
        seen = []
        for n in range(20):
            with pytest.raises(asyncio.CancelledError):
                await agent.arun("go", f"c{n}", run_id=f"r{n}")
            seen.append([p.run_id for p in agent.pending_runs(f"c{n}")] == [f"r{n}"])
        return seen

    assert asyncio.run(main()) == [True] * 20


def test_a_cancelled_run_id_run_again_in_the_same_process_is_refused_as_pending(
    lmdb: memoryd.StoreHandle,
) -> None:
    """A run cancelled after a journaled step is pending; the same run id run again in
    this process is refused as pending, as it is from any other process (it was taken
    for the live run: its steps went on in the old journal and the turn was committed,
    the pending run's recorded steps thrown away)."""
    calls: list[str] = []
    agent = memoryd.Agent(
        llm=_CancelAfterStep(cancel=False, hang=True), memory=lmdb, tools=[_noted(calls)]
    )

    async def main() -> None:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(agent.arun("first", "c", run_id="R"), 1.0)
        agent.kernel.llm = ScriptedModel([_step("b"), "fresh"])  # type: ignore[assignment]
        with pytest.raises(memoryd.ConflictError, match="already pending"):
            await agent.arun("second", "c", run_id="R")

    asyncio.run(main())
    [pending] = agent.pending_runs("c")
    assert pending.messages[0]["content"] == "first"
    assert lmdb.get("c") == []


def test_a_run_cancelled_during_its_commit_on_a_session_updates_the_sessions_window(
    lmdb: memoryd.StoreHandle,
) -> None:
    """Cancelled while its commit is under way, the run's turn is stored; the session's
    window then holds it, as after any committed turn (it kept the window from before)."""

    class Replies:
        def complete(self, sent: list[Any], *, tools: Any = None) -> Any:
            return messages.assistant("reply to " + sent[-1]["content"])

        async def acomplete(self, sent: list[Any], *, tools: Any = None) -> Any:
            if sent[-1]["content"] == "cancel me":
                task = asyncio.current_task()
                assert task is not None
                asyncio.get_running_loop().call_soon(task.cancel)  # lands at the commit
            return self.complete(sent)

    agent = memoryd.Agent(llm=Replies(), memory=lmdb)
    agent.activate_session("s1")

    async def main() -> list[str]:
        await agent.arun("first")
        window = agent.sessions["s1"].context_window  # read, so the session keeps it
        assert [m["content"] for m in window] == ["first", "reply to first"]
        with pytest.raises(asyncio.CancelledError):
            await agent.arun("cancel me")
        return [m["content"] for m in agent.sessions["s1"].context_window]

    stored = ["first", "reply to first", "cancel me", "reply to cancel me"]
    assert asyncio.run(main()) == stored
    assert [m["content"] for m in lmdb.get("s1")] == stored


def test_aresume_runs_on_the_loop_and_a_cancelled_one_stays_pending(
    lmdb: memoryd.StoreHandle,
) -> None:
    """`aresume` goes on from the recorded step on the loop; cancelled in its model call
    it stops (the run pending again, its step not run twice), and a later one finishes."""
    calls: list[str] = []
    note = _noted(calls)
    agent = memoryd.Agent(llm=_CancelAfterStep(cancel=False, hang=True), memory=lmdb, tools=[note])

    async def main() -> str:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(agent.arun("go", "c", run_id="R"), 1.0)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(agent.aresume("R"), 1.0)
        assert [p.run_id for p in agent.pending_runs("c")] == ["R"]
        assert lmdb.get("c") == []
        agent.kernel.llm = _CancelAfterStep(cancel=False)  # type: ignore[assignment]
        return (await agent.aresume("R")).text

    assert asyncio.run(main()) == "done"
    assert calls == ["a"]
    assert [m["role"] for m in lmdb.get("c")] == ["user", "assistant", "tool", "assistant"]
    assert agent.pending_runs("c") == []


def test_an_aresume_cancelled_during_its_claim_keeps_nothing_in_the_process(
    lmdb: memoryd.StoreHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The claim runs in a worker thread, held there 0.3 s; the resume is cancelled at
    0.1 s. Once `CancelledError` is raised the claim has ended and nothing of the run is
    kept in the process (the claim went on in its thread and left the run tracked as
    this process's live run), and a later resume finishes it."""
    calls: list[str] = []
    agent = memoryd.Agent(
        llm=_CancelAfterStep(cancel=False, hang=True), memory=lmdb, tools=[_noted(calls)]
    )
    claim = journal_module.RunJournal.claim

    def slow_claim(self: journal_module.RunJournal, record: Any) -> Any:
        time.sleep(0.3)
        return claim(self, record)

    async def main() -> str:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(agent.arun("go", "c", run_id="R"), 1.0)
        monkeypatch.setattr(journal_module.RunJournal, "claim", slow_claim)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(agent.aresume("R"), 0.1)
        assert agent._journal is not None and "R" not in agent._journal._live
        agent.kernel.llm = _CancelAfterStep(cancel=False)  # type: ignore[assignment]
        return (await agent.aresume("R")).text

    assert asyncio.run(main()) == "done"
    assert calls == ["a"]
