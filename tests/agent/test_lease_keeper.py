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

import memoryd
from memoryd import messages
from memoryd.agent.journal import RunJournal
from memoryd.llm import ScriptedModel

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
    """The same on an event loop: a long awaited tool, the lease live throughout, and
    the loop never blocked by the keeper (a ticker keeps ticking)."""
    seen: list[float] = []
    ticks = 0

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
        nonlocal ticks
        agent = _agent(store, ScriptedModel([*_calls("quick", "slow"), "finished"]), [quick, slow])
        run = asyncio.ensure_future(agent.arun("go", conversation_id="c"))
        while not run.done():
            ticks += 1
            await asyncio.sleep(0.05)
        return (await run).text

    assert asyncio.run(main()) == "finished"
    assert min(seen) > 0
    assert ticks >= LONG_S / 0.05 / 2


def test_a_run_taken_over_during_a_long_call_stops_after_it(
    store: memoryd.StoreHandle,
) -> None:
    """Another process claims the run while its tool runs (as one would once the lease
    ran out, here by hand): the keeper's renewal finds it taken, and the run stops
    right after the call with ConflictError, writing nothing more."""
    started = threading.Event()
    release = threading.Event()

    @memoryd.tool
    def quick() -> str:
        """Answer at once."""
        return "ok"

    @memoryd.tool
    def slow() -> str:
        """Wait until released."""
        started.set()
        release.wait(30)
        return "done"

    agent = _agent(store, ScriptedModel([*_calls("quick", "slow"), "finished"]), [quick, slow])
    outcome: list[BaseException] = []

    def run() -> None:
        try:
            agent.run("go", conversation_id="c")
        except BaseException as exc:
            outcome.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    assert started.wait(30)
    [record] = RunJournal(store).pending()
    RunJournal(store, lease_s=LEASE_S).claim(record)  # another owner, as far as it knows
    time.sleep(LEASE_S)  # the keeper's renewal meets the claim
    release.set()
    worker.join(30)
    assert outcome and isinstance(outcome[0], memoryd.ConflictError)
    assert store.get("c") == []
