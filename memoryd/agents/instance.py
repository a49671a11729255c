"""An agent instance: a supervised actor that runs one agent's calls, one at a time.

An instance is addressed by (agent type, key) and lives in a `Slot`, which outlives
its incarnations: the slot holds the calls waiting (the mailbox), the call in flight
and the instance's lease. An incarnation (an `Instance` actor) builds its agent from
the type's factory, then drains the slot. When it is killed (`supervisors.kill`) or
shut down while a run is going, its agent's step hook stops the run at the next step
boundary with its journal kept; the call stays in flight in the slot, and the next
incarnation resumes the run from its journal (or runs it again from its input when
it had recorded nothing yet, so no tool ran), so the waiting caller gets that run's
result.

A call to a live instance with nothing queued or running runs in its caller's thread
(`Instance.run_inline`), which saves the two thread hand-offs of a round trip through
the actor: the caller borrows the instance's inbox, so the actor takes no message
meanwhile (a kill or a shutdown waits there, and the run's step hook stops the run at
its next step boundary as it would in the actor's thread), and calls arriving meanwhile
queue up and are drained by the actor once the caller gives the inbox back. Such a run
honours its caller's deadline at step boundaries: past it, the run is left to the
actor, which resumes it from its journal, and the caller gets `CallTimeout` (an agent
without a journal finishes the run in its caller's thread). An async caller runs such a
call as a coroutine of its event loop the same way (`Instance.arun_inline`).

An incarnation costs a thread only when it has a message to handle itself: its ``init``
runs in the thread that activates it (the activating caller's, or its supervisor's on a
restart), and its own thread starts with its first message (a queued call, a kill, a
shutdown while a caller runs a call); passivating an instance that never started its
thread stops it in the passivating thread (``supervisors.SupervisedActor.lazy_thread``).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import enum
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Coroutine
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field
from typing import Any, Protocol

import pykka
import structlog

from memoryd._deadline import bounded
from memoryd.agent.agent import Agent, RunResult
from memoryd.agent.memory import store_of
from memoryd.agents.building import build_agent
from memoryd.agents.lease import InstanceLease
from memoryd.errors import RunInterrupted, StoreUnavailable, UnknownRun
from memoryd.store.handle import StoreHandle
from supervisors import Exit, Inbox, SupervisedActor

__all__ = ["Call", "Host", "Instance", "Slot", "State", "call_chain", "nudge"]

log = structlog.get_logger(__name__)

call_chain: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar(
    "memoryd_agent_call_chain", default=()
)
"""The instances whose runs are waiting on the code running in this context, outermost
first (an instance's own name last): a call to one of them would wait on itself."""

_DRAIN = object()
_RESULTS_KEPT = 256


class State(enum.Enum):
    """Where a slot's instance is."""

    DOWN = "down"
    """No incarnation runs (never activated, passivated, or between crash and restart)."""
    LIVE = "live"
    """An incarnation runs and takes calls."""
    STOPPING = "stopping"
    """It is being passivated; a new call waits and activates it again."""
    RETIRED = "retired"
    """The system forgot the slot; a new call looks the instance up again."""


@dataclass(slots=True, eq=False)
class Call:
    """One call to an instance.

    Attributes:
        input: The run's input (unused when ``resume``).
        run_id: The run id (derived from the request id when one is given).
        deadline: The caller's deadline (``time.monotonic()``), for the instance lease.
        request_id: The caller's request id, or None.
        chain: The instances waiting on the caller (`call_chain`).
        resume: True for a pending run found at start: resume ``run_id``.
        started: True once a run was started for it (a later incarnation resumes it).
        future: Resolved with the `RunResult` or the run's exception; made (under the
            slot's ``mutex``) when the call is queued, or when a call its caller ran
            is left to the instance's actor. A call its caller runs to the end needs
            none: the caller has the result in hand.
    """

    input: Any
    run_id: str
    deadline: float = float("inf")
    request_id: str | None = None
    chain: tuple[str, ...] = ()
    resume: bool = False
    started: bool = False
    future: Future[RunResult] | None = None

    def waited(self) -> Future[RunResult]:
        """The call's future (under the slot's ``mutex``: made here if it has none)."""
        future = self.future
        if future is None:
            future = self.future = Future()
        return future

    def answer(self, result: RunResult) -> None:
        """Resolve the call's future with ``result`` (see `fail`)."""
        future = self.future
        assert future is not None, "only a queued call or one left to the actor is answered"
        with contextlib.suppress(InvalidStateError):
            future.set_result(result)

    def fail(self, error: BaseException) -> None:
        """Resolve the call's future with ``error``. A call answered already (the system
        stopped meanwhile: `Mailboxes.fail_all`) keeps its first answer."""
        future = self.future
        assert future is not None, "only a queued call or one left to the actor is answered"
        with contextlib.suppress(InvalidStateError):
            future.set_exception(error)


class _Resume(enum.Enum):
    """How a call's run is resumed before it runs (`Instance._look_up`)."""

    MUST = "must"
    """A resume asked for (recovery): its errors are the call's."""
    IF_PENDING = "if pending"
    """A request id or a call started before: resumed if its journal is pending."""


@dataclass(slots=True, eq=False)
class Slot:
    """One instance address and what outlives its incarnations.

    Attributes:
        agent_type: The agent type.
        key: The instance key.
        name: The registered name ``"<system>/<type>/<key>"``.
        cid: The conversation ``"<type>/<key>"``.
        mutex: Guards ``queue``, ``current``, ``state`` and ``ref``.
        queue: The calls waiting, in arrival order.
        current: The call in flight (kept across a crash), or None.
        state: Where the instance is.
        ref: The live incarnation's actor, or None.
        actor: The live incarnation itself (to run a call in its caller's thread), or None.
        inline: True while ``current`` runs in its caller's thread.
        last_used: When a call last arrived or finished (the system's clock).
        lease: The instance lease, while held.
        results: Results of recent calls made with a request id, by run id (None until
            the first: most instances are never called with one).
        incarnations: How many incarnations were started.
        waking: Set while a caller wakes the instance before placing its call (the
            callers behind it wait on it, to be placed after it), else None.
    """

    agent_type: str
    key: str
    name: str
    cid: str
    mutex: threading.Lock = field(default_factory=threading.Lock)
    queue: deque[Call] = field(default_factory=deque)
    current: Call | None = None
    state: State = State.DOWN
    ref: pykka.ActorRef[Any] | None = None
    actor: Instance | None = None
    inline: bool = False
    last_used: float = 0.0
    lease: InstanceLease | None = None
    results: OrderedDict[str, RunResult] | None = None
    incarnations: int = 0
    waking: Future[None] | None = None

    @property
    def idle(self) -> bool:
        """True when no call waits or runs (read under ``mutex``)."""
        return not self.queue and self.current is None

    def remember(self, result: RunResult) -> None:
        """Keep a request's result for a repeated request id (a bounded few)."""
        results = self.results
        if results is None:
            results = self.results = OrderedDict()
        results[result.run_id] = result
        while len(results) > _RESULTS_KEPT:
            results.popitem(last=False)


class Host(Protocol):
    """What an instance needs of its system."""

    name: str
    store: StoreHandle
    lease_s: float

    def factory(self, agent_type: str) -> Callable[[str], Agent]:
        """The agent type's factory."""

    def finished(self, slot: Slot) -> None:
        """A slot drained its queue: its instance may be passivated."""

    def count(self, what: str) -> None:
        """Count an event in the system's stats."""


def _committed(store: StoreHandle, cid: str, run_id: str) -> RunResult | None:
    """The result of a run already committed to ``cid`` (found by its idempotency key)."""
    for event in store.events(cid):
        if event.idempotency_key == run_id and event.messages:
            return RunResult(
                message=event.messages[-1],
                messages=tuple(event.messages),
                conversation_id=cid,
                run_id=run_id,
                version=event.version,
            )
    return None


def nudge(slot: Slot) -> bool:
    """Tell a slot's live incarnation to drain its queue (call under ``slot.mutex``).

    Returns:
        False when no live incarnation took the nudge.
    """
    if slot.state is not State.LIVE or slot.ref is None:
        return False
    try:
        slot.ref.tell(_DRAIN)
    except pykka.ActorDeadError:
        return False
    return True


class _InlineRun:
    """The ``with`` block of a call its caller runs (`Instance.run_inline`, and
    `Instance.arun_inline` across its awaits): the call's deadline and the call chain
    are set for the block, and on the way out the inbox goes back to the actor.

    The call's deadline bounds the store calls made in the block too
    (`memoryd._deadline.bounded`): a store that stops answering holds the caller up to
    its own deadline, not the store's. A run stopped at a step boundary
    (`RunInterrupted`), or by a store call its deadline cut short, ends the block
    quietly, left to the actor (which goes on from its journal, with the store's own
    deadline); anything else the block raises goes through (a run's error, or what
    interrupted the caller), the call finished."""

    __slots__ = ("_bound", "_call", "_instance", "_token")

    def __init__(self, instance: Instance, call: Call) -> None:
        self._instance = instance
        self._call = call
        self._bound = bounded(call.deadline)

    def __enter__(self) -> None:
        call, instance = self._call, self._instance
        instance._inline_deadline = call.deadline
        self._token = call_chain.set((*call.chain, instance._slot.name))
        self._bound.__enter__()

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> bool:
        self._bound.__exit__(None, None, None)
        call_chain.reset(self._token)
        left = kind is not None and (
            issubclass(kind, RunInterrupted)
            or (issubclass(kind, StoreUnavailable) and time.monotonic() >= self._call.deadline)
        )
        self._instance._give_back(self._call, finished=not left)
        return left  # a stopped run is not an error: its caller waits on the future


class Instance(SupervisedActor):
    """One incarnation of an agent instance. Every method runs in the actor's thread.

    Args:
        host: The agent system.
        slot: The instance's slot.
    """

    actor_inbox: Inbox

    lazy_thread = True
    """``init`` runs in the thread that activates the instance, and the instance's own
    thread starts only once it has a message to process (a queued call, a kill, a
    shutdown while a caller runs a call): an instance whose calls all run in their
    callers' threads never costs a thread."""

    def __init__(self, host: Host, slot: Slot) -> None:
        super().__init__(name=slot.name)
        self._host = host
        self._slot = slot
        self._agent: Agent | None = None
        self._inline_deadline: float | None = None

    def init(self) -> None:
        """Build the agent, take the slot over and start draining it if calls wait.

        Raises:
            TypeError, ValueError: The factory's agent does not fit the instance
                (`memoryd.agents.building.build_agent`).
        """
        slot, host = self._slot, self._host
        agent = build_agent(
            host.factory(slot.agent_type),
            agent_type=slot.agent_type,
            key=slot.key,
            conversation_id=slot.cid,
            store_name=host.store.name,
            system=host.name,
        )
        agent.agent_type = slot.agent_type
        agent.step_hook = self._step
        self._agent = agent
        with slot.mutex:
            slot.ref, slot.actor, slot.state = self.actor_ref, self, State.LIVE
            slot.incarnations += 1
            again = slot.incarnations > 1
            in_flight = slot.current is not None
            waiting = in_flight or bool(slot.queue)  # later calls see LIVE and nudge
        if again:
            host.count("restarts")
            log.warning("instance_restarted", instance=slot.name, resumes_call=in_flight)
        else:
            host.count("activations")
            log.info("instance_activated", instance=slot.name)
        if waiting:
            self.actor_ref.tell(_DRAIN)

    def terminate(self, exit: Exit) -> None:
        """Leave the slot (its calls wait for the next incarnation) and let go of the
        agent (no run of this incarnation goes on: a run stops at a step boundary before
        the incarnation handles its kill or shutdown)."""
        slot = self._slot
        with slot.mutex:
            if slot.ref is not None and slot.ref.actor_urn == self.actor_urn:
                slot.ref, slot.actor = None, None
                if slot.state is State.LIVE:
                    slot.state = State.DOWN
        agent, self._agent = self._agent, None
        if agent is not None and agent.step_hook == self._step:
            agent.step_hook = None  # the agent and this incarnation are freed at once

    def on_receive(self, message: Any) -> Any:
        """Pykka hook: a nudge to drain the slot. Runs in the actor's thread."""
        if message is _DRAIN:
            self._drain()
        return None

    # -- calls ------------------------------------------------------------------------------

    def _drain(self) -> None:
        slot = self._slot
        while True:
            with slot.mutex:
                if slot.inline:
                    return  # a caller runs a call in its thread; it hands back what remains
                call = slot.current
                while call is None and slot.queue:
                    candidate = slot.queue.popleft()
                    if candidate.waited().set_running_or_notify_cancel():
                        call = candidate
                slot.current = call
                if call is None:
                    break
            try:
                self._run(call)
            except RunInterrupted:
                return  # killed or shut down: the control message is next in the inbox
            with slot.mutex:
                slot.current = None
        self._host.finished(slot)

    def run_inline(self, call: Call) -> RunResult | None:
        """Run ``call`` in the caller's thread (the caller made it ``slot.current``, set
        ``slot.inline`` and borrowed the inbox, all under ``slot.mutex``).

        Returns:
            The run's result; None when the run was left to the actor (a kill or
            shutdown came, or the deadline passed at a step boundary): the caller
            waits on the call's future.

        Raises:
            Exception: What the run raised (the instance lives on).
            BaseException: What interrupted the caller's thread (``KeyboardInterrupt``):
                the call is not run again (a run it had journaled stays pending, for
                recovery).
        """
        result = None
        with _InlineRun(self, call):
            result = self._execute(call)
        return result

    async def arun_inline(self, call: Call) -> RunResult | None:
        """`run_inline` on the caller's event loop: the run is a coroutine of the loop
        (`Agent.arun`), and what may block before it (taking the instance's lease,
        looking a request id up, resuming a run) runs in a worker thread.

        Returns:
            As `run_inline`.

        Raises:
            Exception: What the run raised (the instance lives on).
            BaseException: What stopped the caller's task (``CancelledError``): the call
                is not run again (a run it had journaled stays pending: the same request
                id resumes it).
        """
        result = None
        with _InlineRun(self, call):
            result = await self._aexecute(call)
        return result

    def _give_back(self, call: Call, *, finished: bool) -> None:
        """The end of a call run by its caller: the inbox goes back to the actor, which
        drains what queued meanwhile, or resumes the call when it was left to it (the
        caller then waits on the call's future, made here)."""
        slot = self._slot
        self._inline_deadline = None
        with slot.mutex:
            slot.inline = False
            if finished:
                slot.current = None
            else:
                if call.future is None:  # made now, running: the actor goes on with it
                    call.waited().set_running_or_notify_cancel()
                nudge(slot)  # behind a kill or a shutdown, if one came, in the inbox
        self.actor_inbox.give_back()
        if finished:
            self._host.finished(slot)

    def _run(self, call: Call) -> None:
        """Run a call in the actor's thread and resolve its future (`RunInterrupted`
        goes through)."""
        try:
            result = self._run_in_chain(call)
        except RunInterrupted:
            raise
        except Exception as exc:
            call.fail(exc)
        else:
            call.answer(result)

    def _run_in_chain(self, call: Call) -> RunResult:
        """`_execute` with this instance last in the call chain its run sees."""
        token = call_chain.set((*call.chain, self._slot.name))
        try:
            return self._execute(call)
        finally:
            call_chain.reset(token)

    def _execute(self, call: Call) -> RunResult:
        if self._prepares(call):
            done = self._prepare(call)
            if done is not None:
                return done
        agent, slot = self._agent, self._slot
        assert agent is not None
        call.started = True
        return self._kept(call, agent.run(call.input, conversation_id=slot.cid, run_id=call.run_id))

    async def _aexecute(self, call: Call) -> RunResult:
        """`_execute` on an event loop: what may block before the run (the lease, a
        request id's lookup) runs in a worker thread, and a resume on the loop, as the
        run does (so a cancelled call stops it, and it stays pending)."""
        if self._prepares(call):
            step = await asyncio.to_thread(self._look_up, call)
            if isinstance(step, RunResult):
                return step
            if step is not None:
                done = await self._resumed(call, step, self._agent_now().aresume(call.run_id))
                if done is not None:
                    return done
        agent, slot = self._agent_now(), self._slot
        call.started = True
        result = await agent.arun(call.input, conversation_id=slot.cid, run_id=call.run_id)
        return self._kept(call, result)

    def _agent_now(self) -> Agent:
        agent = self._agent
        assert agent is not None
        return agent

    def _prepares(self, call: Call) -> bool:
        """True when `_prepare` has something to do (else a fresh run follows at once)."""
        if call.resume or call.started or call.request_id is not None:
            return True
        lease, agent = self._slot.lease, self._agent
        return (lease is None or not lease.held) and (
            agent is not None and store_of(agent.provider) is not None
        )

    def _prepare(self, call: Call) -> RunResult | None:
        """What comes before a fresh run: the instance's lease, and a call's earlier
        outcome. Returns the call's result when no fresh run is needed (a resume, a
        request id answered before, a run recorded by an earlier attempt)."""
        step = self._look_up(call)
        if step is None or isinstance(step, RunResult):
            return step
        agent = self._agent_now()
        try:
            result = agent.resume(call.run_id)
        except UnknownRun:
            if step is _Resume.MUST:
                raise
            return None
        return self._resumed_result(call, step, result)

    async def _resumed(
        self, call: Call, step: _Resume, resuming: Coroutine[Any, Any, RunResult]
    ) -> RunResult | None:
        """`_prepare`'s resume, awaited on the loop."""
        try:
            result = await resuming
        except UnknownRun:
            if step is _Resume.MUST:
                raise
            return None
        return self._resumed_result(call, step, result)

    def _resumed_result(self, call: Call, step: _Resume, result: RunResult) -> RunResult:
        if step is _Resume.MUST:
            return result
        self._host.count("resumed")
        return self._kept(call, result)

    def _look_up(self, call: Call) -> RunResult | _Resume | None:
        """Take the instance's lease, then find a call's earlier outcome: its result
        (a request id answered before), whether its run is to be resumed (`_Resume`),
        or None (a fresh run)."""
        agent, slot = self._agent_now(), self._slot
        store = store_of(agent.provider)
        if store is not None and (slot.lease is None or not slot.lease.held):
            lease = InstanceLease(store, slot.cid, lease_s=self._host.lease_s)
            lease.acquire(call.deadline)  # CallTimeout: another process runs the instance
            slot.lease = lease
        if call.resume:
            self._host.count("resumed")
            log.info("instance_run_resumed", instance=slot.name, run_id=call.run_id)
            return _Resume.MUST
        if call.request_id is not None or call.started:
            # A call started in its caller's thread may have sent its commit before it
            # was left here (a store call its deadline cut short): found committed, it
            # is not run again from its input (its journal went with the commit).
            done = slot.results.get(call.run_id) if slot.results is not None else None
            if done is None and store is not None:
                done = _committed(store, slot.cid, call.run_id)
            if done is not None:
                return done
        if (call.started or call.request_id is not None) and agent.keeps_journal:
            # A run recorded by an earlier attempt goes on from its journal (nothing
            # recorded: a fresh run). One a live process holds (another process, still
            # inside its lease) raises ValueError naming it: run again from its input
            # here, its recorded tools would run a second time.
            return _Resume.IF_PENDING
        return None

    def _kept(self, call: Call, result: RunResult) -> RunResult:
        if call.request_id is not None:
            self._slot.remember(result)
        return result

    # -- step boundaries --------------------------------------------------------------------

    def _step(self, run_id: str) -> None:
        """The agent's step hook: stop the run here if this incarnation must go, or if
        it runs in its caller's thread past the call's deadline."""
        if self.actor_inbox.control_pending():
            raise RunInterrupted(
                f"instance {self._slot.name!r} was stopped at a step boundary of run {run_id}"
            )
        deadline = self._inline_deadline
        if deadline is not None and time.monotonic() > deadline and self._resumable():
            raise RunInterrupted(
                f"run {run_id} of instance {self._slot.name!r} passed its caller's "
                "deadline; the instance's own thread goes on with it"
            )

    def _resumable(self) -> bool:
        """True when the agent journals its runs, so its actor can take a run over
        without calling a recorded tool again."""
        return self._agent is not None and self._agent.keeps_journal
