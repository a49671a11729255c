"""Agents for the agent-system tests: a model that calls a tool a set number of times,
and tools that count their calls or wait on a gate (real threads, no fakes of memoryd)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import memoryd
from memoryd import messages
from memoryd.llm import ScriptedModel

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


def note_tool(log: list[str], *, gate_at: int | None = None, gate: Gate | None = None) -> Any:
    """A ``note(n)`` tool appending ``"<n>"`` to ``log``; at step ``gate_at`` it first
    waits on ``gate``."""

    @memoryd.tool
    def note(n: int) -> str:
        """Note a step.

        Args:
            n: The step.
        """
        if gate is not None and n == gate_at:
            gate.wait()
        log.append(str(n))
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
