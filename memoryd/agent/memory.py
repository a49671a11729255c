"""The agent's ``memory=`` forms, the current-turn-preserving view, and the turn commit.

What the Agent promises depends on what its memory offers (see
`memoryd.provider.protocol` and `memoryd.provider.chat_store`):

* on a memoryd store handle (``"default"``, ``memoryd.window(n)``, a handle, or a
  `DefaultProvider` on one): the turn is one write keyed by the run id and checked
  against the version the run started from, atomically; a retry or a ``resume`` never
  stores it twice; runs are journaled;
* on a provider whose ``append`` takes ``idempotency_key`` / ``expected_version``, or a
  store whose ``add`` does: the same, for each keyword it takes;
* without them: the turn is appended once, never retried, and only after the run
  succeeded; runs on one conversation in one process still take turns, and a
  version the store or provider exposes is compared right before the append, but a
  commit that failed midway may or may not be stored, and writers in other processes
  are not excluded. A warning says so once per provider (``memory_provider_degraded``)
  or store (``chat_store_degraded``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memoryd import messages as msgs
from memoryd.errors import ConflictError
from memoryd.provider.chat_store import check_store, looks_like_store, store_add, warn_once
from memoryd.provider.default import DefaultProvider
from memoryd.provider.protocol import MemoryProvider, append_options, provider_append
from memoryd.store.handle import StoreHandle

__all__ = [
    "base_version",
    "check_provider_options",
    "commit_turn",
    "committed_fresh",
    "keep_turn",
    "resolve_memory",
    "store_of",
]

Message = dict[str, Any]

_FORMS = (
    '"default" (the shared default store), memoryd.window(n), a store handle or any '
    "memoryd.ChatStore, a MemoryProvider, or False (no memory)"
)


_PROVIDER_METHODS = ("history", "append", "prepare", "clear")
"""What a `MemoryProvider` has (beamai's four callbacks)."""


def resolve_memory(memory: Any) -> MemoryProvider | None:
    """The provider a ``memory=`` value stands for (beamai's five forms).

    Args:
        memory: ``"default"``, ``memoryd.window(n)`` (a provider), a store handle or
            any `memoryd.ChatStore` (wrapped in a `DefaultProvider`), any
            `MemoryProvider`, or ``False``/``None`` for no memory.

    Returns:
        The provider, or None for no memory.

    Raises:
        ValueError: A str other than ``"default"``.
        TypeError: Anything else that is not one of the forms.
    """
    if memory is False or memory is None:
        return None
    if isinstance(memory, str):
        if memory == "default":
            return DefaultProvider.on_default_store()
        raise ValueError(f"memory={memory!r} is not a memory form; use {_FORMS}")
    if isinstance(memory, StoreHandle):
        return DefaultProvider(memory)
    if isinstance(memory, MemoryProvider):
        return memory
    if looks_like_store(memory):
        return DefaultProvider(check_store(memory, user="Agent(memory=...)"))
    has = [name for name in _PROVIDER_METHODS if callable(getattr(memory, name, None))]
    if has:
        missing = [name for name in _PROVIDER_METHODS if name not in has]
        raise TypeError(
            f"memory={memory!r:.60} has {', '.join(has)} but a MemoryProvider also needs "
            f"{', '.join(missing)}; use {_FORMS}"
        )
    raise TypeError(
        f"memory={memory!r:.60} is not a memory form: it has none of a MemoryProvider's "
        f"methods ({', '.join(_PROVIDER_METHODS)}) nor a store's (get, add, clear); use "
        f"{_FORMS}"
    )


def store_of(provider: MemoryProvider | None) -> StoreHandle | None:
    """The store behind a provider, when it exposes one as ``.store``.

    Args:
        provider: The provider.

    Returns:
        The store handle, or None.
    """
    store = getattr(provider, "store", None) if provider is not None else None
    return store if isinstance(store, StoreHandle) else None


def record_limit(provider: MemoryProvider | None, journal: StoreHandle | None) -> int | None:
    """The largest message a run can record: the smaller per-message limit of its
    memory's store and its journal's store, or None when neither is a store handle.

    Args:
        provider: The run's memory.
        journal: The store its journal writes to, if it keeps one.

    Returns:
        The limit in bytes (as compact JSON), or None.
    """
    stores = [s for s in (store_of(provider), journal) if s is not None]
    return min(s.max_message_bytes for s in stores) if stores else None


def base_version(provider: MemoryProvider | None, cid: str) -> int | None:
    """The version a run starts from, when its memory keeps versions; else None.

    Args:
        provider: The provider.
        cid: The conversation id.

    Returns:
        The conversation's version, or None.
    """
    store = store_of(provider)
    if store is not None:
        return store.version(cid)
    if isinstance(provider, DefaultProvider) and provider.store_features.version:
        return int(provider.store.version(cid))
    return None


def check_provider_options(provider: MemoryProvider | None) -> frozenset[str]:
    """The optional ``append`` keywords ``provider`` honours; warn once when it lacks any.

    Args:
        provider: The provider (None: no memory).

    Returns:
        Its `append_options` (a `DefaultProvider` offers what its store offers).
    """
    if provider is None or isinstance(provider, DefaultProvider):
        return frozenset()
    options = append_options(provider)
    degraded = [
        consequence
        for name, consequence in _WITHOUT.items()
        if name not in options and not (name == "expected_version" and store_of(provider))
    ]
    if degraded:
        warn_once(
            provider, "memory_provider_degraded", provider=f"{provider!r:.80}", degraded=degraded
        )
    return options


_WITHOUT = {
    "idempotency_key": "idempotent commits (append takes no idempotency_key): a turn is "
    "appended once, never retried, and a failed append may or may not have stored it",
    "expected_version": "turn-atomic commits (append takes no expected_version): writers "
    "in other processes are not excluded",
}


def _shape(message: Message) -> tuple[Any, ...]:
    return (message.get("role"), message.get("tool_call_id"), tuple(msgs.tool_call_ids(message)))


def keep_turn(prepared: Sequence[Message], turn: Sequence[Message]) -> list[Message]:
    """What to send: the provider's view, unless it cut into the current turn. Pure.

    A window small enough to drop the user's own input (or a tool call of this run)
    would make the model answer a question it cannot see. When ``prepared`` does not
    end with the whole turn (compared by role and tool-call ids, so a preprocessor may
    still rewrite contents), the result is the system messages ``prepared`` kept,
    then the whole turn.

    Args:
        prepared: The provider's ``prepare`` of history + turn.
        turn: The run's input and everything it produced so far.

    Returns:
        The messages to send.
    """
    start = len(prepared) - len(turn)
    if start >= 0 and all(
        m is t or _shape(m) == _shape(t) for m, t in zip(prepared[start:], turn, strict=True)
    ):  # the turn's own messages (the usual case) need no comparison
        return list(prepared)
    head = [m for m in prepared if msgs.is_system(m) and m not in turn]
    return [*head, *turn]


def committed_fresh(
    version: int, store: StoreHandle, cid: str, run_id: str, base_version: int | None
) -> int:
    """The version a turn's commit to a store handle returned, once it is known to
    have stored this turn.

    The commit is keyed by the run id and expects the version the run started from,
    so a write of this turn makes exactly the next version: any other answer is the
    store's answer to a repeated idempotency key, the version of a turn an earlier run
    given the same run id committed, and this turn was not stored. Telling that from
    the version alone costs no read.

    Args:
        version: What the store's ``add`` answered.
        store: The store.
        cid: The conversation.
        run_id: The run id (the commit's idempotency key).
        base_version: The version the run started from (None: nothing was expected).

    Returns:
        ``version``.

    Raises:
        ConflictError: The run id names a turn committed before (nothing was stored).
    """
    if base_version is None or version == base_version + 1:
        return version
    try:
        actual = store.version(cid)
    except Exception:  # the refusal matters more than the figure
        actual = version
    raise ConflictError(
        f"run id {run_id!r} names a turn conversation {cid!r} holds already (committed at "
        f"version {version}): a committed run's id is its turn's idempotency key, so this "
        "run's turn was not stored. Give a new run a new run id (or none)",
        expected=base_version,
        actual=actual,
    )


def _already_committed(store: StoreHandle, cid: str, run_id: str, after: int) -> int | None:
    for event in store.events(cid, after=after):
        if event.idempotency_key == run_id:
            return event.version
    return None


def _append_turn(
    provider: MemoryProvider,
    store: StoreHandle | None,
    cid: str,
    turn: Sequence[Message],
    *,
    run_id: str,
    base_version: int | None,
    options: frozenset[str],
) -> int | None:
    """A provider other than `DefaultProvider` appends the turn, with the keywords it takes."""
    expected = base_version if "expected_version" in options else None
    if store is not None and expected is None and base_version is not None:
        done = _already_committed(store, cid, run_id, base_version)
        if done is not None:
            return done
        current = store.version(cid)
        if current != base_version:
            raise ConflictError(expected=base_version, actual=current)
    return provider_append(
        provider, options, cid, turn, idempotency_key=run_id, expected_version=expected
    )


def commit_turn(
    provider: MemoryProvider,
    cid: str,
    turn: Sequence[Message],
    *,
    run_id: str,
    base_version: int | None,
    options: frozenset[str] = frozenset(),
    then_clear: str | None = None,
) -> int | None:
    """Append the whole turn as ONE write keyed by the run id, if the conversation is unchanged.

    With a `DefaultProvider` the write goes to its store (after the provider's store
    preprocessors, as its ``append`` would run them) with ``idempotency_key=run_id`` and
    ``expected_version=base_version``, as far as the store takes them (on a store
    handle: an atomic check). With another provider, ``append`` gets those of the two
    keywords it honours (``options``); when it takes no ``expected_version`` but has a
    store handle, the version is compared right before its ``append`` (the agent's
    conversation lock makes that exact within one process). A commit the store
    already holds (same run id) is found and its version returned, so committing
    twice writes once; but a run id whose turn was committed before the run started
    names that turn, not this one: on a store handle its commit is refused
    (`committed_fresh`), never answered with the other turn's version. What the Agent
    promises without these is in this module's docstring.

    Args:
        provider: The memory provider.
        cid: The conversation.
        turn: The run's messages; a `CheckedMessages` reaches the store without another
            check (unless store preprocessors rewrite it).
        run_id: The run id (the idempotency key).
        base_version: The conversation's version the run started from (None: the
            memory keeps no versions, nothing is compared).
        options: The provider's `append_options` (ignored for a `DefaultProvider`).
        then_clear: The run's journal, cleared by the commit's own write with a
            `DefaultProvider` on a store handle, right after it otherwise.

    Returns:
        The conversation's version after the commit, or None when the memory keeps none.

    Raises:
        ConflictError: The conversation changed since the run started, or (on a store
            handle) the run id names a turn committed before it started; nothing stored.
    """
    store = store_of(provider)
    batch: Sequence[Message] = ()
    try:
        if type(provider) is DefaultProvider:
            batch = provider.to_store(turn)
            if batch and provider.store_features.handle:  # one write, clearing the journal
                added = provider.store.add(
                    cid,
                    batch,
                    idempotency_key=run_id,
                    expected_version=base_version,
                    then_clear=then_clear,
                )  # told from a repeated run id's answer below, outside this try
            else:
                added = None
        else:
            added = None
        if added is None:
            version = _commit_otherwise(
                provider,
                store,
                cid,
                turn,
                batch,
                run_id=run_id,
                base_version=base_version,
                options=options,
            )
            if then_clear is not None and store is not None:
                store.clear(then_clear)
            return version
    except ConflictError as exc:
        done = None
        if store is not None and base_version is not None:
            done = _already_committed(store, cid, run_id, base_version)
        if done is not None:
            if then_clear is not None and store is not None:
                store.clear(then_clear)
            return done
        raise ConflictError(
            f"conversation {cid!r} changed while run {run_id} was running (it started at "
            f"version {exc.expected}, the conversation is at {exc.actual}); nothing was "
            "stored: run it again",
            expected=exc.expected,
            actual=exc.actual,
        ) from exc
    assert type(provider) is DefaultProvider
    return committed_fresh(int(added), provider.store, cid, run_id, base_version)


def _commit_otherwise(
    provider: MemoryProvider,
    store: StoreHandle | None,
    cid: str,
    turn: Sequence[Message],
    batch: Sequence[Message],
    *,
    run_id: str,
    base_version: int | None,
    options: frozenset[str],
) -> int | None:
    """`commit_turn` but for a `DefaultProvider`'s one write to a store handle: a
    `DefaultProvider`'s turn as its store keeps it (``batch``; empty: nothing to
    write) written to another store, or another provider's append."""
    if type(provider) is DefaultProvider:
        target, features = provider.store, provider.store_features
        if batch:
            return store_add(
                target,
                features,
                cid,
                batch,
                idempotency_key=run_id,
                expected_version=base_version,
            )
        return int(target.version(cid)) if features.version else base_version
    return _append_turn(
        provider,
        store,
        cid,
        turn,
        run_id=run_id,
        base_version=base_version,
        options=options,
    )
