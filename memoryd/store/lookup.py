"""Where store X is: the one table of started stores, by name, with their current engines.

Each started store has an entry: its `StoreSpec` (what to restart it with, and
which handle class addresses it) and, while an incarnation runs, its engine. A
store actor publishes its engine at the end of ``init`` and withdraws it at the
start of ``terminate``; readers look the engine up on every call and wait (up to
their deadline) while none is published, so a restart is invisible to them
except as a short delay. ``memoryd.whereis(name)`` is `whereis` here.

The supervision tree (`memoryd.app`) sits above this module: it imports it, and
nothing under ``memoryd.store`` imports the tree. Handles start and stop their
stores through `start` and `stop`, which hand the spec to the `Tree` that
`memoryd.app` attaches when it is imported (``import memoryd`` does that). The
tree reads the specs back from `specs` when it restarts its stores supervisor.
So the arrows point one way: app -> lookup <- backends, and the app never names
a backend.
"""

from __future__ import annotations

import threading
from typing import Any, Protocol, TypeVar

from memoryd.errors import AlreadyStarted, StoreUnavailable
from memoryd.store.config import StoreConfig
from memoryd.store.handle import StoreHandle
from memoryd.store.spec import Backend, StoreSpec
from supervisors import whereis as actor_whereis

__all__ = [
    "Tree",
    "attach",
    "engine",
    "engines",
    "forget_all",
    "lock",
    "lost",
    "note_recreated_empty",
    "publish",
    "recreated_empty",
    "restarts",
    "spec",
    "specs",
    "start",
    "stop",
    "wait_for_engine",
    "whereis",
    "withdraw",
]

H = TypeVar("H", bound=StoreHandle)


class Tree(Protocol):
    """What the application tree does for this table (implemented by `memoryd.app`)."""

    def start_store(self, spec: StoreSpec[Any]) -> None:
        """Start the spec's actor under the stores supervisor.

        Raises:
            AlreadyStarted: the name or the store's resource is in use.
            StorageError: the store failed to start.
        """

    def stop_store(self, name: str) -> None:
        """Stop the store's actor for good (it commits what it accepted)."""

    def running(self) -> bool:
        """True while the tree runs (its stores are the started ones)."""


_lock = threading.RLock()
_cond = threading.Condition()
_specs: dict[str, StoreSpec[Any]] = {}
_engines: dict[str, Any] = {}
_tree: Tree | None = None
_recreated_empty: dict[str, int] = {}
_opened: dict[str, int] = {}
"""How many incarnations of each started store opened an engine since it was started."""


def attach(tree: Tree) -> None:
    """Make ``tree`` the supervision tree that runs the stores (``memoryd.app`` calls it)."""
    global _tree  # noqa: PLW0603 - the one slot the application fills
    _tree = tree


def _attached() -> Tree:
    if _tree is None:
        raise StoreUnavailable("no supervision tree is attached; import memoryd to start stores")
    return _tree


def lock() -> threading.RLock:
    """The lock held while stores start and stop (and while the tree starts or stops)."""
    return _lock


# -- the started stores ------------------------------------------------------------------


def start(backend: Backend[H], config: StoreConfig) -> H:
    """Start a store of ``backend`` under the tree and return a handle on it.

    Raises:
        AlreadyStarted: the name is taken or the store's resource is in use.
        StorageError: the store failed to start.
    """
    started = StoreSpec(backend=backend, config=config)
    with _lock:
        tree = _attached()
        if started.name in _specs and tree.running() and actor_whereis(started.name) is not None:
            raise AlreadyStarted(f"a store named {started.name!r} is already running")
        _opened[started.name] = 0  # counted from this start (its first incarnation opens)
        tree.start_store(started)
        _specs[started.name] = started
    return started.handle()


def stop(name: str) -> None:
    """Stop a store: commit what it accepted, close its engine, forget its name."""
    with _lock:
        stopped = _specs.pop(name, None)
        _opened.pop(name, None)
        if stopped is None:
            return
        _attached().stop_store(name)
        stopped.discard()


def spec(name: str) -> StoreSpec[Any] | None:
    """The spec of a started (possibly restarting) store, or None if it is not started."""
    tree = _tree
    if tree is None or not tree.running():
        return None
    return _specs.get(name)


def specs() -> list[StoreSpec[Any]]:
    """Every started store's spec, in start order (the tree restarts them from these)."""
    return list(_specs.values())


def forget_all() -> list[StoreSpec[Any]]:
    """Forget every store (the tree stopped or died); returns their specs to discard."""
    with _lock:
        forgotten = list(_specs.values())
        _specs.clear()
        _opened.clear()
    return forgotten


def lost(name: str) -> bool:
    """True when store ``name`` was started, never stopped, and its tree gave up on it.

    A supervision tree that died (its root exceeded its restart intensity) keeps its
    stores' specs here until the next start; an explicit ``memoryd.shutdown()`` forgets
    them, so a store shut down on purpose is not lost.
    """
    tree = _tree
    with _lock:
        return tree is not None and not tree.running() and name in _specs


def note_recreated_empty(name: str) -> int:
    """Count one more time store ``name`` was lost and started again empty; the new count."""
    with _lock:
        _recreated_empty[name] = _recreated_empty.get(name, 0) + 1
        return _recreated_empty[name]


def recreated_empty(name: str) -> int:
    """How many times store ``name`` was lost and started again empty in this process."""
    return _recreated_empty.get(name, 0)


def whereis(name: str) -> StoreHandle | None:
    """A handle on the started store registered as ``name``, or None."""
    found = spec(name)
    return None if found is None else found.handle()


# -- engine slots ---------------------------------------------------------------------------


def publish(name: str, current: Any) -> None:
    """Make ``current`` the engine of store ``name`` (its actor, at the end of ``init``)."""
    with _cond:
        _engines[name] = current
        _opened[name] = _opened.get(name, 0) + 1
        _cond.notify_all()


def restarts(name: str) -> int:
    """How many times store ``name`` was restarted since it was started: its incarnations
    that opened an engine, past the first (each one counted, however seldom it is asked,
    and still while a restart is under way)."""
    return max(0, _opened.get(name, 0) - 1)


def withdraw(name: str, current: Any) -> None:
    """Remove ``current`` if it is still the engine of ``name`` (its actor, on ``terminate``)."""
    with _cond:
        if _engines.get(name) is current:
            del _engines[name]
        _cond.notify_all()


def engine(name: str) -> Any | None:
    """The current engine of store ``name``, or None."""
    return _engines.get(name)


def engines() -> list[Any]:
    """Every engine published now (any backend's)."""
    return list(_engines.values())


def wait_for_engine(name: str, timeout: float) -> Any | None:
    """Wait up to ``timeout`` seconds for an engine of ``name``; None if none came."""
    with _cond:
        _cond.wait_for(lambda: name in _engines, timeout=max(0.0, timeout))
        return _engines.get(name)
