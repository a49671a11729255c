"""Mailboxes: the slots of an agent system's instances and the calls placed on them.

A call is checked first (the system runs, the agent type exists, the key makes a
conversation id, no call cycle, a valid request id), so a refused call writes nothing.
Then it is either claimed to run in its caller's thread (a live instance with nothing
queued or running: `Placed.INLINE`) or queued on its instance's slot in arrival order,
at most ``mailbox`` calls deep (`Overloaded` past that).
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable, Collection
from concurrent.futures import Future
from typing import Any

from memoryd._ids import IdSource
from memoryd.agent.agent import RunResult
from memoryd.agents import naming
from memoryd.agents.instance import Call, Slot, State, call_chain, nudge
from memoryd.errors import AgentSystemStopped, CallCycle, CallTimeout, Overloaded, UnknownAgent

__all__ = ["Mailboxes", "Placed", "unknown_agent"]

_RUN_IDS = IdSource()
"""Run ids of calls without a request id (unique across processes sharing a store,
without a system call per call)."""


class Placed(enum.Enum):
    """Where `Mailboxes.submit` put a call."""

    INLINE = "inline"
    """Claimed for its caller's thread: the caller runs it (`Instance.run_inline`)."""
    LIVE = "live"
    """Queued, and a live incarnation was told to drain its slot."""
    DOWN = "down"
    """Queued on a slot no incarnation drains: the caller activates the instance."""


def unknown_agent(system: str, agent_type: str, types: Collection[str]) -> UnknownAgent:
    """The error for a call to an agent type the system lacks."""
    return UnknownAgent(
        f"agent system {system!r} has no agent type {agent_type!r}; its types are {sorted(types)}"
    )


