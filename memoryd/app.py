"""The application's supervision tree (OTP's application master and top supervisor).

```
Supervisor "memoryd"            one_for_one, intensity 3 / 5 s
├── DynamicSupervisor "memoryd.stores"   one store actor per started store
├── Server "memoryd.server"              only in the daemon (start_server)
└── other subtrees (start_child)         e.g. an agent system's instance supervisor
```

A store is restarted with `STORE_BACKOFF`: a store that keeps crashing (a failing
disk) or cannot reopen is retried with growing pauses, never given up on, so one
store's failure never takes the tree, or the daemon, down.

The tree knows its store children by record only: a `memoryd.store.spec.StoreSpec`
says which actor class to start with which config, and nothing here names a
backend. The table of started stores is `memoryd.store.lookup`'s: handles start
and stop stores through it, and it hands their specs to this tree, which is
attached to it when this module is imported (``import memoryd`` imports it). So
the tree imports the table, the table never imports the tree, and no backend is
imported by either.

The tree starts on first use and stops with ``shutdown()``; the next use after
a shutdown starts a fresh tree.
"""

from __future__ import annotations

import atexit
import time
from typing import Any

import pykka
import structlog

from memoryd.errors import AlreadyStarted, StorageError, StoreUnavailable
from memoryd.store import lookup
from memoryd.store.spec import StoreSpec
from supervisors import (
    Backoff,
    ChildSpec,
    ChildSpecError,
    DynamicSupervisor,
    NameTaken,
    Restart,
    StartError,
    Supervisor,
    SupervisorError,
    whereis,
)

__all__ = [
    "ROOT",
    "STORES",
    "STORE_BACKOFF",
    "running",
    "shutdown",
    "start_child",
    "start_server",
    "start_store",
    "stop_child",
    "stop_store",
]

log = structlog.get_logger(__name__)

ROOT = "memoryd"
STORES = "memoryd.stores"

STORE_BACKOFF = Backoff(initial_s=0.05, max_s=2.0, factor=2.0)
"""How a crash-looping store is restarted: past the stores supervisor's window (5 in
5 s) each restart waits 50 ms, 100 ms, ... up to 2 s, and never counts toward the
tree's intensity. A store whose disk fails for a while is retried until it opens and
writes again, and the other stores, the listener and the daemon live on."""


_STOP_TIMEOUT_S = 300.0
"""The longest a stop of the tree, or of one of its children, is waited for."""


class _Tree:
    """The running tree's state; one instance, guarded by ``lookup.lock()``."""

    root: Supervisor | None = None
    atexit_registered = False


_lock = lookup.lock()
_tree = _Tree()


def _child_spec(spec: StoreSpec[Any]) -> ChildSpec:
    """The supervisor's child spec of a store: its actor class, started with its config."""
    return ChildSpec(
        id=spec.name,
        start=spec.backend.actor.start,
        args=(spec.config,),
        restart=Restart.PERMANENT,
        shutdown_s=60.0,
        start_timeout_s=60.0,
        backoff=STORE_BACKOFF,
    )


def _start_stores() -> DynamicSupervisor:
    """Start the stores supervisor with every store started so far.

    When the stores supervisor itself is restarted (it crashed),
    the root restarts it and it reopens the stores users started, so handles
    reach them again; if they cannot start, the failure escalates to the root.
    """
    children = [_child_spec(spec) for spec in lookup.specs()]
    return DynamicSupervisor.start(name=STORES, max_restarts=5, period_s=5.0, children=children)


def _stores(timeout_s: float = 10.0) -> DynamicSupervisor:
    with _lock:
        if _tree.root is None or not _tree.root.is_alive():
            gave_up = _tree.root is not None
            forgotten = lookup.forget_all()
            if gave_up:
                log.error(
                    "tree_gave_up",
                    supervisor=ROOT,
                    stores=[spec.name for spec in forgotten],
                    reason="restart intensity exceeded; the tree starts again, and stores "
                    "are reopened on their next use (ephemeral ones empty)",
                )
            _discard(forgotten)
            if not _tree.atexit_registered:
                # Stop the stores cleanly when the program exits without shutdown():
                # queued writes are committed and every environment is closed.
                atexit.register(shutdown)
                _tree.atexit_registered = True
            _tree.root = Supervisor.start(
                name=ROOT,
                max_restarts=3,
                period_s=5.0,
                children=[
                    ChildSpec(id=STORES, start=_start_stores, supervisor=True, shutdown_s=60.0)
                ],
            )
    deadline = time.monotonic() + timeout_s
    while (ref := whereis(STORES)) is None:
        if time.monotonic() > deadline:
            raise StoreUnavailable("the stores supervisor did not come back in time")
        time.sleep(0.005)
    return DynamicSupervisor(ref, name=STORES, call_timeout_s=120.0)


