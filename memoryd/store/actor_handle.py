"""ActorStoreHandle: the write path shared by every backend served by a store actor.

Writes are told to the store actor with a future (``submit(request, future,
writer)``), so concurrent writers share one commit; the handle waits for the
answer with a deadline, finds a restarted actor by its registered name, and sends
again only a write that was surely never attempted. Reads are each backend's own.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Self

import pykka
from pykka.messages import ProxyCall

from memoryd import app
from memoryd.errors import StoreUnavailable, WriteTimeout
from memoryd.store import engines
from memoryd.store.actor import NotWritten
from memoryd.store.config import StoreConfig
from memoryd.store.handle import StoreHandle
from memoryd.store.reply import Reply
from memoryd.store.requests import WriteRequest
from supervisors import whereis

__all__ = ["ActorStoreHandle"]

_POLL_S = 0.05


class ActorStoreHandle(StoreHandle):
    """A handle on a store served by a supervised store actor, addressed by name.

    Args:
        config: the store's configuration (its name, limits and deadline).
    """

    def __init__(self, config: StoreConfig) -> None:
        self.config = config
        self.name = config.name
        self.max_message_bytes = config.max_message_bytes
        self.call_timeout_s = config.call_timeout_s

    # -- plumbing -------------------------------------------------------------------

    def _unavailable(self, what: str) -> StoreUnavailable:
        return StoreUnavailable(
            f"store {self.name!r} {what}; start it with {type(self).__name__}.start(...)"
        )

    def _check_started(self) -> None:
        if app.active_config(self.name) is None:
            raise self._unavailable("is not running")

    def _engine(self, deadline: float) -> Any:
        """The store's current engine; waits while the store restarts.

        Raises:
            StoreUnavailable: the store is not running, or did not come back in time.
        """
        while True:
            engine = engines.lookup(self.name)
            if engine is not None and not engine.closed:
                return engine
            self._check_started()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._unavailable(
                    f"did not come back within {self.call_timeout_s:g} s (restarting?)"
                )
            engines.wait_for(self.name, min(remaining, _POLL_S))

    def _write(self, request: WriteRequest) -> Any:
        deadline = time.monotonic() + self.call_timeout_s
        while True:
            ref = whereis(self.name)
            if ref is None:
                self._engine(deadline)  # waits for the restart, or raises
                continue
            future = Reply()
            try:
                ref.tell(
                    ProxyCall(
                        attr_path=("submit",),
                        args=(request, future, threading.get_ident()),
                        kwargs={},
                    )
                )
            except pykka.ActorDeadError:
                continue  # nothing was sent
            try:
                return self._await(ref, future, deadline)
            except (pykka.ActorDeadError, NotWritten):
                if time.monotonic() >= deadline:
                    raise self._unavailable("stopped before the write") from None
                continue  # never attempted: safe to send again

    def _await(self, ref: pykka.ActorRef[Any], future: Reply, deadline: float) -> Any:
        """Wait for the write's answer.

        A told message that an actor never handled is dropped silently when the
        actor dies, so the wait is sliced: an unanswered future whose actor is
        dead was never attempted (processed writes are answered or handed back
        before the actor stops), and the caller may send it again.
        """
        while True:
            remaining = deadline - time.monotonic()
            if future.wait(min(remaining, _POLL_S)):
                return future.result()
            if not ref.is_alive():
                raise NotWritten(f"store {self.name!r} stopped before the write")
            if time.monotonic() >= deadline:
                raise WriteTimeout(
                    f"store {self.name!r} did not confirm the write within "
                    f"{self.call_timeout_s:g} s; its outcome is unknown: retry with the "
                    "same idempotency_key"
                )

    def stop(self) -> None:
        """Stop the store: commit what it accepted, close its storage."""
        app.stop_store(self.name)

    @classmethod
    def _start(cls, config: StoreConfig) -> Self:
        app.start_store(config)
        return cls(config)
