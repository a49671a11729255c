"""An agent type as a tool for another agent, whose calls are idempotent per tool call."""

from __future__ import annotations

import re
from typing import Any, Protocol

from memoryd.agent.agent import RunResult, current_tool_call
from memoryd.kernel.tools import Tool

__all__ = ["Caller", "agent_tool"]


class Caller(Protocol):
    """What the tool calls: an `AgentSystem`."""

    def call(
        self,
        agent_type: str,
        key: str,
        input: Any,
        *,
        request_id: str | None = None,
        timeout: float | None = None,
    ) -> RunResult:
        """Run one turn on an instance."""


def agent_tool(system: Caller, agent_type: str, *, description: str | None = None) -> Tool:
    """A tool ``ask_<type>(key, message)`` calling instance (``agent_type``, ``key``).

    Called from a run, its request id is ``"<run id>/<tool call id>"``: the tool call
    of a resumed caller asks the callee again with the same id and gets the first
    answer back, without a second run.

    Args:
        system: The agent system.
        agent_type: The agent type called.
        description: What the model reads about the tool.

    Returns:
        The tool.
    """

    def ask(key: str, message: str) -> str:
        """Ask an agent.

        Args:
            key: Which instance of the agent to ask (the same key reaches the same
                instance, with its memory).
            message: What to ask.
        """
        running = current_tool_call.get()
        request_id = None if running is None else f"{running[0]}/{running[1]}"
        return system.call(agent_type, key, message, request_id=request_id).text

    name = "ask_" + re.sub(r"[^A-Za-z0-9_-]", "_", agent_type)
    return Tool(
        ask,
        name=name[:64],
        description=description or f"Ask the {agent_type!r} agent; it answers in text.",
    )
