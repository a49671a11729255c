"""Calls: how a call reaches its agent instance and how its result reaches the caller.

`Calls.call` runs a call to a live, idle instance in the caller's thread (activating
the instance first when it is down), and otherwise queues it on the instance's mailbox
and waits for the instance's actor to answer, within the call's deadline. `Calls.acall`
does the same on the caller's event loop (the turn a coroutine of the loop), never
blocking it. A caller that wakes a down instance places its call once the instance is
live; the calls made meanwhile wait for it to be placed, so they keep their order.
`Calls.resume` queues a pending run found by recovery.
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import Future, wait
from typing import Any

import structlog

from memoryd.agent.agent import RunResult
from memoryd.agent.journal import RunRecord
from memoryd.agents import naming
from memoryd.agents.instance import Call, Slot, State
from memoryd.agents.mailbox import Mailboxes, Placed
from memoryd.agents.options import positive
from memoryd.agents.placement import Placement
from memoryd.errors import AgentSystemStopped, CallTimeout

__all__ = ["Calls"]

log = structlog.get_logger(__name__)


def _wake(slot: Slot) -> tuple[Future[None] | None, Future[None] | None]:
    """Whether a caller about to place a call waits for another's wake of the instance
    first (that wake, else None), or wakes it itself (its own wake, else None)."""
    with slot.mutex:
        if slot.waking is not None:
            return slot.waking, None
        if slot.state is State.DOWN and slot.idle:
            waking: Future[None] = Future()
            slot.waking = waking
            return None, waking
    return None, None


def _woken(slot: Slot, waking: Future[None] | None) -> None:
    """A waking caller's call is placed (or it gave up): the callers behind it go on,
    in the order they came (a future's callbacks run in the order they were added)."""
    if waking is None:
        return
    with slot.mutex:
        if slot.waking is waking:
            slot.waking = None
    waking.set_result(None)


class Calls:
    """The call path of one agent system.

    Args:
        mailboxes: The system's mailboxes.
        placement: The system's placement (activations).
        call_timeout_s: The default deadline of a call.
    """

    def __init__(
        self, mailboxes: Mailboxes, placement: Placement, *, call_timeout_s: float
    ) -> None:
        self._mailboxes = mailboxes
        self._placement = placement
        self.call_timeout_s = call_timeout_s

    def deadline(self, timeout: float | None) -> float:
        """The ``time.monotonic()`` deadline of a call with ``timeout`` (None: the default).

        Raises:
            ValueError: ``timeout`` is not a finite number > 0.
        """
        if timeout is None:
            return time.monotonic() + self.call_timeout_s
        positive(timeout, "timeout")
        return time.monotonic() + timeout

    def call(
        self,
        agent_type: str,
        key: str,
        input: Any,
        *,
        request_id: str | None,
        timeout: float | None,
    ) -> RunResult:
        """`AgentSystem.call`: the run in this thread when the instance is live and idle."""
        deadline = self.deadline(timeout)
        slot = self._mailboxes.address(agent_type, key)
        addressed = slot
        before, waking = _wake(slot)
        if before is not None:  # another caller is waking the instance: it goes first
            wait([before], timeout=_left(deadline))
        try:
            if waking is not None:
                self._placement.ensure_live(slot, deadline)  # so the first call runs here too
            slot, call, placed = self._mailboxes.submit(
                slot, input, request_id, deadline, inline=True
            )
        finally:
            _woken(addressed, waking)
        if placed is Placed.INLINE:
            actor = slot.actor
            assert actor is not None
            result = actor.run_inline(call)
            if result is not None:
                return result
        elif placed is Placed.DOWN:
            self._activate(slot, call, deadline)
        return self._wait(slot, call, deadline)

    async def acall(
        self,
        agent_type: str,
        key: str,
        input: Any,
        *,
        request_id: str | None,
        timeout: float | None,
    ) -> RunResult:
        """`AgentSystem.acall`: the run on the caller's loop when the instance is live and
        idle (`Agent.arun`), else through the instance's actor; never blocking the loop."""
        deadline = self.deadline(timeout)
        slot = self._mailboxes.address(agent_type, key)
        addressed = slot
        before, waking = _wake(slot)
        if before is not None:  # another caller is waking the instance: it goes first
            await asyncio.wait([asyncio.wrap_future(before)], timeout=_left(deadline))
        try:
            if waking is not None:  # so the first call runs on this loop too
                await asyncio.to_thread(self._placement.ensure_live, slot, deadline)
            slot, call, placed = self._mailboxes.submit(
                slot, input, request_id, deadline, inline=True
            )
        finally:
            _woken(addressed, waking)
        if placed is Placed.INLINE:
            actor = slot.actor
            assert actor is not None
            result = await actor.arun_inline(call)
            if result is not None:
                return result
        elif placed is Placed.DOWN:
            try:
                await asyncio.to_thread(self._placement.ensure_live, slot, deadline)
            except BaseException:
                self._mailboxes.withdraw(slot, call)
                raise
        try:
            future = asyncio.wrap_future(_future(call))
            return await asyncio.wait_for(future, _left(deadline))
        except CallTimeout:
            raise
        except TimeoutError:
            raise self._mailboxes.timed_out(slot, call) from None

    def resume(self, record: RunRecord) -> Future[RunResult]:
        """Queue the resumption of a pending run on its instance and activate it.

        Returns:
            The future of the run's result (or of the error that kept it from starting).

        Raises:
            AgentSystemStopped: The system stopped.
        """
        agent_type, key = naming.split_conversation(record.conversation_id)
        slot = self._mailboxes.address(agent_type, key)
        slot, call, placed = self._mailboxes.submit(
            slot, None, None, float("inf"), resume=record.run_id
        )
        if placed is Placed.DOWN:
            try:
                self._placement.ensure_live(slot, time.monotonic() + 3600.0)
            except AgentSystemStopped:
                raise
            except Exception as exc:
                self._mailboxes.withdraw(slot, call)
                call.fail(exc)
                log.error("run_recovery_failed", run_id=record.run_id, error=repr(exc))
        return _future(call)

    def _activate(self, slot: Slot, call: Call, deadline: float) -> None:
        try:
            self._placement.ensure_live(slot, deadline)
        except BaseException:
            self._mailboxes.withdraw(slot, call)
            raise

    def _wait(self, slot: Slot, call: Call, deadline: float) -> RunResult:
        try:
            return _future(call).result(timeout=_left(deadline))
        except CallTimeout:
            raise
        except TimeoutError:
            raise self._mailboxes.timed_out(slot, call) from None


def _future(call: Call) -> Future[RunResult]:
    """The future of a call its caller waits on (queued, or left to the actor: either
    made it)."""
    future = call.future
    assert future is not None, "a queued call, or one left to the actor, has its future"
    return future


def _left(deadline: float) -> float:
    """The seconds left until ``deadline`` (``time.monotonic()``), at least 0."""
    return max(0.0, deadline - time.monotonic())
