"""Holding a store's restart open, so a test can act while the store is surely down."""

from __future__ import annotations

import threading

from memoryd.store import actor as store_actor
from memoryd.store.handle import StoreHandle
from supervisors import kill

__all__ = ["HeldRestart", "crash_and_hold"]


class HeldRestart:
    """The store actor's fault hook: holds the next start of store ``name`` in its ``init``
    until ``release`` is set (at most 20 s).

    Args:
        name: the store's registered name.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.holding = threading.Event()
        self.release = threading.Event()

    def __call__(self, point: str, name: str) -> None:
        if point == "init" and name == self.name and not self.release.is_set():
            self.holding.set()
            self.release.wait(20)


def crash_and_hold(store: StoreHandle, hold: HeldRestart) -> None:
    """Crash the store's actor; return once its restart is held in ``init``.

    The caller sets ``hold.release`` and clears ``store_actor.fault_hook`` when done.
    """
    store_actor.fault_hook = hold
    kill(store.name, "test")
    assert hold.holding.wait(10), "the store did not begin to restart"
