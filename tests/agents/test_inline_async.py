"""Async calls run on their caller's event loop: `AgentSystem.acall` to a live, idle
instance runs the turn as a coroutine (`Agent.arun`), and a kill, the call's deadline or
the caller's cancellation still stop it at a step boundary, the instance's own thread
resuming the run from its journal."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

import memoryd
from memoryd.agents import AgentSystem
from tests.agents._agents import (
    Gate,
    assert_resumed_once,
    factory,
    kill_during_step,
    left_to_the_instance,
    note_tool,
    start,
    stepping_model,
)
from tests.helpers import Overlap, Worker


def where(
    log: list[tuple[str, str]], *, gate_at: int | None = None, gate: Gate | None = None
) -> Any:
    """A function tool ``note(n)`` recording (step, thread name): it runs in a worker
    thread of the caller's loop, or in the instance's thread."""
    return note_tool(
        log, gate_at=gate_at, gate=gate, record=lambda n: (str(n), threading.current_thread().name)
    )


def acall_in_thread(system: AgentSystem, *args: Any, **kwargs: Any) -> Worker:
    """``asyncio.run(system.acall(...))`` in a thread named ``caller``."""
    worker = Worker(lambda: asyncio.run(system.acall(*args, **kwargs)), name="caller")
    worker.start()
    return worker


def instance_thread(system: AgentSystem, key: str = "k") -> str:
    return f"Instance-{system.name}/w/{key}"


def test_an_async_call_runs_on_the_callers_loop_and_blocking_tools_off_it(
    store: memoryd.StoreHandle, systems: list[AgentSystem]
) -> None:
    """An async tool runs on the caller's loop; a function tool in a worker thread of
    that loop, never in the instance's thread (which never starts)."""
    threads: list[str] = []

    @memoryd.tool
    async def note(n: int) -> str:
        """Note a step.

        Args:
            n: The step.
        """
        threads.append(threading.current_thread().name)
        return f"noted {n}"

    log: list[tuple[str, str]] = []
    system = start(
        systems,
        {
            "a": factory(store, lambda: stepping_model(2), note),
            "w": factory(store, lambda: stepping_model(1), where(log)),
        },
        store=store,
    )

    async def calls() -> tuple[str, str, str]:
        first = await system.acall("a", "k", "one")
        second = await system.acall("w", "k", "two")
        return first.text, second.text, threading.current_thread().name

    one, two, loop_thread = asyncio.run(calls())
    assert (one, two) == ("done 2 for one", "done 1 for two")
    assert threads == [loop_thread, loop_thread]
    assert log[0][1] not in (loop_thread, instance_thread(system))
    assert not [t for t in threading.enumerate() if t.name.startswith("Instance-")]


def test_a_kill_during_an_async_calls_run_resumes_it_in_the_next_incarnation(
    store: memoryd.StoreHandle, systems: list[AgentSystem]
) -> None:
    """The kill waits in the borrowed inbox, the loop's run stops at its next step
    boundary, and the new incarnation resumes it in its own thread: every tool ran
    once, the awaiting caller gets the result."""
    gate, log = Gate(), []
    system = start(
        systems,
        {"w": factory(store, lambda: stepping_model(3), where(log, gate_at=1, gate=gate))},
        store=store,
    )
    caller = acall_in_thread(system, "w", "k", "job")
    kill_during_step(gate, f"{system.name}/w/k")
    assert caller.outcome().text == "done 3 for job"
    assert_resumed_once(system, store, log)
    assert log[2][1] == instance_thread(system) != log[0][1]


def test_an_async_run_past_its_deadline_is_left_to_the_instance(
    store: memoryd.StoreHandle, systems: list[AgentSystem]
) -> None:
    """Past its deadline, at the next step boundary, the caller gets CallTimeout and the
    instance's thread finishes the run from its journal: no tool runs twice."""
    gate, log = Gate(), []
    system = start(
        systems,
        {"w": factory(store, lambda: stepping_model(2), where(log, gate_at=0, gate=gate))},
        store=store,
    )
    started = time.monotonic()
    caller = acall_in_thread(system, "w", "k", "job", timeout=0.5)
    assert gate.arrived.acquire(timeout=10)
    left_to_the_instance(system, store, caller, gate, log, started=started)
    assert log[1][1] == instance_thread(system) != log[0][1]


def test_async_calls_to_one_instance_run_one_at_a_time_in_arrival_order(
    store: memoryd.StoreHandle, systems: list[AgentSystem]
) -> None:
    """Three calls at once on one loop: the first runs on the loop, the others queue and
    the instance's thread runs them after it, in order; no two runs overlap."""
    overlap, order = Overlap(), []
    model = lambda: stepping_model(2, tool="work")  # noqa: E731
    system = start(systems, {"w": factory(store, model, overlap.tool)}, store=store)
    system.call("w", "k", "warm")

    async def calls() -> list[str]:
        async def one(text: str) -> str:
            result = await system.acall("w", "k", text)
            order.append(text)
            return result.text

        return list(await asyncio.gather(one("a"), one("b"), one("c")))

    assert asyncio.run(calls()) == ["done 2 for a", "done 2 for b", "done 2 for c"]
    assert overlap.most == 1 and order == ["a", "b", "c"]
    users = [m["content"] for m in store.get("w/k") if m["role"] == "user"]
    assert users == ["warm", "a", "b", "c"]


