"""Calls run in their caller's thread: a call to a live, idle instance runs there, and a
kill, a shutdown or the call's deadline still stop it at a step boundary, after which
the instance's own thread resumes the run from its journal; registry names of agent
systems never clash with store names."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest

import memoryd
import supervisors
from memoryd.agents import AgentSystem
from tests.agents._agents import (
    Gate,
    assert_resumed_once,
    call_at_gate,
    echo_model,
    factory,
    kill_during_step,
    left_to_the_instance,
    note_tool,
    start,
    stepping_model,
)
from tests.helpers import Worker


def thread_tool(
    log: list[tuple[str, str]], *, gate_at: int | None = None, gate: Gate | None = None
) -> Any:
    """A ``note(n)`` tool recording (step, thread name); at step ``gate_at`` it first
    waits on ``gate``."""
    return note_tool(
        log, gate_at=gate_at, gate=gate, record=lambda n: (str(n), threading.current_thread().name)
    )


def test_a_call_to_a_live_idle_instance_runs_in_the_callers_thread(
    store: memoryd.StoreHandle, systems: list[AgentSystem]
) -> None:
    """The first call (after the activation) and the next ones run their tools in the
    caller's thread, in order, and are stored as usual."""
    log: list[tuple[str, str]] = []
    system = start(
        systems, {"w": factory(store, lambda: stepping_model(1), thread_tool(log))}, store=store
    )
    me = threading.current_thread().name
    assert system.call("w", "k", "one").text == "done 1 for one"
    assert system.call("w", "k", "two").text == "done 1 for two"
    assert log == [("0", me), ("0", me)]
    assert [m["content"] for m in store.get("w/k") if m["role"] == "user"] == ["one", "two"]
    assert system.stats()["activations"] == 1


def test_a_kill_during_a_run_in_the_callers_thread_resumes_it_in_the_next_incarnation(
    store: memoryd.StoreHandle, systems: list[AgentSystem]
) -> None:
    """The kill waits in the borrowed inbox, the run stops at its next step boundary,
    and the new incarnation resumes it in its own thread: every tool ran once, the
    caller gets the result."""
    gate, log = Gate(), []
    tool = thread_tool(log, gate_at=1, gate=gate)
    system = start(systems, {"w": factory(store, lambda: stepping_model(3), tool)}, store=store)
    caller = Worker(lambda: system.call("w", "k", "job"), name="caller")
    caller.start()
    kill_during_step(gate, f"{system.name}/w/k")
    assert caller.outcome().text == "done 3 for job"
    assert_resumed_once(system, store, log)
    assert log[0][1] == log[1][1] == "caller" and log[2][1] != "caller"
    assert system.instances()[0].incarnations == 2


def test_a_run_in_the_callers_thread_past_its_deadline_is_left_to_the_instance(
    store: memoryd.StoreHandle, systems: list[AgentSystem]
) -> None:
    """Past its deadline, at the next step boundary, the caller gets CallTimeout and the
    instance's thread finishes the run from its journal: no tool runs twice."""
    gate, log = Gate(), []
    tool = thread_tool(log, gate_at=0, gate=gate)
    system = start(systems, {"w": factory(store, lambda: stepping_model(2), tool)}, store=store)
    started = time.monotonic()
    caller = call_at_gate(system, gate, "job", thread="caller", timeout=0.5)
    left_to_the_instance(system, store, caller, gate, log, started=started)
    assert log[0][1] == "caller" and log[1][1] != "caller"


def test_a_system_and_a_store_of_one_name_do_not_clash(systems: list[AgentSystem]) -> None:
    """A system named like a running store starts: its supervisor is under memoryd.agents/."""
    name = f"same-{uuid.uuid4().hex[:8]}"
    store = memoryd.EphemeralStore.start(name=name)
    system = start(systems, {"echo": factory(store, echo_model)}, store=store, name=name)
    assert system.call("echo", "k", "hi").text == "echo: hi"
    assert supervisors.whereis(f"memoryd.agents/{name}") is not None
    assert supervisors.whereis(f"{name}/echo/k") is not None
    assert memoryd.whereis(name) is not None


def test_a_store_may_not_take_a_name_under_the_agents_prefix() -> None:
    """Store names under memoryd.agents/ are refused, so no store can clash with a system."""
    with pytest.raises(ValueError, match="reserved"):
        memoryd.EphemeralStore.start(name="memoryd.agents/crew")
