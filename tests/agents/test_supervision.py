"""Supervision of agent instances: a killed instance is restarted and resumes the run it
was running, from its journal, without calling a recorded tool again; the caller gets
that run's result; past the restart intensity the failure escalates."""

from __future__ import annotations

from typing import Any

import memoryd
import supervisors
from memoryd import messages
from memoryd.agents import AgentSystem
from memoryd.llm import ScriptedModel
from tests.agents._agents import (
    Gate,
    factory,
    kill_during_step,
    note_tool,
    start,
    start_gated,
    stepping_model,
    tool_steps_done,
)
from tests.helpers import Worker, wait_until


def test_a_killed_instance_resumes_the_run_and_the_caller_gets_its_result(
    store: memoryd.StoreHandle, systems: list[AgentSystem]
) -> None:
    """Killed during step 2 of 4: the new incarnation resumes from the journal; every
    tool ran once; one commit holds the whole turn."""
    system, gate, log = start_gated(systems, store, steps=4, gate_at=1, name="crew")
    caller = Worker(lambda: system.call("w", "k", "job"))
    caller.start()
    kill_during_step(gate, "crew/w/k")
    reply = caller.outcome()
    assert reply.text == "done 4 for job"
    assert log == ["0", "1", "2", "3"]
    (event,) = store.events("w/k")
    assert event.idempotency_key == reply.run_id and len(event.messages) == 10
    (info,) = system.instances()
    assert info.incarnations == 2
    stats = system.stats()
    assert (stats["restarts"], stats["resumed"]) == (1, 1)
    assert system.pending_runs() == []


def test_a_run_killed_before_its_first_tool_step_runs_again_from_its_input(
    store: memoryd.StoreHandle, systems: list[AgentSystem]
) -> None:
    """Killed while the model chose its first tool call (nothing journaled, no tool ran):
    the next incarnation runs the call again from its input; every tool runs once."""
    gate, log, asked = Gate(), [], list[int]()

    def decide(sent: list[dict[str, Any]]) -> Any:
        done = tool_steps_done(sent)
        asked.append(done)
        if len(asked) == 1:
            gate.wait()
        if done < 2:
            call = messages.tool_call(f"c{done}", "note", {"n": done})
            return messages.assistant(tool_calls=[call])
        return f"done {done}"

    agents = {"w": factory(store, lambda: ScriptedModel([decide] * 10), note_tool(log))}
    system = start(systems, agents, store=store, name="crew")
    caller = Worker(lambda: system.call("w", "k", "job"))
    caller.start()
    kill_during_step(gate, "crew/w/k")
    assert caller.outcome().text == "done 2"
    assert asked == [0, 0, 1, 2] and log == ["0", "1"]
    assert len(store.events("w/k")) == 1


def test_calls_queued_behind_a_killed_run_are_answered_by_the_next_incarnation(
    store: memoryd.StoreHandle, systems: list[AgentSystem]
) -> None:
    """The mailbox outlives the incarnation: queued calls are neither lost nor reordered."""
    system, gate, _log = start_gated(systems, store, steps=2, gate_at=1, name="crew")
    first = Worker(lambda: system.call("w", "k", "first"))
    first.start()
    wait_until(lambda: system.instances() and system.instances()[0].running)
    second = Worker(lambda: system.call("w", "k", "second"))
    second.start()
    wait_until(lambda: system.instances()[0].queued == 1)
    kill_during_step(gate, "crew/w/k")
    assert first.outcome().text == "done 2 for first"
    gate.release.set()
    assert second.outcome().text == "done 2 for second"
    users = [m["content"] for m in store.get("w/k") if m["role"] == "user"]
    assert users == ["first", "second"]


def test_an_idle_instance_killed_is_restarted_and_keeps_answering(
    store: memoryd.StoreHandle, systems: list[AgentSystem]
) -> None:
    """supervisors.kill of an idle instance: the supervisor starts a new incarnation."""
    log: list[str] = []
    agents = {"w": factory(store, lambda: stepping_model(1), note_tool(log))}
    system = start(systems, agents, store=store, name="crew")
    system.call("w", "k", "one")
    name = "crew/w/k"
    old = supervisors.whereis(name)
    assert supervisors.kill(name)
    wait_until(lambda: (ref := supervisors.whereis(name)) is not None and ref is not old)
    assert system.call("w", "k", "two").text == "done 1 for two"
    assert system.instances()[0].incarnations == 2


def test_past_the_restart_intensity_the_system_supervisor_is_restarted_and_work_resumes(
    store: memoryd.StoreHandle, systems: list[AgentSystem]
) -> None:
    """max_restarts=0: the first kill exhausts the intensity; the system's supervisor
    gives up, memoryd's root restarts it (OTP escalation), and the interrupted run is
    resumed by a fresh incarnation under the new supervisor."""
    system, gate, log = start_gated(systems, store, steps=3, gate_at=1, name="crew", max_restarts=0)
    first_supervisor = supervisors.whereis("memoryd.agents/crew")
    caller = Worker(lambda: system.call("w", "k", "job"))
    caller.start()
    kill_during_step(gate, "crew/w/k")
    assert caller.outcome().text == "done 3 for job"
    assert log == ["0", "1", "2"]
    assert system.stats()["escalations"] == 1
    assert supervisors.whereis("memoryd.agents/crew") not in (None, first_supervisor)
    assert system.call("w", "k", "after").text == "done 3 for after"


def test_an_agent_system_escalating_again_and_again_never_takes_the_stores_down(
    store: memoryd.StoreHandle, systems: list[AgentSystem]
) -> None:
    """max_restarts=0 and six kills in a row: each escalates to memoryd's root, which
    restarts the system's supervisor, later ones after a growing delay (a backoff) that
    keeps them from counting toward the root's own intensity. The root gave up at the
    fourth within its 5 s window, and with it went every store of the process: the same
    store actor serves throughout, and the system works after the storm."""
    system, _, _ = start_gated(systems, store, steps=1, gate_at=99, name="storm", max_restarts=0)
    store_actor = supervisors.whereis(store.name)
    assert store_actor is not None
    for n in range(6):
        system.call("w", "k", f"job {n}")
        instance = wait_until(lambda: supervisors.whereis("storm/w/k"))
        supervisors.kill("storm/w/k")
        wait_until(lambda n=n: system.stats()["escalations"] == n + 1)
        wait_until(lambda old=instance: supervisors.whereis("storm/w/k") is not old)
        wait_until(lambda: supervisors.whereis("memoryd.agents/storm") is not None, timeout=10)
    assert supervisors.whereis(store.name) is store_actor
    store.add("after", [messages.user("still here")])
    assert system.call("w", "k", "after the storm").text == "done 1 for after the storm"
