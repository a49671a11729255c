"""A process-wide name registry for actors (OTP's ``register/2`` and ``whereis/1``).

A name belongs to one live actor at a time. A dead actor's name is free again
even if nobody unregistered it, so a restarted actor can take its name back.
Thread-safe.
"""

from __future__ import annotations

import threading
from typing import Any

import pykka

from supervisors._errors import NameTaken

__all__ = ["register", "registered", "unregister", "whereis"]

_lock = threading.Lock()
_names: dict[str, pykka.ActorRef[Any]] = {}


def register(name: str, ref: pykka.ActorRef[Any]) -> None:
    """Register ``ref`` under ``name``.

    Args:
        name: a non-empty str.
        ref: the actor to name.

    Raises:
        NameTaken: if a live actor other than ``ref`` holds the name.
        ValueError: if ``name`` is not a non-empty str.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"an actor name must be a non-empty str, not {name!r}")
    with _lock:
        current = _names.get(name)
        if current is not None and current is not ref and current.is_alive():
            raise NameTaken(name)
        _names[name] = ref


def unregister(name: str, ref: pykka.ActorRef[Any] | None = None) -> bool:
    """Free ``name``.

    Args:
        name: the name to free.
        ref: if given, free the name only while it still belongs to this actor
            (so a late unregister of an old incarnation cannot remove the new one).

    Returns:
        True if the name was freed.
    """
    with _lock:
        current = _names.get(name)
        if current is None or (ref is not None and current is not ref):
            return False
        del _names[name]
        return True


def whereis(name: str) -> pykka.ActorRef[Any] | None:
    """The live actor registered under ``name``, or None."""
    with _lock:
        ref = _names.get(name)
        if ref is None:
            return None
        if not ref.is_alive():
            del _names[name]
            return None
        return ref


def registered() -> list[str]:
    """The names of every live registered actor, sorted."""
    with _lock:
        return sorted(name for name, ref in _names.items() if ref.is_alive())
