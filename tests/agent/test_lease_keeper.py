"""A run's lease is kept while the run sits in a call longer than the lease.

The lease is renewed at step boundaries; a tool or an LLM call longer than the lease
would let it run out while the run is alive, and another process would find the run
orphaned (resume it beside this one, or discard it after its tools ran). The
process's lease keeper renews it during such calls. Real store, real threads."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from typing import Any

import pytest
from structlog.testing import capture_logs

import memoryd
from memoryd import messages
from memoryd.agent.journal import RunJournal
from memoryd.agent.lease_keeper import KEEPER, Kept
from memoryd.llm import ScriptedModel
from tests.helpers import wait_until

LEASE_S = 1.0
LONG_S = 3 * LEASE_S


@pytest.fixture
def store() -> memoryd.StoreHandle:
    return memoryd.EphemeralStore.start(name=f"keeper-{uuid.uuid4().hex[:8]}")


def _leases(store: memoryd.StoreHandle) -> list[float]:
    """How long each pending run's lease has left, as another process reads it."""
    now = time.time()
    return [r.heartbeat + r.lease_s - now for r in RunJournal(store).pending()]


def _agent(store: memoryd.StoreHandle, model: ScriptedModel, tools: list[Any]) -> memoryd.Agent:
    agent = memoryd.Agent(llm=model, memory=store, tools=tools)
    assert agent._journal is not None
    agent._journal.lease_s = LEASE_S  # a short lease, so a call of a few seconds outlives it
    return agent


def _calls(*names: str) -> list[Any]:
    return [
        messages.assistant(tool_calls=[messages.tool_call(f"c{n}", name, {})])
        for n, name in enumerate(names)
    ]


def test_a_tool_longer_than_the_lease_keeps_it(store: memoryd.StoreHandle) -> None:
    """The second tool sleeps three leases; while it sleeps, the run (journaled after the
    first tool) holds a live lease the whole time, and the run finishes."""
    seen: list[float] = []

    @memoryd.tool
    def quick() -> str:
        """Answer at once."""
        return "ok"

    @memoryd.tool
    def slow() -> str:
        """Take three leases."""
        end = time.monotonic() + LONG_S
        while time.monotonic() < end:
            seen.extend(_leases(store))
            time.sleep(LEASE_S / 4)
        return "done"

    agent = _agent(store, ScriptedModel([*_calls("quick", "slow"), "finished"]), [quick, slow])
    assert agent.run("go", conversation_id="c").text == "finished"
    assert len(seen) >= 8
    assert min(seen) > 0, f"the lease ran out during the call: {min(seen):.2f} s left"
    assert RunJournal(store).pending() == []


def test_an_llm_call_after_a_step_keeps_the_lease(store: memoryd.StoreHandle) -> None:
    """The model thinks for three leases right after a tool step (its journal write
    still in flight when the call begins): the lease stays live throughout."""
    seen: list[float] = []

    @memoryd.tool
    def quick() -> str:
        """Answer at once."""
        return "ok"

    def thinking(sent: list[Any]) -> str:
        end = time.monotonic() + LONG_S
        while time.monotonic() < end:
            seen.extend(_leases(store))
            time.sleep(LEASE_S / 4)
        return "thought it through"

    agent = _agent(store, ScriptedModel([*_calls("quick"), thinking]), [quick])
    assert agent.run("go", conversation_id="c").text == "thought it through"
    assert len(seen) >= 8 and min(seen) > 0


def test_an_arun_tool_longer_than_the_lease_keeps_it(store: memoryd.StoreHandle) -> None:
    """The same on an event loop: a long awaited tool, the lease live throughout."""
    seen: list[float] = []

    @memoryd.tool
    def quick() -> str:
        """Answer at once."""
        return "ok"

    @memoryd.tool
    async def slow() -> str:
        """Take three leases."""
        end = time.monotonic() + LONG_S
        while time.monotonic() < end:
            seen.extend(await asyncio.to_thread(_leases, store))
            await asyncio.sleep(LEASE_S / 4)
        return "done"

    async def main() -> str:
        agent = _agent(store, ScriptedModel([*_calls("quick", "slow"), "finished"]), [quick, slow])
        return (await agent.arun("go", conversation_id="c")).text

    assert asyncio.run(main()) == "finished"
    assert len(seen) >= 8 and min(seen) > 0


def test_an_arun_llm_call_after_a_step_keeps_the_lease(store: memoryd.StoreHandle) -> None:
    """On an event loop, a model thinking for three leases right after a tool step (its
    journal write sent from the loop, still on its way as the call begins): the write
    is recorded during the call and the lease stays live throughout."""
    seen: list[float] = []

    @memoryd.tool
    def quick() -> str:
        """Answer at once."""
        return "ok"

    class Thinking(ScriptedModel):
        async def acomplete(self, messages: Any, **options: Any) -> Any:
            if len(self.calls) == 1:  # the second call: after the step
                end = time.monotonic() + LONG_S
                while time.monotonic() < end:
                    seen.extend(await asyncio.to_thread(_leases, store))
                    await asyncio.sleep(LEASE_S / 4)
            return await super().acomplete(messages, **options)

    async def main() -> str:
        agent = _agent(store, Thinking([*_calls("quick"), "thought it through"]), [quick])
        return (await agent.arun("go", conversation_id="c")).text

    assert asyncio.run(main()) == "thought it through"
    assert len(seen) >= 8 and min(seen) > 0


