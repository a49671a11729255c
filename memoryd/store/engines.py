"""Where readers find a store's current engine: published by its actor, by name.

A store actor publishes its engine at the end of ``init`` and withdraws it at
the start of ``terminate``; a restarted actor publishes a new one. Readers look
the engine up on every call and wait (up to their deadline) while none is
published, so a restart is invisible to them except as a short delay.
"""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["lookup", "publish", "wait_for", "withdraw"]

_cond = threading.Condition()
_engines: dict[str, Any] = {}


def publish(name: str, engine: Any) -> None:
    """Make ``engine`` the current engine of store ``name``."""
    with _cond:
        _engines[name] = engine
        _cond.notify_all()


def withdraw(name: str, engine: Any) -> None:
    """Remove ``engine`` if it is still the current one of ``name``."""
    with _cond:
        if _engines.get(name) is engine:
            del _engines[name]
        _cond.notify_all()


def lookup(name: str) -> Any | None:
    """The current engine of ``name``, or None."""
    return _engines.get(name)


def wait_for(name: str, timeout: float) -> Any | None:
    """Wait up to ``timeout`` seconds for an engine of ``name``; None if none came."""
    with _cond:
        _cond.wait_for(lambda: name in _engines, timeout=max(0.0, timeout))
        return _engines.get(name)
