"""Keeps the leases of runs that sit in one long call: a tool or an LLM call.

A run's lease is renewed by its own thread at step boundaries (`RunJournal.renew`,
once half of ``lease_s`` has passed). A call longer than the lease (a tool scraping
for a minute, a model thinking for two) would let the lease run out while the run is
alive and well, and another process would find it orphaned: resume it beside this
one, or discard it, and the turn whose tools already ran would be lost. So while a
run is inside such a call, one thread of the process renews it for it.

The run's thread holds the run (`LeaseKeeper.hold`) for the call and lets go after
(`release`), which waits for a renewal under way: the journal is written by one
thread at a time, so its compare-and-set base stays the run's own. A renewal that
finds the run taken over is handed to the run's thread, which raises it where its
own renewal would have (the next step boundary). A renewal that fails for another
reason (the store away) is logged; the run finds out at its next write.

The keeper is one daemon thread for the process, started on first use; it waits on a
condition while nothing is held, and otherwise wakes every `CHECK_S` (or a quarter of
the shortest lease held). Holding and releasing cost a lock and a dict entry.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import structlog

from memoryd.errors import ConflictError

__all__ = ["CHECK_S", "KEEPER", "Held", "LeaseKeeper"]

log = structlog.get_logger("memoryd.agent")

CHECK_S = 1.0
"""The longest the keeper sleeps while a run is held (a quarter of a shorter lease)."""


class Held:
    """One run held by the keeper for the length of a call.

    Args:
        run_id: The run.
        lease_s: Its lease.
        due: True once half of the lease has passed (a renewal would write).
        renew: Renews the lease if half of it has passed; raises ``ConflictError``
            when the run was taken over.
        settle: Waits for the run's step write in flight and records it, or None when
            none is (a write sent from an event loop cannot be waited for here: None,
            and ``renewable`` False).
        renewable: False when a write the keeper cannot wait for is in flight.
    """

    __slots__ = ("busy", "due", "lease_s", "lost", "renew", "renewable", "run_id", "settle")

    def __init__(
        self,
        run_id: str,
        lease_s: float,
        due: Callable[[], bool],
        renew: Callable[[], Any],
        settle: Callable[[], None] | None,
        *,
        renewable: bool = True,
    ) -> None:
        self.run_id = run_id
        self.lease_s = lease_s
        self.due = due
        self.renew = renew
        self.settle = settle
        self.renewable = renewable
        self.busy = False
        self.lost: BaseException | None = None


class LeaseKeeper:
    """The process's keeper of held runs' leases (see the module)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._held: dict[int, Held] = {}
        self._thread: threading.Thread | None = None
        self._idle = False

    def hold(self, held: Held) -> Held:
        """Keep ``held``'s lease until `release`."""
        with self._cond:
            self._held[id(held)] = held
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._serve, name="memoryd-lease-keeper", daemon=True
                )
                self._thread.start()
            elif self._idle:
                self._cond.notify()
        return held

    def release(self, held: Held, *, wait: bool = True) -> bool:
        """Stop keeping ``held``; with ``wait``, first let a renewal under way end.

        Returns:
            True when no renewal is under way any more (False only without ``wait``:
            call `wait_done` before the run writes again).
        """
        with self._cond:
            self._held.pop(id(held), None)
            while wait and held.busy:
                self._cond.wait()
            return not held.busy

    def wait_done(self, held: Held) -> None:
        """Wait until no renewal of ``held`` is under way."""
        with self._cond:
            while held.busy:
                self._cond.wait()

    def _serve(self) -> None:
        while True:
            with self._cond:
                while not self._held:
                    self._idle = True
                    self._cond.wait()
                self._idle = False
                check_s = min(CHECK_S, *(h.lease_s / 4 for h in self._held.values()))
                due = [h for h in self._held.values() if h.renewable and not h.busy]
                for held in due:
                    held.busy = True
            for held in due:
                self._renew(held)
            with self._cond:
                for held in due:
                    held.busy = False
                self._cond.notify_all()
                if self._held:
                    self._cond.wait(check_s)

    @staticmethod
    def _renew(held: Held) -> None:
        """Renew one held run if its lease is half gone (its step write settled first)."""
        try:
            if held.settle is not None:  # first the write in flight, so renew writes after it
                settle, held.settle = held.settle, None
                settle()  # the run waits for it again after the call: answered at once
            if held.due():
                held.renew()
        except ConflictError as exc:  # taken over: the run's thread raises it
            held.lost = exc
            held.renewable = False
        except Exception as exc:  # the store away: the run finds out at its next write
            held.renewable = False
            log.warning("run_lease_renewal_failed", run_id=held.run_id, error=str(exc))


KEEPER = LeaseKeeper()
"""The process's keeper."""
