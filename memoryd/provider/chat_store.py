"""ChatStore: the storage protocol a store written by a user satisfies, and what it offers.

beamai's "implement this behaviour to provide a custom backend" and Koog's
``ChatHistoryProvider``: a store needs only ``get(cid)``, ``add(cid, messages)`` and
``clear(cid)``. Everything that takes a store (`DefaultProvider`, ``Agent(memory=...)``,
`Session`, `memory_filter`, `LongTermMemory`) checks it with `check_store`, so all accept
and refuse the same things, with the same `TypeError` naming what is missing.

The richer store methods are optional, and memoryd uses each one a store has:

========================================  ==============================================
a store that has                          gives
========================================  ==============================================
``get(cid, limit=...)``                   window reads in O(window), not O(history)
``add(..., idempotency_key=...)``         idempotent retries: a retried write is stored once
``add(..., expected_version=...)``        turn-atomic commits, also across processes
``version(cid)``                          a version per write (checked before a commit,
                                          exact within one process only)
``events(cid)`` and ``record(cid, ...)``  a persisted session memo
========================================  ==============================================

A memoryd store handle (`memoryd.StoreHandle`: LMDB, ephemeral, Redis, remote) has all
of them, and more: only a store handle holds an Agent's run journal (``resume``) and
long-term memory records. For any other store, what it lacks is logged once per store
(``chat_store_degraded``, WARNING) when something first accepts it.
"""

from __future__ import annotations

import copy
import inspect
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import structlog

from memoryd.errors import ConflictError
from memoryd.store.handle import StoreHandle

__all__ = [
    "HANDLE_FEATURES",
    "REQUIRED_METHODS",
    "ChatStore",
    "StoreFeatures",
    "accepts_keyword",
    "call_options",
    "check_store",
    "looks_like_store",
    "store_add",
    "store_features",
    "store_get",
    "warn_once",
]

log = structlog.get_logger(__name__)

Message = dict[str, Any]

REQUIRED_METHODS = ("get", "add", "clear")
"""The methods every store has (`ChatStore`)."""


@runtime_checkable
class ChatStore(Protocol):
    """The storage layer as a user writes it: ``get``, ``add`` and ``clear``.

    Contract (beamai's ChatMemory): ``get`` returns the conversation's messages, oldest
    first (``[]`` for one never written); once ``add`` returned, every later ``get``
    sees what it added (read-your-writes); ``clear`` forgets the conversation. Messages
    are OpenAI-format dicts. Which optional methods and keywords a store may add is in
    this module's docstring.
    """

    def get(self, cid: str) -> list[dict[str, Any]]:
        """The conversation's messages, oldest first.

        Args:
            cid: The conversation id.

        Returns:
            The messages (``[]`` for a conversation never written).
        """
        ...

    def add(self, cid: str, messages: list[dict[str, Any]]) -> Any:
        """Append ``messages`` at the end of the conversation, durably, before returning.

        Args:
            cid: The conversation id.
            messages: The messages (at least one).

        Returns:
            The conversation's new version (an int) when the store keeps one;
            anything else is ignored.
        """
        ...

    def clear(self, cid: str) -> None:
        """Forget the conversation's messages.

        Args:
            cid: The conversation id.
        """
        ...


@dataclass(frozen=True, kw_only=True, slots=True)
class StoreFeatures:
    """What a store offers beyond `ChatStore` (read once, when it is accepted).

    Attributes:
        handle: It is a memoryd store handle (every feature, the journal included).
        get_limit: ``get`` takes ``limit=`` and ``system=`` (a window read that keeps the
            system messages stored before the tail, as `StoreHandle.get` does).
        idempotency: ``add`` takes ``idempotency_key=``.
        expected_version: ``add`` takes ``expected_version=``.
        version: It has ``version(cid)``.
        memo: It has ``events(cid)`` and ``record(cid, kind, ...)``.
    """

    handle: bool
    get_limit: bool
    idempotency: bool
    expected_version: bool
    version: bool
    memo: bool

    def degraded(self) -> list[str]:
        """What memoryd cannot give with this store, one phrase each (empty for a handle).

        Returns:
            The phrases, for the ``chat_store_degraded`` warning.
        """
        if self.handle:
            return []
        lost = ["run journal and resume (only a memoryd store handle holds a journal)"]
        if not self.idempotency:
            lost.append("idempotent retries (add takes no idempotency_key)")
        if not self.expected_version:
            lost.append(
                "turn-atomic commits across processes (add takes no expected_version"
                + ("; the version is compared before the commit instead)" if self.version else ")")
            )
        if not self.memo:
            lost.append("a persisted session memo (no events/record; kept in memory)")
        if not self.get_limit:
            lost.append("O(window) window reads (get takes no limit= and system=)")
        return lost


HANDLE_FEATURES = StoreFeatures(
    handle=True, get_limit=True, idempotency=True, expected_version=True, version=True, memo=True
)
"""A memoryd store handle's features: all of them."""


def accepts_keyword(function: Any, name: str) -> bool:
    """True when ``function`` has a parameter ``name`` that can be passed by keyword.

    A ``**kwargs`` parameter does not count: a callable says it honours an option by
    naming it.

    Args:
        function: A callable (usually a bound method).
        name: The keyword.

    Returns:
        Whether ``function(..., name=...)`` is accepted.
    """
    try:
        parameters = inspect.signature(function).parameters
    except (TypeError, ValueError):
        return False
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return True  # a wrapper forwarding ``**options`` takes what it wraps takes
    found = parameters.get(name)
    return found is not None and found.kind in (
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        inspect.Parameter.KEYWORD_ONLY,
    )


