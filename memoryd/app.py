"""The application's supervision tree (OTP's application master and top supervisor).

```
Supervisor "memoryd"            one_for_one, intensity 3 / 5 s
├── DynamicSupervisor "memoryd.stores"   one store actor per started store
└── Server "memoryd.server"              only in the daemon (start_server)
```

The tree starts on first use and stops with ``shutdown()``; the next use after
a shutdown starts a fresh tree.
"""

from __future__ import annotations

import atexit
import shutil
import threading
import time
from typing import Any

import pykka
import structlog

from memoryd.errors import AlreadyStarted, StorageError, StoreUnavailable
from memoryd.store.actor import StoreActor
from memoryd.store.config import StoreConfig
from supervisors import (
    ChildSpec,
    ChildSpecError,
    DynamicSupervisor,
    NameTaken,
    Restart,
    StartError,
    Supervisor,
    whereis,
)

__all__ = [
    "DEFAULT_STORE",
    "ROOT",
    "STORES",
    "active_config",
    "lock",
    "register_backend",
    "shutdown",
    "start_server",
    "start_store",
    "stop_store",
]

log = structlog.get_logger(__name__)

ROOT = "memoryd"
STORES = "memoryd.stores"
DEFAULT_STORE = "memoryd.default"


class _Tree:
    """The running tree's state; one instance, guarded by ``_lock``."""

    root: Supervisor | None = None
    atexit_registered = False


_lock = threading.RLock()
_tree = _Tree()
_active: dict[str, StoreConfig] = {}


_ACTORS: dict[str, Any] = {"lmdb": StoreActor, "ephemeral": StoreActor}


def register_backend(kind: str, actor_class: Any) -> None:
    """Name the store actor class that serves ``StoreConfig.kind == kind``.

    Backends other than LMDB (Redis, ...) register their actor class here; the
    class is started as ``actor_class.start(config)`` under ``memoryd.stores``.
    """
    _ACTORS[kind] = actor_class


def _store_spec(config: StoreConfig) -> ChildSpec:
    actor_class = _ACTORS.get(config.kind)
    if actor_class is None:
        raise ValueError(f"no store backend is registered for kind {config.kind!r}")
    return ChildSpec(
        id=config.name,
        start=actor_class.start,
        args=(config,),
        restart=Restart.PERMANENT,
        shutdown_s=60.0,
        start_timeout_s=60.0,
    )


def _start_stores() -> DynamicSupervisor:
    """Start the stores supervisor with every store started so far.

    When the stores supervisor itself is restarted (its stores crashed too often),
    the root restarts it and it reopens the stores users started, so handles
    reach them again; if they cannot start, the failure escalates to the root.
    """
    children = [_store_spec(config) for config in list(_active.values())]
    return DynamicSupervisor.start(name=STORES, max_restarts=5, period_s=5.0, children=children)


def _stores(timeout_s: float = 10.0) -> DynamicSupervisor:
    with _lock:
        if _tree.root is None or not _tree.root.is_alive():
            _discard_all()
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


def start_store(config: StoreConfig) -> None:
    """Start a store actor under ``memoryd.stores``.

    Raises:
        AlreadyStarted: the name is taken or the data directory is in use.
        StorageError: the store failed to open its environment.
    """
    spec = _store_spec(config)
    with _lock:
        if config.name in _active and whereis(config.name) is not None:
            raise AlreadyStarted(f"a store named {config.name!r} is already running")
        sup = _stores()
        try:
            sup.start_child(spec)
        except (ChildSpecError, NameTaken):
            raise AlreadyStarted(f"a store named {config.name!r} is already running") from None
        except StartError as exc:
            cause = exc.__cause__
            if isinstance(cause, AlreadyStarted):
                raise cause from None
            if isinstance(cause, NameTaken):
                raise AlreadyStarted(f"the name {config.name!r} is already in use") from None
            raise StorageError(f"store {config.name!r} failed to start: {cause or exc}") from exc
        _active[config.name] = config


def start_server(spec: ChildSpec) -> None:
    """Start the daemon's listener as a child of the root supervisor, after the stores.

    ``shutdown()`` stops it first (reverse start order), so in-flight requests
    finish while the stores still run.

    Raises:
        StartError: the listener failed to start (the cause is chained).
    """
    with _lock:
        _stores()
        assert _tree.root is not None
        _tree.root.start_child(spec)


def stop_store(name: str) -> None:
    """Stop a store: commit what it accepted, close its environment, forget its name."""
    with _lock:
        config = _active.pop(name, None)
        if config is None:
            return
        ref = whereis(STORES)
        if ref is not None:
            sup = DynamicSupervisor(ref, name=STORES, call_timeout_s=120.0)
            try:
                sup.terminate_child(name)
            except (KeyError, pykka.ActorDeadError):
                pass
            except Exception as exc:  # the store is gone either way; say why
                log.warning("store_stop_failed", store=name, error=repr(exc))
        _discard(config)


def _discard_all() -> None:
    configs = list(_active.values())
    _active.clear()
    for config in configs:
        _discard(config)


def _discard(config: StoreConfig) -> None:
    """Delete an ephemeral store's directory once its actor has stopped for good."""
    if config.delete_on_stop:
        shutil.rmtree(config.path, ignore_errors=True)


def active_config(name: str) -> StoreConfig | None:
    """The config of a started (possibly restarting) store, or None if it is not started."""
    root = _tree.root
    if root is None or not root.is_alive():
        return None
    return _active.get(name)


def shutdown() -> None:
    """Stop the whole tree, children in reverse start order; close every environment."""
    with _lock:
        root, _tree.root = _tree.root, None
        configs = list(_active.values())
        _active.clear()
        if root is not None and root.is_alive():
            root.stop(timeout_s=300.0)
        for config in configs:
            _discard(config)


def lock() -> Any:
    """The tree's lock (held while the default store is started, so it starts once)."""
    return _lock


def _state() -> dict[str, Any]:
    """For debugging: the running tree's names."""
    return {"root": _tree.root, "stores": sorted(_active)}
