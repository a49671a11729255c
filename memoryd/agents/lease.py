"""Instance leases: one process at a time runs an agent instance over a shared store.

A lease is a hidden conversation ``memoryd.run/lease/<type>/<key>`` (`lease_id`) holding
one ``memo`` event, ``{"owner", "state", "lease_s"}``: each write is compare-and-set on
the version and supersedes the one before (`StoreHandle.record`), so the log never
grows. It is held while its newest memo says ``held``, by a live owner, and is younger than
``lease_s``; a process takes a free or expired lease with one write, renews it while
the instance is live and releases it when the instance is passivated. A lease holds no
messages, so the store lists it nowhere (not even among pending runs).
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
from collections.abc import Callable

from memoryd.agent.journal import JOURNAL_PREFIX, OWNER, owner_gone
from memoryd.errors import CallTimeout, ConflictError
from memoryd.messages import MAX_CONVERSATION_ID_BYTES
from memoryd.store.handle import StoreHandle

__all__ = ["LEASE_PREFIX", "InstanceLease", "lease_id"]

LEASE_PREFIX = f"{JOURNAL_PREFIX}lease/"
_HASHED_PREFIX = f"{JOURNAL_PREFIX}lease#/"


def lease_id(cid: str) -> str:
    """The conversation of ``cid``'s lease: ``memoryd.run/lease/<cid>``, or, for an id
    too long to take the prefix within the conversation-id limit, ``memoryd.run/lease#/``
    and its SHA-256 (a prefix no spelled-out lease starts with, so the two never meet)."""
    spelled = f"{LEASE_PREFIX}{cid}"
    if len(spelled.encode("utf-8")) <= MAX_CONVERSATION_ID_BYTES:
        return spelled
    return f"{_HASHED_PREFIX}{hashlib.sha256(cid.encode('utf-8')).hexdigest()}"


class InstanceLease:
    """The lease on one instance's conversation in one store.

    Args:
        store: The store.
        cid: The instance's conversation id.
        lease_s: How long a lease lasts after its last write.
        clock: Wall-clock time (seconds since the epoch), comparable with event timestamps.
        sleep: Waits between attempts while another process holds the lease.
    """

    def __init__(
        self,
        store: StoreHandle,
        cid: str,
        *,
        lease_s: float,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], object] = time.sleep,
    ) -> None:
        self.store = store
        self.cid = cid
        self.id = lease_id(cid)
        self.lease_s = lease_s
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._version: int | None = None
        self._written_at = 0.0

    @property
    def held(self) -> bool:
        """True while this process holds the lease (as far as it knows)."""
        return self._version is not None

    def _holder(self) -> tuple[int, str | None]:
        """The lease's version and its live holder other than this process, if any."""
        version = self.store.version(self.id)
        if not version:
            return 0, None
        last = self.store.events(self.id, after=version - 1)[-1]
        data = last.data or {}
        owner = str(data.get("owner", ""))
        if data.get("state") != "held" or owner == OWNER or owner_gone(owner):
            return version, None
        if self._clock() > last.timestamp + float(data.get("lease_s", self.lease_s)):
            return version, None
        return version, owner

    def _write(self, state: str, expected: int) -> int:
        """One compare-and-set memo that supersedes the lease's earlier ones: however
        often an instance is activated or its lease renewed, its log holds one event."""
        data = {"owner": OWNER, "state": state, "lease_s": self.lease_s}
        return self.store.record(
            self.id, "memo", data=data, expected_version=expected, supersede=True
        )

    def acquire(self, deadline: float, *, poll_s: float = 0.01) -> None:
        """Take the lease, waiting while another live process holds it.

        Args:
            deadline: Give up at this ``time.monotonic()`` time.
            poll_s: The first wait between attempts (doubling up to 0.2 s).

        Raises:
            CallTimeout: Another process still held it at the deadline.
        """
        with self._lock:
            wait = poll_s
            while True:
                version, holder = self._holder()
                if holder is None:
                    try:
                        self._version = self._write("held", version)
                    except ConflictError:
                        continue  # someone else wrote meanwhile: look again
                    self._written_at = self._clock()
                    return
                if time.monotonic() + wait > deadline:
                    raise CallTimeout(
                        f"agent instance {self.cid!r} is running in "
                        f"another process ({holder}); it was not released in time. Call "
                        "again later, or give the call a longer timeout"
                    )
                self._sleep(wait)
                wait = min(wait * 2, 0.2)

    def renew(self) -> bool:
        """Renew a held lease once half of it has passed.

        Returns:
            False when the lease was lost (another process took it after it expired).
        """
        with self._lock:
            if self._version is None:
                return False
            if self._clock() - self._written_at < self.lease_s / 2:
                return True
            try:
                self._version = self._write("held", self._version)
            except ConflictError:
                self._version = None
                return False
            self._written_at = self._clock()
            return True

    def release(self) -> None:
        """Release a held lease (nothing when it is not held or was taken over)."""
        with self._lock:
            version, self._version = self._version, None
            if version is None:
                return
            with contextlib.suppress(ConflictError):  # taken over: nothing to release
                self._write("released", version)
