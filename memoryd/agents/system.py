"""AgentSystem: agents as supervised virtual actors, addressed by (agent type, key).

```python
system = AgentSystem.start({"researcher": make_researcher}, store=store, name="crew")
reply = system.call("researcher", "user-42", "Find X", request_id="req-1")
```

An instance is activated on its first call, as a child of the system's dynamic
supervisor (itself a child of memoryd's application tree); its conversation is
``"<type>/<key>"``. Each instance registers as ``"<system>/<type>/<key>"`` and the
system's supervisor as ``"memoryd.agents/<system>"``, a prefix no store may take, so a
system named like a store never clashes with it (see `memoryd.agents.naming`). Calls to
one instance run one at a time in arrival order; instances run concurrently; a call to a
live, idle instance runs in its caller's thread. Idle instances are passivated after
``idle_after_s`` and at most ``max_active`` are live (least recently used passivated
first); a full mailbox refuses a call at once (`Overloaded`) and every call has a
deadline (`CallTimeout`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Mapping
from typing import Any, Self

import structlog

from memoryd import app
from memoryd.agent.agent import Agent, PendingRun, RunResult
from memoryd.agent.journal import RunJournal
from memoryd.agents import inspection, naming
from memoryd.agents.calls import Calls
from memoryd.agents.inspection import Counters, InstanceInfo
from memoryd.agents.instance import Slot
from memoryd.agents.mailbox import Mailboxes, unknown_agent
from memoryd.agents.options import Options, check_options
from memoryd.agents.placement import Placement
from memoryd.agents.recovery import Recover, Recovery, orphan
from memoryd.agents.tool import agent_tool
from memoryd.errors import AgentSystemStopped, AlreadyStarted, CallTimeout
from memoryd.kernel.tools import Tool
from memoryd.store.default import default_store
from memoryd.store.handle import StoreHandle
from supervisors import Backoff, ChildSpec, ChildSpecError, DynamicSupervisor, StartError

__all__ = ["AgentSystem", "InstanceInfo", "Recover"]

log = structlog.get_logger(__name__)

SYSTEM_BACKOFF = Backoff(initial_s=0.05, max_s=2.0, factor=2.0)
"""How memoryd's root restarts an agent system whose supervisor gave up (OTP escalation):
past the root's window each restart waits 50 ms, 100 ms, ... up to 2 s, and never counts
toward the root's own intensity, so a system escalating again and again never makes the
root give up, which would stop every store of the process (as stores are restarted)."""

Factory = Callable[[str], Agent]


class AgentSystem:
    """A running agent system; build one with `AgentSystem.start`.

    Attributes:
        name: The system's name.
        store: The store holding its instances' conversations, journals and leases.
    """

    def __init__(
        self,
        factories: Mapping[str, Factory],
        *,
        store: StoreHandle,
        options: Options,
        clock: Callable[[], float],
    ) -> None:
        name, mailbox, call_timeout_s = options.name, options.mailbox, options.call_timeout_s
        self.name = name
        self.store = store
        self.mailbox = mailbox
        self.call_timeout_s = call_timeout_s
        self.lease_s = options.lease_s
        self._factories = dict(factories)
        self._max_restarts = options.max_restarts
        self._period_s = options.period_s
        self._clock = clock
        self._stopped = False
        self._counts = Counters()
        self._mailboxes = Mailboxes(
            system=name,
            agent_types=self._factories,
            mailbox=mailbox,
            clock=clock,
            count=self._counts.add,
            stopped=lambda: self._stopped,
        )
        self._placement = Placement(
            self,
            max_active=options.max_active,
            idle_after_s=options.idle_after_s,
            clock=clock,
            count=self._counts.add,
            retire=self._mailboxes.retire,
            stopped=lambda: self._stopped,
        )
        self._calls = Calls(self._mailboxes, self._placement, call_timeout_s=call_timeout_s)
        self._recovery = Recovery(self, resume=self._calls.resume)
        self._supervisor_starts = 0

    @property
    def idle_after_s(self) -> float:
        """Instances idle this long are passivated."""
        return self._placement.idle_after_s

    @property
    def max_active(self) -> int:
        """The most instances live at once."""
        return self._placement.max_active

    @property
    def agent_types(self) -> Collection[str]:
        """The system's agent types."""
        return self._factories.keys()

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
            name: The system's name; its supervisor registers as
                ``"memoryd.agents/<name>"``, its instances as
                ``"<name>/<type>/<key>"``.
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
            AlreadyStarted: A system of this name is already running.
        """
        options = Options(
            name=name,
            idle_after_s=idle_after_s,
            max_active=max_active,
            mailbox=mailbox,
            max_restarts=max_restarts,
            period_s=period_s,
            call_timeout_s=call_timeout_s,
            lease_s=lease_s,
        )
        types = check_options(agents, options, recover)
        system = cls(
            agents,
            store=store if store is not None else default_store(),
            options=options,
            clock=clock,
        )
        spec = ChildSpec(
            id=naming.system_name(name),
            start=system._start_supervisor,
            supervisor=True,
            shutdown_s=120.0,
            backoff=SYSTEM_BACKOFF,
        )
        try:
            app.start_child(spec)
        except ChildSpecError:
            raise AlreadyStarted(f"an agent system named {name!r} is already running") from None
        except StartError as exc:
            raise AlreadyStarted(f"the name {name!r} is in use: {exc.__cause__ or exc}") from exc
        system._placement.start_reaper(lease_s=lease_s)
        log.info("agent_system_started", system=name, types=list(types), store=system.store.name)
        system._recovery.start(recover)
        return system

    def _start_supervisor(self) -> DynamicSupervisor:
        """The start function of the system's supervisor (also its restart by the root)."""
        sup = DynamicSupervisor.start(
            name=naming.system_name(self.name),
            max_restarts=self._max_restarts,
            period_s=self._period_s,
        )
        self._supervisor_starts += 1
        if self._supervisor_starts > 1:
            self._counts.add("escalations")
            log.error("agent_system_restarted", system=self.name)
            threading.Thread(
                target=self._placement.reactivate_busy, args=(self.call_timeout_s,), daemon=True
            ).start()
        return sup

    def stop(self) -> None:
        """Stop every instance and the system's supervisor.

        A run going on is stopped at its next step boundary with its journal kept (the
        next start with ``recover="resume"`` finishes it); its caller, and every caller
        still waiting, gets `AgentSystemStopped`.
        """
        if self._stopped:
            return
        self._stopped = True
        self._placement.stop_reaper()
        app.stop_child(naming.system_name(self.name))
        for slot in self._placement.take_all():
            if slot.lease is not None:
                slot.lease.release()
                slot.lease = None
        stopped = AgentSystemStopped(
            f"agent system {self.name!r} stopped before the call finished; a run it had "
            "started stays pending (start the system again with recover='resume')"
        )
        self._mailboxes.fail_all(stopped)
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

        A call to a live instance with nothing queued or running runs in the caller's
        thread (the instance's actor takes no message meanwhile); it honours its
        deadline at the run's step boundaries.

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
            CallCycle: The instance is waiting on this very call.
            AgentSystemStopped: The system is stopped.
            Exception: What the run raised (the instance lives on).
        """
        return self._calls.call(agent_type, key, input, request_id=request_id, timeout=timeout)

    async def acall(
        self,
        agent_type: str,
        key: str,
        input: Any,
        *,
        request_id: str | None = None,
        timeout: float | None = None,
    ) -> RunResult:
        """`call` for asyncio, never blocking the event loop.

        A call to a live instance with nothing queued or running runs its turn as a
        coroutine of the caller's loop (`Agent.arun`: what may block runs in worker
        threads); a kill, a shutdown or the deadline stop it at a step boundary as they
        stop a call run in its caller's thread, and the instance's thread resumes it.
        Other calls go to the instance's thread, and the result arrives through a
        future; an activation runs in a worker thread. A cancelled call stops its run
        there: one that recorded tool steps stays pending, and the same ``request_id``
        finishes it.

        Args and Raises: as `call`.

        Returns:
            The run's result.
        """
        return await self._calls.acall(
            agent_type, key, input, request_id=request_id, timeout=timeout
        )

    # -- activation and passivation -------------------------------------------------------------

    def passivate_idle(self) -> int:
        """Passivate every instance idle for ``idle_after_s`` and renew the leases of the
        others (the system's reaper thread calls this periodically).

        Returns:
            How many instances were passivated.
        """
        return self._placement.passivate_idle()

    # -- what an instance asks of its system (Host) ----------------------------------------------

    def factory(self, agent_type: str) -> Factory:
        """The factory of ``agent_type``."""
        return self._factories[agent_type]

    def finished(self, slot: Slot) -> None:
        """A slot drained its queue: wake whoever waits for room."""
        slot.last_used = self._clock()  # one attribute store; ``mutex`` guards no clock
        self._placement.wake()

    def count(self, what: str) -> None:
        """Count an event in `stats`."""
        self._counts.add(what)

    # -- inspection -----------------------------------------------------------------------------

    def instances(self) -> list[InstanceInfo]:
        """The live instances, sorted by name."""
        return inspection.describe(self._placement.live())

    def pending_runs(self) -> list[PendingRun]:
        """The unfinished runs of this system's agent types in its store, oldest first.

        Returns:
            Pending runs; ``orphaned`` tells a crashed process's runs from runs going on.
        """
        return inspection.pending_runs(self.store, self._factories)

    def resume(self, run_id: str, *, timeout: float | None = None) -> RunResult:
        """Finish an orphaned run now, as recovery on start would: on its instance,
        behind the calls queued there, without calling a recorded tool again (a run a
        failed store left pending in this process, or one a dead process left).

        Args:
            run_id: The run id (``pending_runs()`` lists them, ``orphaned=True``).
            timeout: The most seconds to wait (default ``call_timeout_s``); the run
                goes on past it.

        Returns:
            The run's result.

        Raises:
            UnknownRun: No unfinished run of that id belongs to this system's types.
            ValueError: A live process holds the run (see `memoryd.agents.recovery.orphan`).
            CallTimeout: It did not finish within ``timeout`` (it goes on).
            AgentSystemStopped: The system is stopped.
            Exception: What the run raised.
        """
        deadline = self._calls.deadline(timeout)
        record = orphan(self.store, self._factories, run_id)
        future = self._calls.resume(record)
        try:
            return future.result(timeout=max(0.0, deadline - time.monotonic()))
        except CallTimeout:
            raise
        except TimeoutError:
            raise CallTimeout(
                f"run {run_id!r} did not finish within its deadline; it goes on in "
                f"instance {record.conversation_id!r} of agent system {self.name!r}"
            ) from None

    def discard(self, run_id: str) -> None:
        """Drop an orphaned run: it is no longer pending and is never resumed.

        Args:
            run_id: The run id (``pending_runs()`` lists them, ``orphaned=True``).

        Raises:
            UnknownRun: No unfinished run of that id belongs to this system's types.
            ValueError: A live process holds the run.
            ConflictError: Another process took the run over meanwhile (it keeps it).
        """
        record = orphan(self.store, self._factories, run_id)
        RunJournal(self.store).discard_orphan(record)
        self._counts.add("discarded")
        log.info("run_discarded", system=self.name, run_id=run_id)

    def recovered(self, timeout: float | None = None) -> bool:
        """Wait until the runs the start's recovery resumed have finished.

        Args:
            timeout: The most seconds to wait (None: no limit).

        Returns:
            True when every one finished (with a result or an error).
        """
        return self._recovery.wait(timeout)

    def stats(self) -> dict[str, Any]:
        """Counts: live instances, calls waiting and running, and the system's events
        (calls, overloaded, timeouts, activations, passivations, restarts, resumed,
        discarded, escalations)."""
        live = self._placement.live()
        queued, running = inspection.load(live)
        return {
            "name": self.name,
            "store": self.store.name,
            "active": len(live),
            "queued": queued,
            "running": running,
            **self._counts.snapshot(),
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
            raise unknown_agent(self.name, agent_type, self._factories)
        return agent_tool(self, agent_type, description=description)

    def __repr__(self) -> str:
        types = sorted(self._factories)
        return f"<AgentSystem {self.name!r} types={types} store={self.store.name!r}>"
