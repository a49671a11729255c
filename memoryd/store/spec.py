"""Backend and StoreSpec: the records by which the application tree knows a store.

A backend is one record: the kind its stores report, the actor class that owns
a store's engine, and the handle class that addresses it by name. A store to run
is a `StoreSpec`: a backend and one config. Handles build specs and hand them to
`memoryd.store.lookup`, which starts them under the tree; the tree starts each
as ``spec.backend.actor.start(spec.config)`` and knows nothing else about it, so
a new backend is one folder (config, actor, handle) and one `Backend` record,
with no table to register it in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from memoryd.store.config import StoreConfig
from memoryd.store.handle import StoreHandle

__all__ = ["ActorClass", "Backend", "StoreSpec"]

H = TypeVar("H", bound=StoreHandle)


class ActorClass(Protocol):
    """What the tree needs of a store actor class (`memoryd.store.actor.StoreActor`'s)."""

    def start(self, *args: Any, **kwargs: Any) -> Any:
        """Start an actor with the store's config; returns its ref once it runs."""

    def discard(self, config: Any) -> None:
        """Free what a store leaves behind once it has stopped for good."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Backend(Generic[H]):
    """One kind of store: who owns its engine and who addresses it.

    Attributes:
        kind: what its stores report as ``stats()["kind"]`` (e.g. ``"lmdb"``).
        actor: the store actor class (a `memoryd.store.actor.StoreActor`), started as
            ``actor.start(config)``.
        handle: the handle class, built as ``handle(spec)``.
    """

    kind: str
    actor: ActorClass
    handle: Callable[[StoreSpec[Any]], H]

    def __post_init__(self) -> None:
        if not isinstance(self.kind, str) or not self.kind:
            raise ValueError(f"a backend's kind must be a non-empty str, not {self.kind!r}")


@dataclass(frozen=True, kw_only=True, slots=True)
class StoreSpec(Generic[H]):
    """One store to run under the tree: its backend and its config.

    Attributes:
        backend: the backend record.
        config: how to (re)start the store; its ``name`` is the registered name.
    """

    backend: Backend[H]
    config: StoreConfig

    @property
    def name(self) -> str:
        """The store's registered name."""
        return self.config.name

    def handle(self) -> H:
        """A new handle on this store."""
        return self.backend.handle(self)

    def discard(self) -> None:
        """Free what the store leaves behind once it has stopped for good."""
        self.backend.actor.discard(self.config)