def looks_like_store(value: Any) -> bool:
    """True when ``value`` has any of the store methods (so a store was meant)."""
    return isinstance(value, StoreHandle) or any(
        callable(getattr(value, name, None)) for name in REQUIRED_METHODS
    )


def store_features(store: Any) -> StoreFeatures:
    """What ``store`` offers beyond `ChatStore` (signatures are read here, once).

    Args:
        store: A store that passed `check_store`.

    Returns:
        Its features.
    """
    if isinstance(store, StoreHandle):
        return HANDLE_FEATURES
    return StoreFeatures(
        handle=False,
        get_limit=accepts_keyword(store.get, "limit") and accepts_keyword(store.get, "system"),
        idempotency=accepts_keyword(store.add, "idempotency_key"),
        expected_version=accepts_keyword(store.add, "expected_version"),
        version=callable(getattr(store, "version", None)),
        memo=callable(getattr(store, "events", None)) and callable(getattr(store, "record", None)),
    )


def check_store(store: Any, *, user: str, needs: Sequence[str] = ()) -> Any:
    """``store`` if it is a store, or a `TypeError` naming what it lacks.

    The one acceptance check of every part that takes a store. A store that is not a
    memoryd store handle is accepted with a ``chat_store_degraded`` warning (once per
    store) listing what memoryd cannot give with it.

    Args:
        store: The candidate.
        user: Who asks (``"DefaultProvider"``, ``"memory_filter"``, ...), for the message.
        needs: Optional store methods this user cannot do without.

    Returns:
        ``store``.

    Raises:
        TypeError: ``store`` lacks ``get``, ``add`` or ``clear``, or one of ``needs``.
    """
    if isinstance(store, StoreHandle):
        return store
    wanted = [*REQUIRED_METHODS, *needs]
    missing = [name for name in wanted if not callable(getattr(store, name, None))]
    if missing:
        extra = f" (and {', '.join(needs)}, as a memoryd store handle has)" if needs else ""
        raise TypeError(
            f"{user} needs a store: an object with get(cid), add(cid, messages) and "
            f"clear(cid) (memoryd.ChatStore){extra}, such as memoryd.LmdbStore.start(...) "
            f"or memoryd.default_store(); {store!r:.80} has no {', '.join(missing)}"
        )
    lost = store_features(store).degraded()
    warn_once(
        store,
        "chat_store_degraded",
        store=f"{store!r:.80}",
        degraded=lost,
    )
    return store


_warned_lock = threading.Lock()
_warned: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()
_warned_ids: dict[int, set[str]] = {}


def warn_once(subject: Any, event: str, **fields: Any) -> None:
    """Log ``event`` at WARNING the first time it is asked for ``subject``, never again.

    Args:
        subject: The store or provider the warning is about (held weakly when it can be).
        event: The event name.
        fields: The event's fields.
    """
    with _warned_lock:
        try:
            seen = _warned.setdefault(subject, set())
        except TypeError:  # neither hashable nor weakly referable: remember its id
            seen = _warned_ids.setdefault(id(subject), set())
        if event in seen:
            return
        seen.add(event)
    log.warning(event, **fields)


def store_get(
    store: Any, features: StoreFeatures, cid: str, *, limit: int | None = None
) -> list[Message]:
    """The last ``limit`` messages (all when None) of ``cid``, as fresh copies.

    Args:
        store: The store.
        features: Its features.
        cid: The conversation id.
        limit: At most this many of the newest messages.

    Returns:
        The messages, oldest first.
    """
    if features.handle:
        found: list[Message] = store.get(cid, limit=limit)
        return found
    if limit is not None and features.get_limit:
        messages = list(store.get(cid, limit=limit))
    else:
        messages = list(store.get(cid))
        if limit is not None:
            messages = messages[len(messages) - limit :] if limit else []
    return copy.deepcopy(messages)


def store_add(
    store: Any,
    features: StoreFeatures,
    cid: str,
    messages: Sequence[Message],
    *,
    idempotency_key: str | None = None,
    expected_version: int | None = None,
) -> int | None:
    """Add ``messages`` with the options ``store`` honours.

    ``idempotency_key`` is passed only to a store that takes it. ``expected_version`` is
    passed to a store that takes it; a store with only ``version(cid)`` is compared
    before the add (exact within one process, under the caller's lock), and a store
    with neither is written without a check.

    Args:
        store: The store.
        features: Its features.
        cid: The conversation id.
        messages: The messages (a memoryd store handle takes a `CheckedMessages` as is).
        idempotency_key: The write's idempotency key, or None.
        expected_version: The version the conversation must be at, or None.

    Returns:
        The conversation's version after the write, or None for a store without versions.

    Raises:
        ConflictError: The conversation is not at ``expected_version``.
    """
    if features.handle:
        version: int = store.add(
            cid, messages, idempotency_key=idempotency_key, expected_version=expected_version
        )
        return version
    options: dict[str, Any] = {}
    if idempotency_key is not None and features.idempotency:
        options["idempotency_key"] = idempotency_key
    if expected_version is not None:
        if features.expected_version:
            options["expected_version"] = expected_version
        elif features.version:
            current = int(store.version(cid))
            if current != expected_version:
                raise ConflictError(expected=expected_version, actual=current)
    result = store.add(cid, copy.deepcopy(list(messages)), **options)
    if isinstance(result, int) and not isinstance(result, bool):
        return result
    if features.version:
        return int(store.version(cid))
    return None


def call_options(function: Callable[..., Any], names: Sequence[str]) -> frozenset[str]:
    """Which of the keyword ``names`` ``function`` takes by name (see `accepts_keyword`)."""
    return frozenset(name for name in names if accepts_keyword(function, name))
