"""What an agent system shows of itself: its live instances, its pending runs, its counts."""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from memoryd.agent.agent import PendingRun, pending_runs_of
from memoryd.agent.journal import RunJournal
from memoryd.agents.instance import Slot
from memoryd.agents.naming import split_conversation
from memoryd.store.handle import StoreHandle

__all__ = ["COUNTERS", "Counters", "InstanceInfo", "describe", "load", "pending_runs"]

COUNTERS = (
    "calls",
    "overloaded",
    "timeouts",
    "activations",
    "passivations",
    "restarts",
    "resumed",
    "discarded",
    "escalations",
)
"""The events `AgentSystem.stats` counts."""


@dataclass(frozen=True, kw_only=True, slots=True)
class InstanceInfo:
    """A live instance, as `AgentSystem.instances` lists it.

    Attributes:
        agent_type: Its agent type.
        key: Its key.
        name: Its registered name ``"<system>/<type>/<key>"``.
        conversation_id: Its conversation ``"<type>/<key>"``.
        queued: Calls waiting in its mailbox.
        running: True while it runs a call (in its own thread or in its caller's).
        incarnations: How many times it was started since it was last activated.
    """

    agent_type: str
    key: str
    name: str
    conversation_id: str
    queued: int
    running: bool
    incarnations: int


class Counters:
    """Thread-safe counts of a system's events (`COUNTERS`)."""

    def __init__(self) -> None:
        self._counts = dict.fromkeys(COUNTERS, 0)
        self._lock = threading.Lock()

    def add(self, what: str) -> None:
        """Count one ``what``."""
        with self._lock:
            self._counts[what] += 1

    def snapshot(self) -> dict[str, int]:
        """The counts now."""
        with self._lock:
            return dict(self._counts)


def describe(slots: Iterable[Slot]) -> list[InstanceInfo]:
    """The live instances of ``slots``, sorted by name."""
    infos = []
    for slot in slots:
        with slot.mutex:
            infos.append(
                InstanceInfo(
                    agent_type=slot.agent_type,
                    key=slot.key,
                    name=slot.name,
                    conversation_id=slot.cid,
                    queued=len(slot.queue),
                    running=slot.current is not None,
                    incarnations=slot.incarnations,
                )
            )
    return sorted(infos, key=lambda info: info.name)


def load(slots: Iterable[Slot]) -> tuple[int, int]:
    """How many calls wait and how many run in ``slots``."""
    queued = running = 0
    for slot in slots:
        with slot.mutex:
            queued += len(slot.queue)
            running += slot.current is not None
    return queued, running


def pending_runs(store: StoreHandle, agent_types: Collection[str]) -> list[PendingRun]:
    """The unfinished runs of ``agent_types`` in ``store``, oldest first.

    Args:
        store: The store.
        agent_types: The agent types (a run belongs to the type of its conversation
            ``"<type>/<key>"``).

    Returns:
        Pending runs; ``orphaned`` tells a crashed process's runs from runs going on.
    """
    return pending_runs_of(
        r
        for r in RunJournal(store).pending()
        if split_conversation(r.conversation_id)[0] in agent_types
    )