class Mailboxes:
    """The slots of one agent system, by (agent type, key).

    Args:
        system: The system's name.
        agent_types: Its agent types.
        mailbox: The most calls waiting on one instance.
        clock: The monotonic clock of ``Slot.last_used``.
        count: Counts an event in the system's stats.
        stopped: True once the system is stopped.
    """

    def __init__(
        self,
        *,
        system: str,
        agent_types: Collection[str],
        mailbox: int,
        clock: Callable[[], float],
        count: Callable[[str], None],
        stopped: Callable[[], bool],
    ) -> None:
        self.system = system
        self.mailbox = mailbox
        self._types = frozenset(agent_types)
        self._clock = clock
        self._count = count
        self._stopped = stopped
        self._slots: dict[tuple[str, str], Slot] = {}
        self._lock = threading.Lock()

    def slots(self) -> list[Slot]:
        """Every slot the system knows now."""
        with self._lock:
            return list(self._slots.values())

    def slot(self, agent_type: str, key: str) -> Slot:
        """The slot of (``agent_type``, ``key``), made on first use (the address is not
        checked here: see `address`)."""
        slot = self._slots.get((agent_type, key))  # one dict read: atomic, no lock needed
        if slot is not None:
            return slot
        with self._lock:
            slot = self._slots.get((agent_type, key))
            if slot is None:
                slot = Slot(
                    agent_type=agent_type,
                    key=key,
                    name=naming.instance_name(self.system, agent_type, key),
                    cid=naming.conversation_id(agent_type, key),
                    last_used=self._clock(),
                )
                self._slots[(agent_type, key)] = slot
            return slot

    def address(self, agent_type: str, key: str) -> Slot:
        """Check a call's address before anything is placed, and find its slot.

        A slot the system knows was made for a checked address, so a call to a known
        instance costs one dict read; a new address is checked, then its slot made.

        Returns:
            The slot (it may be retired meanwhile: `submit` looks again then).

        Raises:
            AgentSystemStopped: The system is stopped.
            UnknownAgent: No such agent type.
            ValueError, InvalidConversationId: A bad key.
        """
        if self._stopped():
            raise AgentSystemStopped(f"agent system {self.system!r} is stopped; start a new one")
        if agent_type not in self._types:
            raise unknown_agent(self.system, agent_type, self._types)
        slot = self._slots.get((agent_type, key))
        if slot is None:
            naming.check_key(agent_type, key)
            slot = self.slot(agent_type, key)
        return slot

    def submit(
        self,
        slot: Slot,
        input: Any,
        request_id: str | None,
        deadline: float,
        *,
        inline: bool = False,
        resume: str | None = None,
    ) -> tuple[Slot, Call, Placed]:
        """Place a call on its instance.

        Args:
            slot: The instance's slot, from `address` (the address checked).
            input: The run's input.
            request_id: The caller's request id, or None.
            deadline: The caller's deadline (``time.monotonic()``).
            inline: Claim the call for the caller's thread when the instance is live
                and idle.
            resume: Resume this pending run instead (never refused for a full mailbox).

        Returns:
            The slot (another one when ``slot`` was retired meanwhile), the call, and
            where it was placed.

        Raises:
            CallCycle: The instance is waiting on this very call.
            ValueError: A bad request id.
            Overloaded: The instance's mailbox is full (nothing written).
        """
        name = slot.name
        chain = call_chain.get()
        if name in chain:
            cycle = " -> ".join((*chain[chain.index(name) :], name))
            raise CallCycle(
                f"call cycle: {cycle}; instance {name!r} is waiting on this call, so it "
                "would wait on itself. Call another instance, or restructure the agents"
            )
        if resume is not None:
            run_id = resume
        elif request_id is not None:
            naming.check_request_id(request_id)
            run_id = naming.request_run_id(slot.agent_type, slot.key, request_id)
        else:
            run_id = _RUN_IDS.next()
        call = Call(
            input=input,
            run_id=run_id,
            deadline=deadline,
            request_id=request_id,
            chain=chain,
            resume=resume is not None,
        )
        while True:
            with slot.mutex:
                retired = slot.state is State.RETIRED  # forgotten meanwhile: look again
                if not retired:
                    placed = self._place(slot, call, inline=inline, resume=resume is not None)
            if not retired:
                self._count("calls")
                return slot, call, placed
            slot = self.slot(slot.agent_type, slot.key)

    def _place(self, slot: Slot, call: Call, *, inline: bool, resume: bool) -> Placed:
        """Claim ``call`` for its caller's thread or queue it (under ``slot.mutex``).

        Raises:
            Overloaded: The mailbox is full (never for a resume).
        """
        slot.last_used = self._clock()
        actor = slot.actor
        if (
            inline
            and actor is not None
            and slot.state is State.LIVE
            and slot.current is None
            and not slot.queue
            and actor.actor_inbox.borrow()
        ):
            slot.current, slot.inline = call, True  # no future: its caller runs it
            return Placed.INLINE
        if not resume and len(slot.queue) >= self.mailbox:
            self._count("overloaded")
            raise Overloaded(
                f"instance {slot.name!r} has {len(slot.queue)} calls waiting (mailbox="
                f"{self.mailbox}); nothing was written. Retry later, or start the system "
                "with a larger mailbox"
            )
        call.waited()
        slot.queue.append(call)
        return Placed.LIVE if nudge(slot) else Placed.DOWN

    def withdraw(self, slot: Slot, call: Call) -> Future[RunResult]:
        """Take back a call still waiting (nothing of it runs); a running one goes on.

        Returns:
            The call's future: cancelled, or running when the call had started.
        """
        with slot.mutex:  # out of the queue before the actor can take it, then cancelled
            future = call.waited()
            if call in slot.queue:
                slot.queue.remove(call)
        future.cancel()  # outside the mutex: it runs the future's callbacks
        return future

    def timed_out(self, slot: Slot, call: Call) -> CallTimeout:
        """Withdraw a call past its deadline and say what became of it."""
        future = self.withdraw(slot, call)
        self._count("timeouts")
        started = "its run goes on and commits" if future.running() else "it never ran"
        return CallTimeout(
            f"call to instance {slot.name!r} did not finish in time ({started}); "
            "call again with the same request_id to get the first result"
        )

    def fail_all(self, error: Exception) -> None:
        """Answer every call waiting or running with ``error`` (the system stopped)."""
        for slot in self.slots():
            with slot.mutex:
                calls = [*([slot.current] if slot.current else []), *slot.queue]
                slot.queue.clear()
                slot.current = None
                for call in calls:  # a call its caller runs gets one too: if its run is
                    call.waited()  # left to the actor, the caller waits on it
            for call in calls:
                call.fail(error)

    def retire(self, slot: Slot) -> None:
        """Forget a slot that was passivated with nothing waiting."""
        with self._lock:
            if self._slots.get((slot.agent_type, slot.key)) is slot:
                del self._slots[(slot.agent_type, slot.key)]
