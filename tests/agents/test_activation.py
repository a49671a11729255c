"""Activation costs no thread: an instance runs ``init`` in the activating caller's thread,
its calls run in their callers' threads, and its own thread starts only for a message
it must handle itself (a queued call, a kill); supervision holds all the same."""

from __future__ import annotations

import asyncio
import threading

import memoryd
import supervisors
from memoryd.agents import AgentSystem
from tests.agents._agents import (
    Gate,
    echo_model,
    factory,
    kill_during_step,
    start,
    stepping_model,
)
from tests.agents.test_inline import thread_tool
from tests.helpers import Worker, wait_until


def instance_threads(system: AgentSystem) -> list[str]:
    prefix = f"Instance-{system.name}/"
    return sorted(t.name for t in threading.enumerate() if t.name.startswith(prefix))


def test_activated_instances_called_in_their_callers_threads_start_no_thread(
    store: memoryd.StoreHandle, systems: list[AgentSystem]
) -> None:
    """Many activations and calls, then passivation: no instance ever starts a thread,
    and each is activated once and passivated once."""
    now = [0.0]
    system = start(
        systems,
        {"e": factory(store, echo_model)},
        store=store,
        idle_after_s=60.0,
        clock=lambda: now[0],
    )
    for n in range(50):
        assert system.call("e", f"k{n}", "hi").text == "echo: hi"
        assert system.call("e", f"k{n}", "again").text == "echo: again"
    assert len(system.instances()) == 50
    assert instance_threads(system) == []
    now[0] = 120.0
    assert system.passivate_idle() == 50
    assert system.instances() == []
    assert instance_threads(system) == []
    assert (system.stats()["activations"], system.stats()["passivations"]) == (50, 50)
    assert system.call("e", "k0", "back").text == "echo: back"  # activated again


def test_max_active_passivates_instances_that_never_started_a_thread(
    store: memoryd.StoreHandle, systems: list[AgentSystem]
) -> None:
    """The least recently used instance makes room (stopped in the activating caller's
    thread), and its conversation is kept for its next activation."""
    system = start(systems, {"e": factory(store, echo_model)}, store=store, max_active=2)
    for key in ("a", "b", "c"):
        system.call("e", key, f"to {key}")
    assert sorted(i.key for i in system.instances()) == ["b", "c"]
    assert instance_threads(system) == []
    system.call("e", "a", "again")
    assert [m["content"] for m in store.get("e/a") if m["role"] == "user"] == ["to a", "again"]


def test_a_kill_of_an_instance_whose_thread_never_started_resumes_the_waiting_call(
    store: memoryd.StoreHandle, systems: list[AgentSystem]
) -> None:
    """The instance runs its first call in the activating caller's thread and has no
    thread of its own; a kill starts one, which stops the run at its next step boundary,
    and the supervisor's new incarnation resumes it: the caller gets the result, each
    tool ran once."""
    gate, log = Gate(), []
    tool = thread_tool(log, gate_at=1, gate=gate)
    system = start(systems, {"w": factory(store, lambda: stepping_model(3), tool)}, store=store)
    caller = Worker(lambda: system.call("w", "k", "job"), name="caller")
    caller.start()
    wait_until(system.instances)
    assert instance_threads(system) == []
    kill_during_step(gate, f"{system.name}/w/k")
    assert caller.outcome().text == "done 3 for job"
    assert [step for step, _ in log] == ["0", "1", "2"]
    assert log[1][1] == "caller" and log[2][1] == f"Instance-{system.name}/w/k"
    assert system.instances()[0].incarnations == 2
    assert (system.stats()["restarts"], system.stats()["resumed"]) == (1, 1)


def test_an_idle_instance_that_never_started_a_thread_is_killed_and_restarted(
    store: memoryd.StoreHandle, systems: list[AgentSystem]
) -> None:
    """The kill starts its thread to crash it; the restarted incarnation answers the next
    call in the caller's thread again."""
    system = start(systems, {"e": factory(store, echo_model)}, store=store)
    system.call("e", "k", "one")
    name = f"{system.name}/e/k"
    old = supervisors.whereis(name)
    assert instance_threads(system) == []
    assert supervisors.kill(name)
    wait_until(lambda: supervisors.whereis(name) not in (None, old))
    assert system.call("e", "k", "two").text == "echo: two"
    assert system.instances()[0].incarnations == 2
    wait_until(lambda: instance_threads(system) == [])  # the killed one's thread ended


def test_an_async_call_runs_its_turn_on_the_callers_loop_without_an_instance_thread(
    store: memoryd.StoreHandle, systems: list[AgentSystem]
) -> None:
    """acall to an idle instance runs its turn as a coroutine of the caller's loop (the
    model's ``acomplete`` awaited there); the instance never starts a thread."""
    system = start(systems, {"e": factory(store, echo_model)}, store=store)

    async def calls() -> list[str]:
        return [(await system.acall("e", "k", text)).text for text in ("hi", "again")]

    assert asyncio.run(calls()) == ["echo: hi", "echo: again"]
    assert instance_threads(system) == []
    assert system.stats()["activations"] == 1