def test_async_calls_to_an_instance_that_is_down_keep_their_order(
    store: memoryd.StoreHandle, systems: list[AgentSystem]
) -> None:
    """Twenty calls gathered on one loop to an instance not yet live: the first wakes it,
    the others wait for its call to be placed, and all run in the order they were made
    (each waited for the wake in a worker thread, and was placed as those threads ended:
    in five rounds out of five the first call ran last)."""
    system = start(systems, {"w": factory(store, lambda: stepping_model(0))}, store=store)

    async def calls(key: str) -> list[str]:
        made = [system.acall("w", key, f"m{n}") for n in range(20)]
        return [result.text for result in await asyncio.gather(*made)]

    for round_ in range(3):
        key = f"k{round_}"
        assert asyncio.run(calls(key)) == [f"done 0 for m{n}" for n in range(20)]
        users = [m["content"] for m in store.get(f"w/{key}") if m["role"] == "user"]
        assert users == [f"m{n}" for n in range(20)]


def _hanging_note(calls: list[str], hanging: list[asyncio.Event]) -> Any:
    """An async tool ``note(n)`` recording each call; at step 1, while ``hanging`` holds
    an event, it sets that event (its caller may cancel now) and waits for ever."""

    @memoryd.tool
    async def note(n: int) -> str:
        """Note a step.

        Args:
            n: The step.
        """
        calls.append(str(n))
        if n == 1 and hanging:
            hanging.pop().set()
            await asyncio.Event().wait()
        return f"noted {n}"

    return note


async def _cancelled_in_the_tool(system: AgentSystem, hanging: list[asyncio.Event]) -> None:
    """Call ``w/k`` with request id ``r1`` and cancel the call once its `_hanging_note`
    tool waits: the call raises CancelledError."""
    started = asyncio.Event()
    hanging.append(started)
    running = asyncio.ensure_future(system.acall("w", "k", "job", request_id="r1"))
    await started.wait()
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running


def test_a_cancelled_async_call_leaves_its_run_to_the_same_request_id(
    store: memoryd.StoreHandle, systems: list[AgentSystem]
) -> None:
    """Cancelled in its second tool, the call raises CancelledError and stores nothing;
    calling again with its request id finishes the run without calling the first tool
    again, and a third call with the id returns that result."""
    calls: list[str] = []
    hanging: list[asyncio.Event] = []  # armed by the scenario, once
    note = _hanging_note(calls, hanging)
    system = start(systems, {"w": factory(store, lambda: stepping_model(3), note)}, store=store)
    system.call("w", "k", "warm")
    calls.clear()

    async def scenario() -> tuple[str, str]:
        await _cancelled_in_the_tool(system, hanging)
        assert store.version("w/k") == 1
        first = await system.acall("w", "k", "job", request_id="r1")
        again = await system.acall("w", "k", "job", request_id="r1")
        return first.text, again.text

    assert asyncio.run(scenario()) == ("done 3 for job", "done 3 for job")
    assert calls == ["0", "1", "1", "2"]  # the cancelled tool ran again, the recorded one not
    assert store.version("w/k") == 2
    assert system.pending_runs() == []


def test_a_cancelled_call_that_resumes_its_run_stops_it_and_leaves_it_pending(
    store: memoryd.StoreHandle, systems: list[AgentSystem]
) -> None:
    """A call with a request id is cancelled in its second tool, and so is the call that
    resumes it, in the same tool: the resume stops there (it ran on in a worker thread,
    so the instance looked idle while a run went on, and the loop's exit waited for
    it), the run is pending, and a third call finishes it with each recorded tool once."""
    calls: list[str] = []
    hanging: list[asyncio.Event] = []  # armed by the scenario before each cancelled call
    note = _hanging_note(calls, hanging)
    system = start(systems, {"w": factory(store, lambda: stepping_model(3), note)}, store=store)
    system.call("w", "k", "warm")
    calls.clear()

    async def scenario() -> str:
        await _cancelled_in_the_tool(system, hanging)
        await _cancelled_in_the_tool(system, hanging)  # resumes the run, cancelled likewise
        assert len(system.pending_runs()) == 1
        assert [i.running for i in system.instances()] == [False]
        assert store.version("w/k") == 1
        return (await system.acall("w", "k", "job", request_id="r1")).text

    assert asyncio.run(scenario()) == "done 3 for job"
    assert calls == ["0", "1", "1", "1", "2"]
    assert system.pending_runs() == []
