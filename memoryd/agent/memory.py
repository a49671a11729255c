"""The agent's ``memory=`` forms, the current-turn-preserving view, and the turn commit."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memoryd import messages as msgs
from memoryd.errors import ConflictError
from memoryd.provider.default import DefaultProvider
from memoryd.provider.protocol import MemoryProvider
from memoryd.store.handle import StoreHandle

__all__ = ["commit_turn", "keep_turn", "resolve_memory", "store_of"]

Message = dict[str, Any]

_FORMS = (
    '"default" (the shared default store), memoryd.window(n), a store handle, '
    "a MemoryProvider, or False (no memory)"
)


def resolve_memory(memory: Any) -> MemoryProvider | None:
    """The provider a ``memory=`` value stands for (beamai's five forms).

    Args:
        memory: ``"default"``, ``memoryd.window(n)`` (a provider), a store handle, any
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
    raise TypeError(f"memory={memory!r:.60} is not a memory form; use {_FORMS}")


def store_of(provider: MemoryProvider | None) -> StoreHandle | None:
    """The store behind a provider, when it exposes one as ``.store``.

    Args:
        provider: The provider.

    Returns:
        The store handle, or None.
    """
    store = getattr(provider, "store", None) if provider is not None else None
    return store if isinstance(store, StoreHandle) else None


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
    size = len(turn)
    if size <= len(prepared) and [_shape(m) for m in prepared[len(prepared) - size :]] == [
        _shape(m) for m in turn
    ]:
        return list(prepared)
    head = [m for m in prepared if msgs.is_system(m) and m not in turn]
    return [*head, *turn]


def _already_committed(store: StoreHandle, cid: str, run_id: str, after: int) -> int | None:
    for event in store.events(cid, after=after):
        if event.idempotency_key == run_id:
            return event.version
    return None


def commit_turn(
    provider: MemoryProvider,
    cid: str,
    turn: Sequence[Message],
    *,
    run_id: str,
    base_version: int,
    then_clear: str | None = None,
) -> int:
    """Append the whole turn as ONE write keyed by the run id, if the conversation is unchanged.

    With a `DefaultProvider` the check is atomic: the store's ``add`` gets
    ``expected_version=base_version`` (after the provider's store preprocessors, as
    its ``append`` would run them). With another provider on a store, the version is
    compared right before its ``append`` (the agent's conversation lock makes that
    exact within one process). A commit the store already holds (same run id) is
    found and its version returned, so committing twice writes once.

    Args:
        provider: The memory provider.
        cid: The conversation.
        turn: The run's messages; a `CheckedMessages` reaches the store without another
            check (unless store preprocessors rewrite it).
        run_id: The run id (the idempotency key).
        base_version: The conversation's version the run started from.
        then_clear: The run's journal, cleared by the commit's own write with a
            `DefaultProvider`, right after it with another provider.

    Returns:
        The conversation's version after the commit.

    Raises:
        ConflictError: The conversation changed since the run started.
    """
    store = store_of(provider)
    try:
        if store is not None and type(provider) is DefaultProvider:
            batch = provider.to_store(turn)
            if batch:
                return store.add(
                    cid,
                    batch,
                    idempotency_key=run_id,
                    expected_version=base_version,
                    then_clear=then_clear,
                )
            version = store.version(cid)
        elif store is not None:
            version = _already_committed(store, cid, run_id, base_version) or -1
            if version < 0:
                current = store.version(cid)
                if current != base_version:
                    raise ConflictError(expected=base_version, actual=current)
                version = int(provider.append(cid, list(turn), idempotency_key=run_id))
        else:
            return int(provider.append(cid, list(turn), idempotency_key=run_id))
        if then_clear is not None:
            store.clear(then_clear)
        return version
    except ConflictError as exc:
        done = _already_committed(store, cid, run_id, base_version) if store is not None else None
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
