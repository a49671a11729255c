"""Agents for the agent-system tests: a model that calls a tool a set number of times,
tools that count their calls or wait on a gate, and the ways the tests start a system,
hold a run at its gate and kill it there (real threads, no fakes of memoryd)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import memoryd
import supervisors
from memoryd import CallTimeout, messages
from memoryd.agents import AgentSystem
from memoryd.llm import ScriptedModel
from tests.helpers import Worker, wait_until

Message = dict[str, Any]


def tool_steps_done(sent: list[Message]) -> int:
    """How many tool results the current turn (after the last user message) holds."""
    last_user = max(i for i, m in enumerate(sent) if m.get("role") == "user")
    return sum(1 for m in sent[last_user:] if m.get("role") == "tool")


def stepping_model(steps: int, tool: str = "note") -> ScriptedModel:
    """A model that calls ``tool`` ``steps`` times, one call per step, then answers
    ``"done <steps> for <input>"``; it reads the turn, so a resumed run continues it."""

    def decide(sent: list[Message]) -> Message | str:
        done = tool_steps_done(sent)
        if done < steps:
            call = messages.tool_call(f"c{done}", tool, {"n": done})
            return messages.assistant(tool_calls=[call])
        last_user = max(i for i, m in enumerate(sent) if m.get("role") == "user")
        return f"done {done} for {sent[last_user]['content']}"

    return ScriptedModel([decide] * (steps + 1) * 100)


def echo_model() -> ScriptedModel:
    """A model that answers every turn with ``"echo: <input>"`` at once."""

    def answer(sent: list[Message]) -> str:
        last_user = max(i for i, m in enumerate(sent) if m.get("role") == "user")
        return f"echo: {sent[last_user]['content']}"

    return ScriptedModel([answer] * 10_000)


class Gate:
    """A tool's way to stop until the test lets it go, telling the test it arrived."""

    def __init__(self) -> None:
        self.arrived = threading.Semaphore(0)
        self.release = threading.Event()

    def wait(self) -> None:
        self.arrived.release()
        if not self.release.wait(30.0):
            raise AssertionError("the test never opened the gate")


def note_tool(
    log: list[Any],
    *,
    gate_at: int | None = None,
    gate: Gate | None = None,
    record: Callable[[int], Any] = str,
) -> Any:
    """A ``note(n)`` tool appending ``record(n)`` (by default ``"<n>"``) to ``log``; at
    step ``gate_at`` it first waits on ``gate``."""

    @memoryd.tool
    def note(n: int) -> str:
        """Note a step.

        Args:
            n: The step.
        """
        if gate is not None and n == gate_at:
            gate.wait()
        log.append(record(n))
        return f"noted {n}"

    return note


def file_note_tool(path: Path, key: str, *, block_at: int | None = None) -> Any:
    """A ``note(n)`` tool appending ``"<key> <n>"`` to a file (its side effect); at step
    ``block_at`` it first writes ``<path>.<key>.blocked`` and blocks for ever, before
    the side effect."""

    @memoryd.tool
    def note(n: int) -> str:
        """Note a step.

        Args:
            n: The step.
        """
        if n == block_at:
            Path(f"{path}.{key}.blocked").write_text("")
            threading.Event().wait()
        with path.open("a") as out:
            out.write(f"{key} {n}\n")
            out.flush()
        return f"noted {n}"

    return note


def factory(store: memoryd.StoreHandle, make_model: Callable[[], Any], *tools: Any) -> Any:
    """An agent type: ``key -> Agent`` on ``store`` with a fresh model and these tools."""
    return lambda key: memoryd.Agent(llm=make_model(), memory=store, tools=list(tools))


def start(systems: list[AgentSystem], agents: dict[str, Any], **options: Any) -> AgentSystem:
    """Start a system (named ``crew-<random>`` unless ``name`` is given) that the
    ``systems`` fixture stops after the test."""
    options.setdefault("name", f"crew-{uuid.uuid4().hex[:8]}")
    system = AgentSystem.start(agents, **options)
    systems.append(system)
    return system


def start_gated(
    systems: list[AgentSystem],
    store: memoryd.StoreHandle,
    *,
    steps: int = 1,
    gate_at: int = 0,
    **options: Any,
) -> tuple[AgentSystem, Gate, list[str]]:
    """A system on ``store`` with one agent type ``"w"``: a ``steps``-step model and a
    ``note`` tool that waits on the returned gate at step ``gate_at``; the log is the
    tool's."""
    gate, log = Gate(), []
    tool = note_tool(log, gate_at=gate_at, gate=gate)
    agents = {"w": factory(store, lambda: stepping_model(steps), tool)}
    return start(systems, agents, store=store, **options), gate, log


def call_at_gate(
    system: AgentSystem, gate: Gate, text: str, *, thread: str | None = None, **call: Any
) -> Worker:
    """Call instance ``w/k`` with ``text`` in a worker thread (named ``thread``) and
    return once its run waits on ``gate``."""
    worker = Worker(lambda: system.call("w", "k", text, **call), name=thread)
    worker.start()
    assert gate.arrived.acquire(timeout=10)
    return worker


def kill_during_step(gate: Gate, name: str) -> None:
    """Kill instance ``name`` while its tool waits on ``gate``, then let the tool finish:
    the kill is honoured at the run's next step boundary."""
    assert gate.arrived.acquire(timeout=10)
    ref = supervisors.whereis(name)
    assert ref is not None
    assert supervisors.kill(name)
    wait_until(lambda: ref.actor_inbox.qsize() > 0)  # type: ignore[attr-defined]
    gate.release.set()


def assert_resumed_once(system: AgentSystem, store: memoryd.StoreHandle, log: list[Any]) -> None:
    """Instance ``w/k``'s 3-step run, killed at a step and resumed by its next
    incarnation: each tool ran once (``log`` holds (step, thread) pairs), one restart
    and one resume, and the turn committed as one event."""
    assert [step for step, _ in log] == ["0", "1", "2"]
    assert (system.stats()["restarts"], system.stats()["resumed"]) == (1, 1)
    (event,) = store.events("w/k")
    assert len(event.messages) == 8  # input, 3 x (call, result), answer


def left_to_the_instance(
    system: AgentSystem,
    store: memoryd.StoreHandle,
    caller: Any,
    gate: Gate,
    log: list[Any],
    *,
    started: float,
) -> None:
    """Instance ``w/k``'s 2-step run, its caller's deadline of 0.5 s from ``started``
    passed while its first tool waited on ``gate``: the caller gets CallTimeout, the
    instance finishes the run from its journal, and no tool ran twice."""
    wait_until(lambda: time.monotonic() > started + 0.6)  # the deadline has passed
    gate.release.set()
    with pytest.raises(CallTimeout, match="goes on"):
        caller.outcome()
    wait_until(lambda: store.version("w/k") == 1)
    assert [step for step, _ in log] == ["0", "1"]
    assert system.pending_runs() == []