def _taken_over_during_the_model_call(
    store: memoryd.StoreHandle, *, in_handler: bool, then: tuple[Any, ...] = ()
) -> Any:
    """A run whose second LLM call (right after its first step, whose journal write is
    still in flight) waits while another owner claims the run and the keeper's
    renewal meets the claim. Returns what the run raised (None: it returned) and the
    model's calls, and the agent (its model answers ``then`` after that)."""
    claimed = threading.Event()
    keeper_met_it = threading.Event()

    @memoryd.tool
    def quick() -> str:
        """Answer at once."""
        return "ok"

    def thinking(sent: list[Any]) -> str:
        # the step's journal write may still be on its way: read it once it is in
        [record] = wait_until(lambda: RunJournal(store).pending())
        RunJournal(store, lease_s=LEASE_S).claim(record)  # another owner, as far as it knows
        claimed.set()
        # the keeper waits for the step write, then its renewal finds the claim
        keeper_met_it.wait(10 * LEASE_S)
        return "thought it through"

    model = ScriptedModel([*_calls("quick"), thinking, *then])
    agent = _agent(store, model, [quick])
    journal = agent._journal
    assert journal is not None
    renew = journal.renew

    def renew_and_tell(run_id: str) -> bool:
        try:
            return renew(run_id)
        finally:
            if claimed.is_set():
                keeper_met_it.set()

    journal.renew = renew_and_tell  # type: ignore[method-assign]
    raised: BaseException | None = None
    try:
        if in_handler:
            try:
                raise KeyError("a caller retrying after an error of its own")
            except KeyError:
                agent.run("go", conversation_id="c")
        else:
            agent.run("go", conversation_id="c")
    except BaseException as exc:
        raised = exc
    return raised, model, agent


@pytest.mark.parametrize("in_handler", [False, True], ids=["plain", "in-an-except-block"])
def test_a_run_taken_over_during_a_model_call_stops_and_leaves_the_new_owner_alone(
    store: memoryd.StoreHandle, in_handler: bool
) -> None:
    """Claimed by another owner during an LLM call that follows a step: the run stops
    with ConflictError right after the call (also when its caller runs it inside an
    ``except`` block), commits nothing, calls the model no more, and the new owner's
    journal is left pending and whole (a failing run drops only its own)."""
    raised, model, _ = _taken_over_during_the_model_call(store, in_handler=in_handler)
    assert isinstance(raised, memoryd.ConflictError), raised
    assert len(model.calls) == 2
    assert store.get("c") == []
    [pending] = RunJournal(store).pending()
    assert [m["role"] for m in pending.messages] == ["user", "assistant", "tool"]


def test_a_run_ended_while_the_keeper_holds_it_leaves_the_keepers_hold() -> None:
    """A run whose wait to take its journal back was cut short (an interrupt) ends while
    the keeper still holds the run's lock: ending lets go of nothing it does not hold,
    the keeper's own release later works, and the lock is never taken again."""
    kept = KEEPER.keep(Kept("cut-short", LEASE_S, lambda: False, lambda: False, lambda: None))
    kept.call()
    assert kept.lock.acquire(blocking=False)  # as the keeper does while it renews
    KEEPER.end(kept)  # the run's `finally`, its `returned` interrupted
    kept.lock.release()  # the keeper's renewal ends: no "release unlocked lock"
    assert kept.ended and not kept.mine


def test_a_reopened_first_write_waited_for_by_the_keeper_and_the_run_is_written_once(
    store: memoryd.StoreHandle,
) -> None:
    """A run whose journal id holds an empty journal at a later version (its first
    write refused, then written again at that version): the keeper waits for that
    write during the LLM call after the step, then the run does. It is written again
    once, not twice (the second would find the run's own journal and call it taken
    over), and the run commits."""
    store.record(
        "memoryd.run/r", "memo", data={"owner": "elsewhere", "lease_s": 30.0}, expected_version=0
    )

    @memoryd.tool
    def quick() -> str:
        """Answer at once."""
        return "ok"

    def thinking(sent: list[Any]) -> str:
        time.sleep(LEASE_S)  # the keeper looks meanwhile, and waits for the step write
        return "thought it through"

    agent = _agent(store, ScriptedModel([*_calls("quick"), thinking]), [quick])
    assert agent.run("go", conversation_id="c", run_id="r").text == "thought it through"
    assert len(store.get("c")) == 4
    assert RunJournal(store).pending() == []


def test_a_run_id_taken_over_once_runs_again_in_this_process(store: memoryd.StoreHandle) -> None:
    """A run taken over during a call fails; once the new owner dropped it, the same run
    id (a client retrying its request) runs again here with two tool steps, journaled
    and committed, and leaves nothing pending."""
    again = (*_calls("quick", "quick"), "again")
    raised, _, agent = _taken_over_during_the_model_call(store, in_handler=False, then=again)
    assert isinstance(raised, memoryd.ConflictError)
    [taken] = RunJournal(store).pending()
    RunJournal(store).discard(taken.run_id)  # the new owner drops it
    assert agent.run("go", conversation_id="c2", run_id=taken.run_id).text == "again"
    assert RunJournal(store).pending() == []
    assert len(store.get("c2")) == 6


def test_a_renewal_the_store_refuses_is_logged_once_a_call(store: memoryd.StoreHandle) -> None:
    """The store stops during a long tool: the keeper's renewal fails, is logged once
    (not at every look for the rest of the call), and the run meets the failure
    itself at its next write."""

    @memoryd.tool
    def quick() -> str:
        """Answer at once."""
        return "ok"

    @memoryd.tool
    def slow() -> str:
        """Stop the store, then take three leases."""
        store.stop()
        time.sleep(LONG_S)
        return "done"

    agent = _agent(store, ScriptedModel([*_calls("quick", "slow"), "finished"]), [quick, slow])
    with capture_logs() as logs, pytest.raises(memoryd.MemorydError):
        agent.run("go", conversation_id="c")
    failed = [e for e in logs if e["event"] == "run_lease_renewal_failed"]
    assert len(failed) == 1, failed
