"""Keeps the leases of runs that sit in one long call: a tool or an LLM call.

A run's lease is renewed by its own thread at step boundaries (`RunJournal.renew`,
once half of ``lease_s`` has passed). A call longer than the lease (a tool scraping
for a minute, a model thinking for two) would let the lease run out while the run is
alive and well, and another process would find it orphaned: resume it beside this
one, or discard it, and the turn whose tools already ran would be lost. So while a
run is inside such a call, one thread of the process renews it for it.

A journaled run is `Kept` from its first call to its end. Its lock is the right to
write its journal: the run holds it, and lets go of it only for the length of each
call (`Kept.call`, `Kept.returned`), which costs a lock release and acquire. The
keeper renews a run whose lock it can take, so never while the run writes, and never
over a write it has not seen: a step write still in flight is waited for first (one
sent from an event loop is waited for on that loop: the keeper asks the loop to, and
renews once it is recorded). A renewal that finds the run taken over is handed to the
run, which raises it
when its call returns; one that fails for another reason (the store away) is logged,
and the run finds out at its next write.

The keeper is one daemon thread for the process, started on first use; it sleeps
while no run is kept, and otherwise wakes every `CHECK_S` (or a quarter of the
shortest lease kept).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import structlog

from memoryd.errors import ConflictError

__all__ = ["CHECK_S", "KEEPER", "Kept", "LeaseKeeper"]

log = structlog.get_logger("memoryd.agent")

CHECK_S = 1.0
"""The longest the keeper sleeps while a run is kept (a quarter of a shorter lease)."""


class Kept:
    """One journaled run, kept by the keeper while it is in a call.

    Args:
        run_id: The run.
        lease_s: Its lease.
        due: True once half of the lease has passed (a renewal would write).
        renew: Renews the lease if half of it has passed; raises ``ConflictError``
            when the run was taken over.
        writing: The run's step write in flight (a `StepWrite`), or None.
    """

    __slots__ = (
        "due",
        "ended",
        "failed",
        "lease_s",
        "lock",
        "lost",
        "mine",
        "renew",
        "run_id",
        "writing",
    )

    def __init__(
        self,
        run_id: str,
        lease_s: float,
        due: Callable[[], bool],
        renew: Callable[[], Any],
        writing: Callable[[], Any],
    ) -> None:
        self.run_id = run_id
        self.lease_s = lease_s
        self.due = due
        self.renew = renew
        self.writing = writing
        self.lock = threading.Lock()
        """The right to write the run's journal: the run's, but during its calls."""
        self.lock.acquire()
        self.mine = True
        """Whether the run holds the lock now (False during a call, and after a
        `returned` that an interrupt cut short)."""
        self.ended = False
        self.failed = False
        """A renewal failed during this call (the store away): no more tries until the
        next call, which meets the failure itself."""
        self.lost: BaseException | None = None

    def call(self) -> None:
        """The run is about to make a call: the keeper may renew it meanwhile."""
        self.mine = False
        self.failed = False
        self.lock.release()

    def returned(self, *, wait: bool = True) -> bool:
        """The call returned: take the journal back (a renewal under way ends first).

        Returns:
            False only without ``wait``, while a renewal is under way: call again with
            ``wait`` (from a thread that may block) before the run writes.
        """
        taken = self.lock.acquire(blocking=wait)
        if taken:
            if self.ended:  # ended meanwhile (a cancelled task): nothing to hold
                self.lock.release()
            else:
                self.mine = True
        return taken


class LeaseKeeper:
    """The process's keeper of kept runs' leases (see the module)."""

    def __init__(self) -> None:
        self._wake = threading.Condition()
        self._kept: dict[int, Kept] = {}
        self._thread: threading.Thread | None = None
        self._idle = True

    def keep(self, kept: Kept) -> Kept:
        """Keep ``kept`` until `end` (its run holds its lock: no renewal yet)."""
        self._kept[id(kept)] = kept
        thread = self._thread
        if self._idle or thread is None or not thread.is_alive():  # wake it, or start one
            with self._wake:
                if self._thread is None or not self._thread.is_alive():
                    thread = threading.Thread(
                        target=self._serve, name="memoryd-lease-keeper", daemon=True
                    )
                    try:
                        thread.start()
                    except RuntimeError as exc:  # no thread to be had (shutting down)
                        self._kept.pop(id(kept), None)  # the run goes on, renewed by itself
                        log.warning("lease_keeper_unavailable", error=str(exc))
                        return kept
                    self._thread = thread
                self._wake.notify()
        return kept

    def end(self, kept: Kept) -> None:
        """The run ended: never renew it again. Its lock is let go only if the run
        holds it: an interrupt that cut `returned` short leaves it to the keeper's
        renewal under way, which lets go of its own hold."""
        kept.ended = True
        self._kept.pop(id(kept), None)
        if kept.mine:
            kept.mine = False
            kept.lock.release()

    def _serve(self) -> None:
        while True:
            with self._wake:
                # idle is set before the look, and `keep` adds before it reads idle: a
                # run kept as the keeper finds none is seen, or wakes it
                self._idle = True
                while not self._kept:
                    self._wake.wait()
                self._idle = False
            kept_now = list(self._kept.values())
            check_s = min(CHECK_S, *(k.lease_s / 4 for k in kept_now))
            for kept in kept_now:
                if kept.lost is None and not kept.failed and kept.lock.acquire(blocking=False):
                    try:
                        if not kept.ended:  # in a call: the journal is the keeper's now
                            self._renew(kept)
                    except BaseException as exc:  # the keeper outlives any one run
                        log.error("lease_keeper_failed", run_id=kept.run_id, error=repr(exc))
                    finally:
                        kept.lock.release()
            with self._wake:
                self._wake.wait(check_s)

    @staticmethod
    def _renew(kept: Kept) -> None:
        """Renew one run in a call if its lease is half gone (after its step write)."""
        writing = kept.writing()
        if writing is not None and writing.from_loop:
            if not writing.recorded:
                writing.request_wait()  # its loop records it; renewed on a later look
                return
            writing = None
        try:
            if writing is not None:  # first the write in flight: the renewal follows it
                writing.wait()  # the run waits for it again later: answered at once
            if kept.due():
                kept.renew()
        except ConflictError as exc:  # taken over: the run raises it after its call
            kept.lost = exc
        except Exception as exc:  # the store away: the run finds out at its next write
            kept.failed = True  # once a call: the next look would meet the same failure
            log.warning("run_lease_renewal_failed", run_id=kept.run_id, error=str(exc))


KEEPER = LeaseKeeper()
"""The process's keeper."""
