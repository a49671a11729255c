"""Session: Agently's multi-turn chat container, on a memoryd conversation.

A session is bound to one conversation and a provider. ``full_context`` is the stored
history; ``context_window`` is what would be sent: the provider's `prepare` of the
history a run loads (the stored one, or a summarising provider's summary and the
messages after it), then the analysis handler picks a resize handler (by default
``simple_cut`` once the window passes ``max_length`` characters; see
`memoryd.provider.session_handlers`). ``memo`` is a
dict that resize handlers update; it is persisted as a ``memo`` event in the
conversation's log, so it survives restarts. The exported document is described in
`memoryd.provider.session_export`.

A session works on any provider: with a store (a `DefaultProvider` on a store handle or
on any `memoryd.ChatStore`) ``full_context`` is the store's whole history; with a
provider that exposes none (beamai's four callbacks) it is the provider's ``history``.
The memo is persisted only in a store with ``events`` and ``record`` (every memoryd
store handle); elsewhere it lives in the session object, which a ``session_memo_volatile``
warning says once per store or provider.

History is never replaced by accident: `set_chat_history` and the restores
(`from_dict`, `load_json`, `load_yaml`) into a conversation that holds messages raise
`ConflictError`, writing nothing, unless given ``replace=True``.

```python
session = memoryd.Session("support-demo", store, max_length=12_000)
session.add_chat_history(messages.user("My order is A-100."))
session.context_window        # what the next request sends
text = session.to_json()      # history, tool calls and memo
copy = memoryd.Session.load_json(text, other_store)
```
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias

from memoryd import messages as msgs
from memoryd._ids import IdSource
from memoryd._json_values import copy_json_or_raise
from memoryd.errors import ConflictError
from memoryd.provider.chat_store import check_store, looks_like_store, warn_once
from memoryd.provider.default import DefaultProvider
from memoryd.provider.protocol import MemoryProvider
from memoryd.provider.session_export import FORMAT, dump, parse
from memoryd.provider.session_handlers import (
    AnalysisHandler,
    Message,
    Resized,
    ResizeHandler,
    WindowHandlers,
    as_messages,
    settings_for,
)
from memoryd.provider.session_turns import check_keys, render
from memoryd.store.handle import StoreHandle

__all__ = ["AnalysisHandler", "ResizeHandler", "Session"]

_SESSION_IDS = IdSource("session-")
"""Ids of sessions made without one."""

ProviderOrStore: TypeAlias = MemoryProvider | StoreHandle | Any
"""A provider, a store handle or any `memoryd.ChatStore`, or None for the default store."""

_SETTINGS = ("max_length", "input_keys", "reply_keys", "settings")
"""The session settings `Session.configure` takes by name; any other name is a handler
setting."""


def _checked_memo(memo: Any) -> dict[str, Any]:
    """A memo as the session keeps it: a JSON-compatible dict, copied.

    Raises:
        TypeError: ``memo`` is not a mapping.
        ValueError: It is not JSON-compatible.
    """
    if not isinstance(memo, Mapping):
        raise TypeError(f"memo must be a dict, not {type(memo).__name__}")
    checked: dict[str, Any] = copy_json_or_raise(dict(memo), "memo", error=ValueError)
    return checked


class Session:
    """One conversation seen the Agently way.

    Args:
        conversation_id: The conversation (default: a new ``session-<hex>`` id).
        provider: Any `MemoryProvider` (beamai's four callbacks are enough), a store
            handle or any `memoryd.ChatStore` (wrapped in a `DefaultProvider`), or None
            for the default store.
        max_length: The ``simple_cut`` budget in characters of compact JSON; None for
            no length control.
        settings: JSON-compatible settings passed to handlers (``max_length`` is added).
        input_keys: Dotted paths of the prompt data `record_turn` records (None: all).
        reply_keys: Dotted paths of the reply data `record_turn` records (None: all).

    Raises:
        InvalidConversationId: A bad ``conversation_id``.
        TypeError: ``provider`` is neither a provider nor a store (the message names
            what a store lacks); bad keys or settings.
        ValueError: ``max_length`` is not None or an int >= 1.
    """

    def __init__(
        self,
        conversation_id: str | None = None,
        provider: ProviderOrStore = None,
        *,
        max_length: int | None = 12000,
        settings: Mapping[str, Any] | None = None,
        input_keys: Sequence[str] | None = None,
        reply_keys: Sequence[str] | None = None,
    ) -> None:
        self._named = conversation_id is not None
        if conversation_id is None:
            conversation_id = _SESSION_IDS.next()
        self._cid = msgs.validate_turn_conversation_id(conversation_id)
        if provider is None:
            provider = DefaultProvider.on_default_store()
        elif isinstance(provider, StoreHandle):
            provider = DefaultProvider(provider)
        elif not isinstance(provider, MemoryProvider):
            if not looks_like_store(provider):
                raise TypeError(
                    "Session needs a MemoryProvider (history, append, prepare, clear) or a "
                    f"store (get, add, clear), got {provider!r:.80}"
                )
            provider = DefaultProvider(check_store(provider, user="Session"))
        self._provider: MemoryProvider = provider
        self._settings = settings_for(max_length, settings)
        self.input_keys = check_keys(input_keys, "input_keys")
        self.reply_keys = check_keys(reply_keys, "reply_keys")
        self._handlers = WindowHandlers()
        self._memo: dict[str, Any] | None = None
        self._memo_seen = 0
        """The version of the last event `memo` has read (None `_memo`: none read)."""
        self._memo_stale = False
        """The log may have changed elsewhere since `memo` read it (`forget_window`)."""
        self._window: list[Message] | None = None

    # -- properties ------------------------------------------------------------------

    @property
    def id(self) -> str:
        """The conversation id."""
        return self._cid

    @property
    def written(self) -> bool:
        """True once the conversation holds anything: messages, or a memo (in a store,
        any event at all)."""
        store = self.store
        if store is None:
            return bool(self._memo) or bool(self._provider.history(self._cid))
        return int(store.version(self._cid)) > 0

    @property
    def named(self) -> bool:
        """True when the session was given its conversation id; False when it made one."""
        return self._named

    @property
    def provider(self) -> MemoryProvider:
        """The provider."""
        return self._provider

    def with_conversation(self, conversation_id: str) -> Session:
        """This session's policy on another conversation of the same provider: a new
        session with a copy of the settings, ``input_keys`` and ``reply_keys``, and the
        same handlers (registered anew on it, so registering on one leaves the other).
        The other conversation's own history and memo are its own; nothing is written.

        Args:
            conversation_id: The conversation of the new session.

        Returns:
            The new session.

        Raises:
            InvalidConversationId: A bad ``conversation_id``.
        """
        twin = Session(conversation_id, self._provider, max_length=None)
        twin._settings = copy.deepcopy(self._settings)
        twin.input_keys, twin.reply_keys = self.input_keys, self.reply_keys
        twin._handlers = self._handlers.copy()
        return twin

    @property
    def store(self) -> Any:
        """The provider's store, or None when the provider exposes none."""
        store = getattr(self._provider, "store", None)
        return store if store is not None and looks_like_store(store) else None

    def _memo_store(self) -> Any:
        """The store that keeps the memo (``events`` and ``record``), or None."""
        store = self.store
        if all(callable(getattr(store, name, None)) for name in ("events", "record")):
            return store
        warn_once(
            store if store is not None else self._provider,
            "session_memo_volatile",
            session=self._cid,
            reason="the store has no events/record: the memo lives in the Session object",
        )
        return None

    @property
    def settings(self) -> dict[str, Any]:
        """A copy of the settings handlers receive."""
        return copy.deepcopy(self._settings)

    @property
    def full_context(self) -> list[Message]:
        """The whole stored history (fresh copies); the provider's history without a store."""
        store = self.store
        if store is None:
            return self._provider.history(self._cid)
        return copy.deepcopy(list(store.get(self._cid)))

    @property
    def context_window(self) -> list[Message]:
        """What the next request would send (computed on first use and after each change)."""
        if self._window is None:
            self.refresh()
        assert self._window is not None
        return copy.deepcopy(self._window)

    @property
    def memo(self) -> dict[str, Any]:
        """The latest persisted memo (a copy; ``{}`` when none was set).

        It is read from the log once, then kept; after each run (`forget_window`) the
        events written since are read, so a memo another process set meanwhile (two
        agents sharing a session through a daemon) is the one seen, not overwritten."""
        if self._memo is None or self._memo_stale:
            self._read_memo()
        assert self._memo is not None
        return copy.deepcopy(self._memo)

    def _read_memo(self) -> None:
        """Catch up with the log: the newest ``memo`` event's data, ``{}`` after a clear."""
        if self._memo is None:
            self._memo, self._memo_seen = {}, 0
        self._memo_stale = False
        store = self._memo_store()
        if store is None:
            return
        for event in store.events(self._cid, after=self._memo_seen):
            if event.kind == "memo":
                self._memo = dict(event.data or {})
            elif event.kind == "cleared":  # a clear deletes the log, memo events included
                self._memo = {}
            self._memo_seen = event.version

    def set_memo(self, memo: Mapping[str, Any]) -> None:
        """Persist ``memo`` as a ``memo`` event (nothing is written when it is unchanged).

        Args:
            memo: A JSON-compatible mapping.

        Raises:
            TypeError: ``memo`` is not a mapping.
            ValueError: It is not JSON-compatible.
        """
        checked = _checked_memo(memo)
        stale = self._memo_stale  # a run's end: the next run reads what came after it
        try:
            if checked == self.memo:
                return
        finally:
            self._memo_stale = stale
        store = self._memo_store()
        if store is not None:
            version = store.record(self._cid, "memo", data=checked)
            if isinstance(version, int):  # the newest memo: no event before it matters
                self._memo_seen = version
        self._memo = checked

    def configure(self, **settings: Any) -> Session:
        """Change the session's settings (Agently's ``session.*`` settings).

        Args:
            settings: ``max_length`` (int >= 1 or None), ``input_keys`` and ``reply_keys``
                (dotted paths or None), ``settings`` (a mapping merged into the handler
                settings); any other name is a handler setting of its own.

        Returns:
            The session (for chaining).

        Raises:
            ValueError, TypeError: A bad value (nothing is changed).
        """
        merged = {k: v for k, v in self._settings.items() if k != "max_length"}
        merged.update(settings.pop("settings", None) or {})
        merged.update({k: v for k, v in settings.items() if k not in _SETTINGS})
        max_length = settings.get("max_length", self._settings.get("max_length"))
        chosen = settings_for(max_length, merged)
        input_keys = check_keys(settings.get("input_keys", self.input_keys), "input_keys")
        reply_keys = check_keys(settings.get("reply_keys", self.reply_keys), "reply_keys")
        self._settings, self.input_keys, self.reply_keys = chosen, input_keys, reply_keys
        self._window = None
        return self

    # -- handlers ---------------------------------------------------------------------

    def register_analysis_handler(self, handler: AnalysisHandler) -> Session:
        """Replace the analysis handler, which names the resize handler to run (or None).

        Args:
            handler: ``(full_context, context_window, memo, settings) -> str | None``.

        Returns:
            The session (for chaining).

        Raises:
            TypeError: ``handler`` is not callable.
        """
        self._handlers.set_analysis(handler)
        self._window = None
        return self

    def register_resize_handler(self, name: str, handler: ResizeHandler) -> Session:
        """Register a resize handler under ``name``.

        Args:
            name: The name the analysis handler returns.
            handler: ``(full_context, context_window, memo, settings) ->
                (full_context or None, context_window, memo or None)``.

        Returns:
            The session (for chaining).

        Raises:
            TypeError: ``name`` is not a non-empty str or ``handler`` is not callable.
        """
        self._handlers.add_resize(name, handler)
        self._window = None
        return self

    def shape(self, history: list[Message], messages: list[Message]) -> Resized:
        """What one LLM call of a run is sent: ``prepare``, then the handlers. No write.

        Args:
            history: The stored history the run loaded (the handlers' ``full_context``).
            messages: History and the turn so far, oldest first.

        Returns:
            The window to send, and the history and memo the handlers returned (the
            caller decides whether to apply them).
        """
        window = self._provider.prepare(self._cid, copy.deepcopy(messages))
        return self._handlers.run(history, window, self.memo, self._settings)

    def handlers_history(self, loaded: list[Message]) -> list[Message]:
        """The ``full_context`` a run's handlers get, given the history the run loaded.

        It is the whole stored history, as `refresh` gives them: read once, when
        handlers of the user's are registered and the run loaded less (a window's tail,
        a summary); else ``loaded`` itself, with no read.

        Args:
            loaded: The history the run loaded.

        Returns:
            The history the handlers are given.
        """
        if not self._handlers.reads_full_context or self.store is None:
            return loaded
        if type(self._provider) is DefaultProvider and self._provider.window is None:
            return loaded
        return self.full_context

    def note_unapplied(self, run_id: str) -> None:
        """A resize handler returned a full context during a run, which the run does not
        store (a run only appends its turn): warn once for this session.

        Args:
            run_id: The run.
        """
        warn_once(
            self,
            "session_full_context_not_applied",
            conversation_id=self._cid,
            run_id=run_id,
            hint="a run only appends its turn; session.refresh() stores a resize "
            "handler's full context",
        )

    def _loaded(self, full: list[Message]) -> list[Message]:
        """What a run loads as history, given the stored ``full`` history (a copy).

        A `DefaultProvider`'s ``history`` is the stored history (or a tail its window
        prepares alike), and without a store ``full`` is the provider's ``history``
        already; another provider loads its own (a `SummarizingProvider`: its latest
        summary, then the messages after it), which is what a run's window is made of.
        """
        if self.store is None or type(self._provider) is DefaultProvider:
            return copy.deepcopy(full)
        return self._provider.history(self._cid)

    def forget_window(self) -> None:
        """Drop the cached context window (the history changed elsewhere); the memo is
        caught up with the log when next read."""
        self._window = None
        self._memo_stale = True

    def refresh(self) -> list[Message]:
        """Recompute the context window, running the handlers; persist a changed memo.

        A resize handler returning a full context (not None) replaces the stored history;
        the memo (the one it returned, or else the current one) is kept with it.

        Returns:
            The new context window (a copy).

        Raises:
            ValueError: The analysis handler named an unregistered resize handler, or
                returned a memo that is not JSON-compatible (nothing is written).
            TypeError: A resize handler returned something other than a 3-tuple, or a
                memo that is not a dict (nothing is written).
            InvalidMessage: A resize handler returned a bad message (nothing is written).
        """
        full = self.full_context
        window = self._provider.prepare(self._cid, self._loaded(full))
        memo = self.memo
        resized = self._handlers.run(full, window, memo, self._settings)
        if resized.memo is not None:
            memo = _checked_memo(resized.memo)
        if resized.full_context is not None:  # checked before anything is written
            self._replace(resized.full_context)
            self._memo = None  # a clear deletes the log, memo events included
        self.set_memo(memo)
        self._window = resized.window
        return copy.deepcopy(resized.window)

    # -- chat history -----------------------------------------------------------------

    def _replace(self, messages: list[Message]) -> None:
        self._provider.clear(self._cid)
        if messages:
            self._provider.append(self._cid, messages)

    def add_chat_history(self, messages: Message | Sequence[Message]) -> Session:
        """Append one message or a list of messages (one store write).

        Args:
            messages: A message dict or a list of them.

        Returns:
            The session (for chaining).

        Raises:
            InvalidMessage: A bad message (nothing is written).
        """
        batch = as_messages(messages)
        if batch:
            self._provider.append(self._cid, batch)
        self.refresh()
        return self

    def _check_replace(self, replace: bool) -> None:
        """Raise `ConflictError` when the conversation holds messages and not ``replace``."""
        if not isinstance(replace, bool):
            raise TypeError(f"replace must be True or False, not {replace!r}")
        if replace:
            return
        held = len(self.full_context)
        if held:
            raise ConflictError(
                f"conversation {self._cid!r} holds {held} messages; nothing was written. "
                "Pass replace=True to replace its history (the store's log keeps a "
                "cleared marker), or use another conversation id",
                expected=0,
                actual=held,
            )

    def set_chat_history(self, messages: Sequence[Message], *, replace: bool = False) -> Session:
        """Set the history to ``messages`` (a clear, then one write).

        Args:
            messages: The new history.
            replace: Required when the conversation already holds messages.

        Returns:
            The session (for chaining).

        Raises:
            ConflictError: The conversation holds messages and ``replace`` is False
                (nothing is written).
            InvalidMessage: A bad message (nothing is changed).
        """
        batch = as_messages(messages)
        self._check_replace(replace)
        memo = self.memo
        self._replace(batch)
        self._memo = None
        self.set_memo(memo)  # a clear deletes the log, memo events included
        self.refresh()
        return self

    def reset_chat_history(self) -> Session:
        """Empty the history and the memo.

        Returns:
            The session (for chaining).
        """
        self._provider.clear(self._cid)
        self._memo = None
        self.set_memo({})
        self._window = []
        return self

    def record_turn(self, prompt: Any, reply: Any) -> Session:
        """Record one request: the prompt as a user message, the reply as an assistant one.

        With ``input_keys`` / ``reply_keys`` only those dotted paths of the (mapping)
        prompt and reply are recorded, as a JSON object; paths that are missing are
        skipped. Without them a str is recorded as it is and other data as JSON.

        Args:
            prompt: The prompt text or data.
            reply: The reply text or parsed result data.

        Returns:
            The session (for chaining).
        """
        user = msgs.user(render(prompt, self.input_keys))
        assistant = msgs.assistant(render(reply, self.reply_keys))
        return self.add_chat_history([user, assistant])

    # -- export / import ----------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """Everything the session holds, as plain data.

        Returns:
            ``format``, ``id``, ``full_context``, ``context_window``, ``memo``,
            ``settings``, ``input_keys``, ``reply_keys``.
        """
        return {
            "format": FORMAT,
            "id": self._cid,
            "full_context": self.full_context,
            "context_window": self.context_window,
            "memo": self.memo,
            "settings": self.settings,
            "input_keys": None if self.input_keys is None else list(self.input_keys),
            "reply_keys": None if self.reply_keys is None else list(self.reply_keys),
        }

    def to_json(self) -> str:
        """The session as JSON text (see `to_dict`)."""
        return dump(self.to_dict(), "json")

    def to_yaml(self) -> str:
        """The session as YAML text (see `to_dict`)."""
        return dump(self.to_dict(), "yaml")

    @classmethod
    def from_dict(
        cls,
        data: Mapping[str, Any],
        provider: ProviderOrStore = None,
        *,
        conversation_id: str | None = None,
        replace: bool = False,
    ) -> Session:
        """Restore an exported session into a store.

        Args:
            data: What `to_dict` returned.
            provider: Where to restore it (as in the constructor).
            conversation_id: The conversation to write (default: the exported id).
            replace: Required when that conversation already holds messages (its
                history is then replaced).

        Returns:
            The restored session.

        Raises:
            ValueError: ``data`` is not an exported session.
            InvalidMessage: It holds a bad message (nothing is written).
            ConflictError: The conversation holds messages and ``replace`` is False
                (nothing is written).
        """
        if not isinstance(data, Mapping) or data.get("format") != FORMAT:
            raise ValueError(f"not an exported memoryd session (expected format {FORMAT!r})")
        for part in ("settings", "memo"):  # checked before anything is written
            value = data.get(part)
            if value is not None and not isinstance(value, Mapping):
                raise ValueError(
                    f"an exported session's {part} must be an object, not "
                    f"{type(value).__name__}"
                )
        settings = dict(data.get("settings") or {})
        session = cls(
            conversation_id or data.get("id"),
            provider,
            max_length=settings.pop("max_length", 12000),
            settings=settings,
            input_keys=data.get("input_keys"),
            reply_keys=data.get("reply_keys"),
        )
        history = as_messages(data.get("full_context") or [])
        memo = _checked_memo(data.get("memo") or {})
        session._check_replace(replace)
        session._replace(history)
        session._memo = None
        session.set_memo(memo)
        session._window = None
        return session

    @classmethod
    def load_json(
        cls,
        text: str,
        provider: ProviderOrStore = None,
        *,
        conversation_id: str | None = None,
        replace: bool = False,
    ) -> Session:
        """Restore a session from `to_json` text (see `from_dict`).

        Raises:
            ValueError: The text is not JSON of an exported session.
            ConflictError: The conversation holds messages and ``replace`` is False.
        """
        return cls.from_dict(
            parse(text, "json"), provider, conversation_id=conversation_id, replace=replace
        )

    @classmethod
    def load_yaml(
        cls,
        text: str,
        provider: ProviderOrStore = None,
        *,
        conversation_id: str | None = None,
        replace: bool = False,
    ) -> Session:
        """Restore a session from `to_yaml` text (see `from_dict`).

        Raises:
            ValueError: The text is not YAML of an exported session.
            ConflictError: The conversation holds messages and ``replace`` is False.
        """
        return cls.from_dict(
            parse(text, "yaml"), provider, conversation_id=conversation_id, replace=replace
        )

    def __repr__(self) -> str:
        return f"<Session {self._cid!r}>"
