"""An instance's agent, built from its type's factory and fitted to the instance.

An instance's state is its conversation ``"<type>/<key>"`` in the system's store, so the
agent a factory returns must keep its memory there (or in a provider with no store of
its own, beamai's four callbacks), and every run of the instance is a turn of that
conversation. A factory written the Agently way activates a session to choose how the
window is shaped (``agent.activate_session(max_length=4000)``, with its handlers and
``input_keys``/``reply_keys``): such a session, made without an id, lends its policy to
the instance's conversation (`Session.with_conversation`), so the instance's turns are
shaped and recorded as the factory asked. A session activated under another id would
name a second conversation that the instance never writes, and a session made without
an id that the factory already wrote to (history, a memo) would be left behind, so both
are refused with what to do instead, never ignored.
"""

from __future__ import annotations

from collections.abc import Callable

from memoryd.agent.agent import Agent
from memoryd.agent.memory import store_of
from memoryd.protocol import DEFAULT_STORE_NAME
from memoryd.provider.default import DefaultProvider

__all__ = ["build_agent"]


def build_agent(
    factory: Callable[[str], object],
    *,
    agent_type: str,
    key: str,
    conversation_id: str,
    store_name: str,
    system: str,
) -> Agent:
    """Call ``factory(key)`` and fit the agent it returns to the instance.

    Args:
        factory: The agent type's factory.
        agent_type: The agent type.
        key: The instance's key.
        conversation_id: The instance's conversation (``"<type>/<key>"``).
        store_name: The name of the system's store.
        system: The system's name (for the errors).

    Returns:
        The agent, with the factory's active session (if any) moved onto the
        instance's conversation.

    Raises:
        TypeError: The factory did not return an `memoryd.Agent`.
        ValueError: The agent keeps its memory in another store than the system's, or
            its active session was given another conversation id, or was written to.
    """
    agent = factory(key)
    if not isinstance(agent, Agent):
        raise TypeError(
            f"the factory of agent type {agent_type!r} returned "
            f"{type(agent).__name__}; it must return a memoryd.Agent"
        )
    store = store_of(agent.provider)
    if store is not None and store.name != store_name:
        hint = ""
        provider = agent.provider
        if (
            store.name == DEFAULT_STORE_NAME
            and isinstance(provider, DefaultProvider)
            and provider.window is not None
        ):
            hint = (
                " (memoryd.window(n) is a window on the default store: give "
                "memory=memoryd.DefaultProvider(store, window=n) with the system's store)"
            )
        raise ValueError(
            f"agent type {agent_type!r} keeps its memory in store {store.name!r}, "
            f"but agent system {system!r} runs on store {store_name!r}; build "
            f"the agent with memory= on the system's store{hint}"
        )
    _fit_session(agent, agent_type, conversation_id)
    return agent


def _fit_session(agent: Agent, agent_type: str, conversation_id: str) -> None:
    """Move the agent's active session onto the instance's conversation (see the module)."""
    session = agent.session
    if session is None or session.id == conversation_id:
        return
    if session.named:
        raise ValueError(
            f"the factory of agent type {agent_type!r} activated session {session.id!r}, "
            f"but this instance's conversation is {conversation_id!r}: activate the "
            "session without an id (its settings and handlers then shape the instance's "
            "conversation), or not at all"
        )
    if session.written:
        raise ValueError(
            f"the factory of agent type {agent_type!r} wrote to its session "
            f"{session.id!r} (messages or a memo), which the instance would leave behind: "
            f"its conversation is {conversation_id!r}; write there instead "
            f"(agent.activate_session({conversation_id!r}) names it)"
        )
    fitted = session.with_conversation(conversation_id)
    del agent.sessions[session.id]
    agent.sessions[conversation_id] = fitted
    agent.activate_session(conversation_id)
