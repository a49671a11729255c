"""AgentSystem: agents as supervised virtual actors, addressed by (agent type, key).

```python
system = AgentSystem.start({"researcher": make_researcher}, store=store, name="crew")
reply = system.call("researcher", "user-42", "Find X", request_id="req-1")
```

An instance is activated on its first call, as a child of the system's dynamic
supervisor (itself a child of memoryd's application tree), registered as
``"<system>/<type>/<key>"``; its conversation is ``"<type>/<key>"``. Calls to one
instance run one at a time in arrival order; instances run concurrently. Idle
instances are passivated after ``idle_after_s`` and at most ``max_active`` are live
(least recently used passivated first); a full mailbox refuses a call at once
(`Overloaded`) and every call has a deadline (`CallTimeout`).
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Literal, Self

import structlog

from memoryd import app
from memoryd.agent.agent import Agent, PendingRun, RunResult
from memoryd.agent.journal import RunJournal, RunRecord
from memoryd.agent.locks import active_runs
from memoryd.agents import naming
from memoryd.agents.instance import Call, Slot, State, call_chain, nudge
from memoryd.agents.placement import Placement
from memoryd.agents.recovery import orphaned_runs
from memoryd.agents.tool import agent_tool
from memoryd.errors import AlreadyStarted, CallTimeout, Overloaded, UnknownAgent
from memoryd.kernel.tools import Tool
from memoryd.store.default import default_store
from memoryd.store.handle import StoreHandle
from supervisors import (
    ChildSpec,
    ChildSpecError,
    DynamicSupervisor,
    StartError,
)

__all__ = ["AgentSystem", "InstanceInfo", "Recover"]

log = structlog.get_logger(__name__)

Recover = Literal["resume", "discard", "keep"]
Factory = Callable[[str], Agent]
_COUNTERS = (
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


@dataclass(frozen=True, kw_only=True, slots=True)
class InstanceInfo:
    """A live instance, as `AgentSystem.instances` lists it.

    Attributes:
        agent_type: Its agent type.
        key: Its key.
        name: Its registered name ``"<system>/<type>/<key>"``.
        conversation_id: Its conversation ``"<type>/<key>"``.
        queued: Calls waiting in its mailbox.
        running: True while it runs a call.
        incarnations: How many times it was started since it was last activated.
    """

    agent_type: str
    key: str
    name: str
    conversation_id: str
    queued: int
    running: bool
    incarnations: int


def _positive(value: object, what: str, *, integer: bool = False) -> None:
    kinds = (int,) if integer else (int, float)
    if (
        isinstance(value, bool)
        or not isinstance(value, kinds)
        or not math.isfinite(value)
        or value <= 0
    ):
        kind = "an int" if integer else "a finite number"
        raise ValueError(f"{what} must be {kind} > 0, not {value!r}")


class AgentSystem:
    """A running agent system; build one with `AgentSystem.start`.

    Attributes:
        name: The system's name (its supervisor's registered name).
        store: The store holding its instances' conversations, journals and leases.
    """

    def __init__(
        self,
        factories: Mapping[str, Factory],
        *,
        store: StoreHandle,
        name: str,
        idle_after_s: float,
        max_active: int,
        mailbox: int,
        max_restarts: int,
        period_s: float,
        call_timeout_s: float,
        lease_s: float,
        clock: Callable[[], float],
    ) -> None:
        self.name = name
        self.store = store
        self.mailbox = mailbox
        self.call_timeout_s = call_timeout_s
        self.lease_s = lease_s
        self._factories = dict(factories)
        self._max_restarts = max_restarts
        self._period_s = period_s
        self._clock = clock
        self._slots: dict[tuple[str, str], Slot] = {}
        self._slots_lock = threading.Lock()
        self._placement = Placement(
            self,
            max_active=max_active,
            idle_after_s=idle_after_s,
            clock=clock,
            count=self._count,
            retire=self._retire,
            stopped=lambda: self._stopped,
        )
        self._counts = dict.fromkeys(_COUNTERS, 0)
        self._counts_lock = threading.Lock()
        self._stopped = False
        self._supervisor_starts = 0
        self._reaper_stop = threading.Event()
        self._reaper: threading.Thread | None = None
        self._recovery: list[Future[RunResult]] = []
        self._recovery_done = threading.Event()

    @property
    def idle_after_s(self) -> float:
        """Instances idle this long are passivated."""
        return self._placement.idle_after_s

    @property
    def max_active(self) -> int:
        """The most instances live at once."""
        return self._placement.max_active

    # -- start and stop -----------------------------------------------------------------------

    @classmethod
    def start(
        cls,
        agents: Mapping[str, Factory],
        *,
        store: StoreHandle | None = None,
        name: str = "agents",
        idle_after_s: float = 300.0,
        max_active: int = 256,
        mailbox: int = 100,
        max_restarts: int = 3,
        period_s: float = 5.0,
        recover: Recover = "resume",
        call_timeout_s: float = 60.0,
        lease_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> Self:
        """Start an agent system under memoryd's application tree.

        Args:
            agents: Agent type -> factory ``key -> memoryd.Agent``. An agent with memory
                must keep it in ``store``.
            store: Where instances keep their conversations (default: the default store).
            name: The system's name; instances register as ``"<name>/<type>/<key>"``.
            idle_after_s: Passivate an instance idle this long.
            max_active: The most instances live at once.
            mailbox: The most calls waiting on one instance; more are refused.
            max_restarts: Instance restarts tolerated within ``period_s`` (OTP
                intensity); past it the system's supervisor gives up and is restarted
                by the application's root, which resumes what was running.
            period_s: The restart-intensity window.
            recover: What to do with the orphaned runs of these agent types found in
                the store: ``"resume"`` them (in the background, at most ``max_active``
                instances at once), ``"discard"`` them, or ``"keep"`` them pending.
            call_timeout_s: The default deadline of a call.
            lease_s: How long an instance's lease (and so its exclusive hold over other
                processes sharing the store) lasts without renewal.
            clock: The monotonic clock idleness is measured with.

        Returns:
            The running system.

        Raises:
            ValueError: A bad argument (named).
            TypeError: A factory is not callable.
            AlreadyStarted: A system (or another child of memoryd's root) has this name.
        """
        types = naming.check_agent_types(agents)
        for agent_type in types:
            if not callable(agents[agent_type]):
                raise TypeError(f"the factory of agent type {agent_type!r} is not callable")
        if not isinstance(name, str) or not name:
            raise ValueError(f"name must be a non-empty str, not {name!r}")
        for value, what in ((idle_after_s, "idle_after_s"), (period_s, "period_s")):
            _positive(value, what)
        for value, what in ((call_timeout_s, "call_timeout_s"), (lease_s, "lease_s")):
            _positive(value, what)
        for value, what in ((max_active, "max_active"), (mailbox, "mailbox")):
            _positive(value, what, integer=True)
        if isinstance(max_restarts, bool) or not isinstance(max_restarts, int) or max_restarts < 0:
            raise ValueError(f"max_restarts must be an int >= 0, not {max_restarts!r}")
        if recover not in ("resume", "discard", "keep"):
            raise ValueError(f"recover must be 'resume', 'discard' or 'keep', not {recover!r}")
        system = cls(
            agents,
            store=store if store is not None else default_store(),
            name=name,
            idle_after_s=idle_after_s,
            max_active=max_active,
            mailbox=mailbox,
            max_restarts=max_restarts,
            period_s=period_s,
            call_timeout_s=call_timeout_s,
            lease_s=lease_s,
            clock=clock,
        )
        spec = ChildSpec(id=name, start=system._start_supervisor, supervisor=True, shutdown_s=120.0)
        try:
            app.start_child(spec)
        except ChildSpecError:
            raise AlreadyStarted(f"an agent system named {name!r} is already running") from None
        except StartError as exc:
            raise AlreadyStarted(f"the name {name!r} is in use: {exc.__cause__ or exc}") from exc
        system._reaper = threading.Thread(
            target=system._reap, name=f"memoryd-agents-{name}", daemon=True
        )
        system._reaper.start()
        log.info("agent_system_started", system=name, types=list(types), store=system.store.name)
        system._recover(recover)
        return system

    def _recover(self, policy: Recover) -> None:
        """Resume or discard the orphaned runs of the system's agent types."""
        if policy == "keep":
            self._recovery_done.set()
            return
        runs = orphaned_runs(self.store, self._factories)
        if policy == "discard":
            journal = RunJournal(self.store)
            for record in runs:
                journal.discard(record.run_id)
                self._count("discarded")
                log.info("run_discarded", system=self.name, run_id=record.run_id)
            self._recovery_done.set()
            return
        if runs:
            log.info("agent_system_recovering", system=self.name, runs=len(runs))
        threading.Thread(
            target=self._resume_all,
            args=(runs,),
            name=f"memoryd-agents-{self.name}-recover",
            daemon=True,
        ).start()

    def _resume_all(self, runs: list[RunRecord]) -> None:
        """Queue every run on its instance; activations are bounded by ``max_active``."""
        try:
            for record in runs:
                agent_type, key = naming.split_conversation(record.conversation_id)
                slot, call, live = self._submit(
                    agent_type, key, None, None, math.inf, resume=record.run_id
                )
                self._recovery.append(call.future)
                if not live:
                    try:
                        self._placement.ensure_live(slot, time.monotonic() + 3600.0)
                    except Exception as exc:
                        self._withdraw(slot, call)
                        if not call.future.done():
                            call.future.set_exception(exc)
                        log.error("run_recovery_failed", run_id=record.run_id, error=repr(exc))
        except Exception as exc:  # the system stopped meanwhile
            log.warning("agent_recovery_stopped", system=self.name, error=repr(exc))
        finally:
            self._recovery_done.set()

    def _start_supervisor(self) -> DynamicSupervisor:
        """The start function of the system's supervisor (also its restart by the root)."""
        sup = DynamicSupervisor.start(
            name=self.name, max_restarts=self._max_restarts, period_s=self._period_s
        )
        self._supervisor_starts += 1
        if self._supervisor_starts > 1:
            self._count("escalations")
            log.error("agent_system_restarted", system=self.name)
            threading.Thread(target=self._after_escalation, daemon=True).start()
        return sup

    def _after_escalation(self) -> None:
        """The supervisor was restarted: activate again the instances that had work."""
        for slot in self._placement.take_all():
            with slot.mutex:
                busy = not slot.idle
            if busy:
                try:
                    self._placement.ensure_live(slot, time.monotonic() + self.call_timeout_s)
                except Exception as exc:
                    log.error("instance_reactivation_failed", instance=slot.name, error=repr(exc))

    def stop(self) -> None:
        """Stop every instance and the system's supervisor.

        A run going on is stopped at its next step boundary with its journal kept (the
        next start with ``recover="resume"`` finishes it); its caller, and every caller
        still waiting, gets a ``RuntimeError``.
        """
        if self._stopped:
            return
        self._stopped = True
        self._reaper_stop.set()
        self._placement.wake()
        if self._reaper is not None and self._reaper is not threading.current_thread():
            self._reaper.join(10.0)
        app.stop_child(self.name)
        for slot in self._placement.take_all():
            if slot.lease is not None:
                slot.lease.release()
                slot.lease = None
        with self._slots_lock:
            slots = list(self._slots.values())
        stopped = RuntimeError(
            f"agent system {self.name!r} stopped before the call finished; a run it had "
            "started stays pending (start the system again with recover='resume')"
        )
        for slot in slots:
            with slot.mutex:
                calls = [*([slot.current] if slot.current else []), *slot.queue]
                slot.queue.clear()
                slot.current = None
            for call in calls:
                if not call.future.done():
                    call.future.set_exception(stopped)
        log.info("agent_system_stopped", system=self.name)

    def __enter__(self) -> Self:
        """Use the system as a context manager; it is stopped on exit."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Stop the system."""
        self.stop()

    # -- calls --------------------------------------------------------------------------------

    def call(
        self,
        agent_type: str,
        key: str,
        input: Any,
        *,
        request_id: str | None = None,
        timeout: float | None = None,
    ) -> RunResult:
        """Run one turn on instance (``agent_type``, ``key``), activating it if needed.

        Args:
            agent_type: The agent type.
            key: The instance key.
            input: The user's text, a message dict, or a list of messages.
            request_id: Makes the call idempotent: a call with a request id already
                answered returns the first result, without a second run (also after a
                restart: the result is found by the turn's idempotency key).
            timeout: The call's deadline in seconds (default ``call_timeout_s``).

        Returns:
            The run's result.

        Raises:
            UnknownAgent: No such agent type.
            Overloaded: The instance's mailbox is full (nothing written).
            CallTimeout: No result within the deadline.
            RuntimeError: A call cycle (the instance is waiting on this very call), or
                the system is stopped.
            Exception: What the run raised (the instance lives on).
        """
        deadline = self._deadline(timeout)
        slot, call, live = self._submit(agent_type, key, input, request_id, deadline)
        if not live:
            try:
                self._placement.ensure_live(slot, deadline)
            except BaseException:
                self._withdraw(slot, call)
                raise
        try:
            return call.future.result(timeout=max(0.0, deadline - time.monotonic()))
        except CallTimeout:
            raise
        except TimeoutError:
            raise self._timed_out(slot, call) from None

    async def acall(
        self,
        agent_type: str,
        key: str,
        input: Any,
        *,
        request_id: str | None = None,
        timeout: float | None = None,
    ) -> RunResult:
        """`call` for asyncio: never blocks the event loop (an activation runs in a
        thread; the result arrives through a future).

        Args and Raises: as `call`.

        Returns:
            The run's result.
        """
        deadline = self._deadline(timeout)
        slot, call, live = self._submit(agent_type, key, input, request_id, deadline)
        if not live:
            try:
                await asyncio.to_thread(self._placement.ensure_live, slot, deadline)
            except BaseException:
                self._withdraw(slot, call)
                raise
        try:
            return await asyncio.wait_for(
                asyncio.wrap_future(call.future), max(0.0, deadline - time.monotonic())
            )
        except CallTimeout:
            raise
        except TimeoutError:
            raise self._timed_out(slot, call) from None

    def _deadline(self, timeout: float | None) -> float:
        if timeout is None:
            timeout = self.call_timeout_s
        _positive(timeout, "timeout")
        return time.monotonic() + timeout

    def _submit(
        self,
        agent_type: str,
        key: str,
        input: Any,
        request_id: str | None,
        deadline: float,
        *,
        resume: str | None = None,
    ) -> tuple[Slot, Call, bool]:
        """Queue a call on its instance's slot; True when a live incarnation took it."""
        if self._stopped:
            raise RuntimeError(f"agent system {self.name!r} is stopped; start a new one")
        if agent_type not in self._factories:
            raise UnknownAgent(
                f"agent system {self.name!r} has no agent type {agent_type!r}; "
                f"its types are {sorted(self._factories)}"
            )
        naming.check_key(agent_type, key)
        name = naming.instance_name(self.name, agent_type, key)
        chain = call_chain.get()
        if name in chain:
            cycle = " -> ".join((*chain[chain.index(name) :], name))
            raise RuntimeError(
                f"call cycle: {cycle}; instance {name!r} is waiting on this call, so it "
                "would wait on itself. Call another instance, or restructure the agents"
            )
        if request_id is not None and (not isinstance(request_id, str) or not request_id):
            raise ValueError(f"request_id must be a non-empty str, not {request_id!r}")
        if resume is not None:
            run_id = resume
        elif request_id is not None:
            run_id = naming.request_run_id(agent_type, key, request_id)
        else:
            run_id = uuid.uuid4().hex
        call = Call(
            input=input,
            run_id=run_id,
            deadline=deadline,
            request_id=request_id,
            chain=chain,
            resume=resume is not None,
        )
        while True:
            slot = self._slot(agent_type, key)
            with slot.mutex:
                if slot.state is State.RETIRED:
                    continue
                if resume is None and len(slot.queue) >= self.mailbox:
                    self._count("overloaded")
                    raise Overloaded(
                        f"instance {name!r} has {len(slot.queue)} calls waiting (mailbox="
                        f"{self.mailbox}); nothing was written. Retry later, or start the "
                        "system with a larger mailbox"
                    )
                slot.queue.append(call)
                slot.last_used = self._clock()
                live = nudge(slot)
            self._count("calls")
            return slot, call, live

    def _slot(self, agent_type: str, key: str) -> Slot:
        with self._slots_lock:
            slot = self._slots.get((agent_type, key))
            if slot is None:
                slot = Slot(
                    agent_type=agent_type,
                    key=key,
                    name=naming.instance_name(self.name, agent_type, key),
                    cid=naming.conversation_id(agent_type, key),
                    last_used=self._clock(),
                )
                self._slots[(agent_type, key)] = slot
            return slot

    def _withdraw(self, slot: Slot, call: Call) -> None:
        """Take back a call still waiting (nothing of it runs); a running one goes on."""
        call.future.cancel()
        with slot.mutex:
            if call in slot.queue:
                slot.queue.remove(call)

    def _timed_out(self, slot: Slot, call: Call) -> CallTimeout:
        self._withdraw(slot, call)
        self._count("timeouts")
        started = "its run goes on and commits" if call.future.running() else "it never ran"
        return CallTimeout(
            f"call to instance {slot.name!r} did not finish in time ({started}); "
            "call again with the same request_id to get the first result"
        )

    # -- activation and passivation -------------------------------------------------------------

    def passivate_idle(self) -> int:
        """Passivate every instance idle for ``idle_after_s`` and renew the leases of the
        others (the system's reaper thread calls this periodically).

        Returns:
            How many instances were passivated.
        """
        return self._placement.passivate_idle()

    def _retire(self, slot: Slot) -> None:
        with self._slots_lock:
            if self._slots.get((slot.agent_type, slot.key)) is slot:
                del self._slots[(slot.agent_type, slot.key)]

    def _reap(self) -> None:
        tick = min(max(self.idle_after_s / 4, 0.01), 1.0, self.lease_s / 4)
        while not self._reaper_stop.wait(tick):
            try:
                self.passivate_idle()
            except Exception as exc:  # the store may be restarting: try again next tick
                log.warning("agent_reaper_failed", system=self.name, error=repr(exc))

    # -- what an instance asks of its system (Host) ----------------------------------------------

    def factory(self, agent_type: str) -> Factory:
        """The factory of ``agent_type``."""
        return self._factories[agent_type]

    def finished(self, slot: Slot) -> None:
        """A slot drained its queue: wake whoever waits for room."""
        with slot.mutex:
            slot.last_used = self._clock()
        self._placement.wake()

    def count(self, what: str) -> None:
        """Count an event in `stats`."""
        self._count(what)

    def _count(self, what: str) -> None:
        with self._counts_lock:
            self._counts[what] += 1

    # -- inspection -----------------------------------------------------------------------------

    def instances(self) -> list[InstanceInfo]:
        """The live instances, sorted by name."""
        live = self._placement.live()
        infos = []
        for slot in live:
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

    def pending_runs(self) -> list[PendingRun]:
        """The unfinished runs of this system's agent types in its store, oldest first.

        Returns:
            Pending runs; ``orphaned`` tells a crashed process's runs from runs going on.
        """
        now, here = time.time(), active_runs()
        return [
            PendingRun(
                run_id=r.run_id,
                conversation_id=r.conversation_id,
                messages=r.messages,
                owner=r.owner,
                orphaned=r.orphaned(now, r.run_id in here),
            )
            for r in RunJournal(self.store).pending()
            if naming.split_conversation(r.conversation_id)[0] in self._factories
        ]

    def recovered(self, timeout: float | None = None) -> bool:
        """Wait until the runs the start's recovery resumed have finished.

        Args:
            timeout: The most seconds to wait (None: no limit).

        Returns:
            True when every one finished (with a result or an error).
        """
        if not self._recovery_done.wait(timeout):
            return False
        deadline = None if timeout is None else time.monotonic() + timeout
        for future in self._recovery:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                future.exception(timeout=left)
            except TimeoutError:
                return False
        return True

    def stats(self) -> dict[str, Any]:
        """Counts: live instances, calls waiting and running, and the system's events
        (calls, overloaded, timeouts, activations, passivations, restarts, resumed,
        discarded, escalations)."""
        live = self._placement.live()
        queued = running = 0
        for slot in live:
            with slot.mutex:
                queued += len(slot.queue)
                running += slot.current is not None
        with self._counts_lock:
            counts = dict(self._counts)
        return {
            "name": self.name,
            "store": self.store.name,
            "active": len(live),
            "queued": queued,
            "running": running,
            **counts,
        }

    def tool(self, agent_type: str, *, description: str | None = None) -> Tool:
        """An agent type as a tool for another agent: ``ask_<type>(key, message)``.

        A call from inside a run gets a request id derived from that run and its tool
        call, so a resumed caller never runs the callee twice.

        Args:
            agent_type: The agent type the tool calls.
            description: What the model reads about the tool.

        Returns:
            The tool.

        Raises:
            UnknownAgent: No such agent type.
        """
        if agent_type not in self._factories:
            raise UnknownAgent(
                f"agent system {self.name!r} has no agent type {agent_type!r}; "
                f"its types are {sorted(self._factories)}"
            )
        return agent_tool(self, agent_type, description=description)

    def __repr__(self) -> str:
        types = sorted(self._factories)
        return f"<AgentSystem {self.name!r} types={types} store={self.store.name!r}>"
