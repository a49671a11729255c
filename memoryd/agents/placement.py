"""Placement: which agent instances are live, activating them and passivating them.

At most ``max_active`` instances are live; to activate one more, the least recently
used idle one is passivated (stopped, its lease released). Instances idle for
``idle_after_s`` are passivated by `Placement.passivate_idle`, which the system's
reaper thread calls. Activations and passivations are serialised by one lock, never
held by code that runs in a supervisor's thread (an instance's ``init`` and
``terminate`` take only their slot's mutex), so a restart never waits on it.

An activation runs in the activating caller's thread from start to end when the
system's supervisor is idle (it then runs ``start_child`` there, and the instance's
``init`` with it, see ``supervisors.Supervisor``); so does a passivation of an
instance that never started its thread.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable

import structlog

from memoryd._outage import Outage
from memoryd.agents.instance import Host, Instance, Slot, State, nudge
from memoryd.agents.naming import system_name
from memoryd.errors import AgentSystemStopped, CallTimeout
from supervisors import (
    ChildSpec,
    ChildSpecError,
    DynamicSupervisor,
    Restart,
    StartError,
    SupervisorError,
    whereis,
)

__all__ = ["Placement"]

log = structlog.get_logger(__name__)


class Placement:
    """The live instances of one agent system.

    Args:
        host: The system (passed to each instance it starts).
        max_active: The most instances live at once.
        idle_after_s: Passivate an instance idle this long.
        clock: The monotonic clock of ``Slot.last_used``.
        count: Counts an event in the system's stats.
        retire: Forgets a slot that was passivated with nothing waiting.
        stopped: True once the system is stopped.
    """

    def __init__(
        self,
        host: Host,
        *,
        max_active: int,
        idle_after_s: float,
        clock: Callable[[], float],
        count: Callable[[str], None],
        retire: Callable[[Slot], None],
        stopped: Callable[[], bool],
    ) -> None:
        self.name = host.name
        self.max_active = max_active
        self.idle_after_s = idle_after_s
        self._host = host
        self._clock = clock
        self._count = count
        self._retire = retire
        self._stopped = stopped
        self._live: dict[str, Slot] = {}
        self._activating = threading.Lock()
        self._wake = threading.Condition()
        self._waiting = 0
        self._reaper_stop = threading.Event()
        self._reaper: threading.Thread | None = None

    def start_reaper(self, *, lease_s: float) -> None:
        """Start the thread that calls `passivate_idle` periodically (often enough to
        renew instance leases of ``lease_s`` in time)."""
        tick = min(max(self.idle_after_s / 4, 0.01), 1.0, lease_s / 4)

        outage = Outage("agent_reaper_failed", "agent_reaper_still_failing")

        def reap() -> None:
            while not self._reaper_stop.wait(tick):
                try:
                    self.passivate_idle()
                except Exception as exc:  # the store may be restarting: try next tick
                    said = outage.lost(time.monotonic())  # once, then every few seconds
                    if said is not None:
                        log.warning(said, system=self.name, error=repr(exc))
                    continue
                ended = outage.reached(time.monotonic())
                if ended is not None:
                    down_s, tries = ended
                    log.info(
                        "agent_reaper_working_again",
                        system=self.name,
                        down_s=round(down_s, 3),
                        tries=tries,
                    )

        self._reaper = threading.Thread(
            target=reap, name=f"memoryd-agents-{self.name}", daemon=True
        )
        self._reaper.start()

    def stop_reaper(self) -> None:
        """Stop the reaper thread and wake whoever waits for room."""
        self._reaper_stop.set()
        self.wake()
        if self._reaper is not None and self._reaper is not threading.current_thread():
            self._reaper.join(10.0)

    def live(self) -> list[Slot]:
        """The live slots (and those being restarted)."""
        with self._activating:
            return list(self._live.values())

    def take_all(self) -> list[Slot]:
        """Forget every live slot (their supervisor is gone) and return them."""
        with self._activating:
            live, self._live = list(self._live.values()), {}
        return live

    def wake(self) -> None:
        """Wake whoever waits for room or for a restart."""
        if self._waiting:  # read without the lock: a waiter looks again within 50 ms
            with self._wake:
                self._wake.notify_all()

    def _supervisor(self) -> DynamicSupervisor:
        ref = whereis(system_name(self.name))
        if ref is None:
            raise AgentSystemStopped(
                f"agent system {self.name!r} is not running (stopped, or memoryd was shut "
                "down); start a new one"
            )
        return DynamicSupervisor(ref, name=system_name(self.name), call_timeout_s=120.0)

    def reactivate_busy(self, timeout_s: float) -> None:
        """After the system's supervisor was restarted, activate again the instances
        that had calls waiting or running (each within ``timeout_s``)."""
        for slot in self.take_all():
            with slot.mutex:
                busy = not slot.idle
            if busy:
                try:
                    self.ensure_live(slot, time.monotonic() + timeout_s)
                except Exception as exc:
                    log.error("instance_reactivation_failed", instance=slot.name, error=repr(exc))

    def ensure_live(self, slot: Slot, deadline: float) -> None:
        """Make sure a live incarnation drains ``slot``: activate it, making room first.

        Raises:
            AgentSystemStopped: The system is stopped.
            CallTimeout: No room (every live instance busy) or no restart within the deadline.
            Exception: The instance failed to start (its factory raised, for example).
        """
        while True:
            if self._stopped():
                raise AgentSystemStopped(f"agent system {self.name!r} is stopped")
            with self._activating:
                with slot.mutex:
                    if nudge(slot):
                        return
                    if slot.state is State.RETIRED:
                        return  # no call waits in a retired slot
                restarting = slot.name in self._live
                if not restarting and (len(self._live) < self.max_active or self._make_room(slot)):
                    self._activate(slot)
                    return
            if time.monotonic() >= deadline:
                why = "being restarted" if restarting else f"every one of {self.max_active} busy"
                raise CallTimeout(
                    f"instance {slot.name!r} was not live in time ({why}); call again later"
                )
            with self._wake:
                self._waiting += 1
                try:
                    self._wake.wait(min(0.05, max(0.0, deadline - time.monotonic())))
                finally:
                    self._waiting -= 1

    def _activate(self, slot: Slot) -> None:
        """Start an incarnation of ``slot`` (holding ``_activating``)."""
        spec = ChildSpec(
            id=slot.name,
            start=Instance.start,
            args=(self._host, slot),
            restart=Restart.TRANSIENT,
            shutdown_s=60.0,
            start_timeout_s=30.0,
        )
        try:
            self._supervisor().start_child(spec)
        except ChildSpecError:
            self._live[slot.name] = slot  # a restart of it is under way
            return
        except StartError as exc:
            raise (exc.__cause__ if isinstance(exc.__cause__, Exception) else exc) from None
        self._live[slot.name] = slot

    def _make_room(self, keep: Slot) -> bool:
        """Passivate the least recently used idle instance (holding ``_activating``)."""
        idle = []
        for slot in self._live.values():
            with slot.mutex:
                if slot is not keep and slot.idle and slot.state is State.LIVE:
                    idle.append((slot.last_used, slot))
        for _, slot in sorted(idle, key=lambda pair: pair[0]):
            if self._passivate(slot, "max_active"):
                return True
        return False

    def _passivate(self, slot: Slot, reason: str) -> bool:
        """Stop an idle instance and release its lease (holding ``_activating``)."""
        with slot.mutex:
            if not slot.idle or slot.state is not State.LIVE:
                return False
            slot.state = State.STOPPING
        with contextlib.suppress(KeyError, SupervisorError, AgentSystemStopped, RuntimeError):
            self._supervisor().terminate_child(slot.name)
        if slot.lease is not None:
            slot.lease.release()
            slot.lease = None
        with slot.mutex:
            slot.state, slot.ref, slot.actor = State.DOWN, None, None
            slot.incarnations = 0
            retire = slot.idle
            if retire:
                slot.state = State.RETIRED
        self._live.pop(slot.name, None)
        if retire:
            self._retire(slot)
        self._count("passivations")
        log.info("instance_passivated", instance=slot.name, reason=reason)
        return True

    def passivate_idle(self) -> int:
        """Passivate every instance idle for ``idle_after_s`` and renew the leases of the
        others (the system's reaper thread calls this periodically).

        Returns:
            How many instances were passivated.
        """
        now, done = self._clock(), 0
        with self._activating:
            for slot in list(self._live.values()):
                with slot.mutex:
                    expired = slot.idle and now - slot.last_used >= self.idle_after_s
                if expired and self._passivate(slot, "idle"):
                    done += 1
            leases = [(s.name, s.lease) for s in self._live.values() if s.lease is not None]
        for name, lease in leases:
            if not lease.renew():
                log.warning("instance_lease_lost", instance=name)
        return done