def start_store(spec: StoreSpec[Any]) -> None:
    """Start a store's actor under ``memoryd.stores`` (the tree starts if it is not running).

    Use `memoryd.store.lookup.start`, which records the store; this is its tree side.

    Raises:
        AlreadyStarted: the name is taken or the store's resource is in use.
        StorageError: the store failed to start.
    """
    child = _child_spec(spec)
    with _lock:
        sup = _stores()
        try:
            sup.start_child(child)
        except (ChildSpecError, NameTaken):
            raise AlreadyStarted(f"a store named {spec.name!r} is already running") from None
        except StartError as exc:
            cause = exc.__cause__
            if isinstance(cause, AlreadyStarted):
                raise cause from None
            if isinstance(cause, NameTaken):
                raise AlreadyStarted(f"the name {spec.name!r} is already in use") from None
            raise StorageError(f"store {spec.name!r} failed to start: {cause or exc}") from exc


def stop_store(name: str) -> None:
    """Stop a store's actor for good: it commits what it accepted and closes its engine.

    Use `memoryd.store.lookup.stop`, which forgets the store; this is its tree side.
    """
    with _lock:
        ref = whereis(STORES)
        if ref is None:
            return
        sup = DynamicSupervisor(ref, name=STORES, call_timeout_s=120.0)
        try:
            sup.terminate_child(name)
        except (KeyError, pykka.ActorDeadError):
            pass
        except Exception as exc:  # the store is gone either way; say why
            log.warning("store_stop_failed", store=name, error=repr(exc))


def running() -> bool:
    """True while the tree runs."""
    root = _tree.root
    return root is not None and root.is_alive()


def start_server(spec: ChildSpec) -> None:
    """Start the daemon's listener as a child of the root supervisor, after the stores.

    ``shutdown()`` stops it first (reverse start order), so in-flight requests
    finish while the stores still run.

    Raises:
        StartError: the listener failed to start (the cause is chained).
    """
    start_child(spec)


def start_child(spec: ChildSpec) -> None:
    """Start a child of the root supervisor, after the stores (the tree starts if needed).

    Any layer above the stores adds its own subtree this way (an agent system adds its
    supervisor of agent instances); the tree knows it only by its spec.

    Raises:
        ChildSpecError: the root already has a child with that id.
        StartError: the child failed to start (the cause is chained).
    """
    with _lock:
        _stores()
        assert _tree.root is not None
        _tree.root.start_child(spec)


def stop_child(child_id: str) -> None:
    """Stop a child started with `start_child` and forget its spec (nothing if unknown).

    The child is stopped without the tree's lock held: a child that finishes work as it
    stops (the daemon's listener drains its requests) may start and stop stores meanwhile.
    """
    with _lock:
        root = _tree.root
    if root is None or not root.is_alive():
        return
    root = _patient(root)
    for call in (root.terminate_child, root.delete_child):
        try:
            call(child_id)
        except (KeyError, pykka.ActorDeadError, SupervisorError):
            return


def _patient(root: Supervisor) -> Supervisor:
    """A handle on ``root`` that waits as long as a child may take to stop (a listener
    draining its requests takes its grace period; the handle's default is 30 s)."""
    return Supervisor(root.actor_ref, name=ROOT, call_timeout_s=_STOP_TIMEOUT_S)


def _stop_above_stores(root: Supervisor) -> None:
    """Stop the root's children other than the stores, in reverse start order, without
    the tree's lock: their in-flight work (the listener's requests, an agent's turn) may
    still start, use and stop stores while they finish, and the stores still run."""
    try:
        children = root.which_children()
    except (pykka.ActorDeadError, SupervisorError):
        return
    patient = _patient(root)
    for child in reversed(children):
        if child.id == STORES or child.ref is None:
            continue
        try:
            patient.terminate_child(child.id)
        except (KeyError, pykka.ActorDeadError, SupervisorError) as exc:
            log.warning("child_stop_failed", supervisor=ROOT, child=child.id, error=repr(exc))


def _discard(specs: list[StoreSpec[Any]]) -> None:
    for spec in specs:
        spec.discard()


def shutdown() -> None:
    """Stop the whole tree, children in reverse start order; close every engine.

    Two steps. First the children above the stores (the daemon's listener, agent
    systems) stop, without the tree's lock and with the stores still running and
    known: what they finish as they stop (a request in flight, within the listener's
    grace period) still reaches its store, and may start or stop a store. Then, under
    the lock, every store is forgotten and the tree stops, the stores last.
    """
    with _lock:
        root = _tree.root
    if root is not None and root.is_alive():
        _stop_above_stores(root)
    with _lock:
        root, _tree.root = _tree.root, None
        specs = lookup.forget_all()
        if root is not None and root.is_alive():
            root.stop(timeout_s=_STOP_TIMEOUT_S)
        _discard(specs)


class _Attached:
    """This tree as `memoryd.store.lookup` sees it (a `lookup.Tree`)."""

    def start_store(self, spec: StoreSpec[Any]) -> None:
        start_store(spec)

    def stop_store(self, name: str) -> None:
        stop_store(name)

    def running(self) -> bool:
        return running()


lookup.attach(_Attached())
