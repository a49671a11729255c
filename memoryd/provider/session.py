"""Session: Agently's multi-turn chat container, on a memoryd conversation.

A session is bound to one conversation and a provider. ``full_context`` is the stored
history; ``context_window`` is what would be sent: the provider's `prepare` of it, then
the analysis handler picks a resize handler (by default ``simple_cut`` once the window
passes ``max_length`` characters). ``memo`` is a dict that resize handlers update; it is
persisted as a ``memo`` event in the conversation's log, so it survives restarts.

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
import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeAlias

import yaml

from memoryd import messages as msgs
from memoryd.errors import InvalidMessage
from memoryd.provider.budget import char_length, fit
from memoryd.provider.default import DefaultProvider
from memoryd.provider.protocol import MemoryProvider
from memoryd.store.handle import StoreHandle

__all__ = ["AnalysisHandler", "ResizeHandler", "Session"]

Message: TypeAlias = dict[str, Any]
AnalysisHandler: TypeAlias = Callable[
    [list[Message], list[Message], dict[str, Any], dict[str, Any]], "str | None"
]
"""``(full_context, context_window, memo, settings) -> resize handler name or None``."""
ResizeHandler: TypeAlias = Callable[
    [list[Message], list[Message], dict[str, Any], dict[str, Any]],
    "tuple[list[Message] | None, list[Message], dict[str, Any] | None]",
]
"""``(full_context, context_window, memo, settings) -> (full_context or None, window, memo)``."""

FORMAT = "memoryd.session/1"


def _check_keys(keys: Any, name: str) -> tuple[str, ...] | None:
    if keys is None:
        return None
    if isinstance(keys, str) or not isinstance(keys, Sequence):
        raise TypeError(f"{name} must be a list of dotted paths or None, not {keys!r:.80}")
    for key in keys:
        if not isinstance(key, str) or not key or "" in key.split("."):
            raise ValueError(f"{name} holds {key!r}; each must be a dotted path like 'input.q'")
    return tuple(keys)


def _pick(data: Any, path: str) -> tuple[bool, Any]:
    value = data
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return False, None
        value = value[part]
    return True, value


def _render(data: Any, keys: tuple[str, ...] | None) -> str:
    if keys is None:
        if isinstance(data, str):
            return data
        return json.dumps(data, ensure_ascii=False)
    chosen = {}
    for key in keys:
        found, value = _pick(data, key)
        if found:
            chosen[key] = value
    return json.dumps(chosen, ensure_ascii=False)


def _as_list(messages: Any) -> list[Message]:
    if isinstance(messages, Mapping):
        messages = [messages]
    if not isinstance(messages, list | tuple):
        raise InvalidMessage(
            f"chat history must be a message dict or a list of them, got {type(messages).__name__}"
        )
    return msgs.validate_many(messages, max_bytes=None) if messages else []


def _simple_cut(
    full_context: list[Message],
    context_window: list[Message],
    memo: dict[str, Any],
    settings: dict[str, Any],
) -> tuple[None, list[Message], dict[str, Any]]:
    return None, fit(context_window, int(settings["max_length"]), char_length), memo


class Session:
    """One conversation seen the Agently way.

    Args:
        conversation_id: The conversation (default: a new ``session-<hex>`` id).
        provider: A provider with a ``store`` (`DefaultProvider`, `SummarizingProvider`),
            a store handle (wrapped in a `DefaultProvider`), or None for the default store.
        max_length: The ``simple_cut`` budget in characters of compact JSON; None for
            no length control.
        settings: JSON-compatible settings passed to handlers (``max_length`` is added).
        input_keys: Dotted paths of the prompt data `record_turn` records (None: all).
        reply_keys: Dotted paths of the reply data `record_turn` records (None: all).

    Raises:
        InvalidConversationId: A bad ``conversation_id``.
        TypeError: ``provider`` has no ``store``; bad keys or settings.
        ValueError: ``max_length`` is not None or an int >= 1.
    """

    def __init__(
        self,
        conversation_id: str | None = None,
        provider: MemoryProvider | StoreHandle | None = None,
        *,
        max_length: int | None = 12000,
        settings: Mapping[str, Any] | None = None,
        input_keys: Sequence[str] | None = None,
        reply_keys: Sequence[str] | None = None,
    ) -> None:
        if conversation_id is None:
            conversation_id = f"session-{uuid.uuid4().hex}"
        self._cid = msgs.validate_conversation_id(conversation_id)
        if provider is None:
            provider = DefaultProvider.on_default_store()
        elif isinstance(provider, StoreHandle):
            provider = DefaultProvider(provider)
        if not hasattr(provider, "store") or not isinstance(provider, MemoryProvider):
            raise TypeError(
                "Session needs a MemoryProvider with a .store (DefaultProvider, "
                f"SummarizingProvider) or a store handle, got {provider!r:.80}"
            )
        self._provider: MemoryProvider = provider
        if max_length is not None and (
            isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 1
        ):
            raise ValueError(f"max_length must be an int >= 1 or None, not {max_length!r}")
        if settings is not None and not isinstance(settings, Mapping):
            raise TypeError(f"settings must be a mapping or None, not {type(settings).__name__}")
        self._settings: dict[str, Any] = dict(settings or {})
        self._settings["max_length"] = max_length
        self.input_keys = _check_keys(input_keys, "input_keys")
        self.reply_keys = _check_keys(reply_keys, "reply_keys")
        self._analysis: AnalysisHandler = self._default_analysis
        self._resize: dict[str, ResizeHandler] = {"simple_cut": _simple_cut}
        self._memo: dict[str, Any] | None = None
        self._window: list[Message] | None = None

    # -- properties ------------------------------------------------------------------

    @property
    def id(self) -> str:
        """The conversation id."""
        return self._cid

    @property
    def provider(self) -> MemoryProvider:
        """The provider."""
        return self._provider

    @property
    def store(self) -> StoreHandle:
        """The provider's store."""
        store: StoreHandle = self._provider.store  # type: ignore[attr-defined]
        return store

    @property
    def settings(self) -> dict[str, Any]:
        """A copy of the settings handlers receive."""
        return copy.deepcopy(self._settings)

    @property
    def full_context(self) -> list[Message]:
        """The whole stored history (fresh copies)."""
        return self.store.get(self._cid)

    @property
    def context_window(self) -> list[Message]:
        """What the next request would send (computed on first use and after each change)."""
        if self._window is None:
            self.refresh()
        assert self._window is not None
        return copy.deepcopy(self._window)

    @property
    def memo(self) -> dict[str, Any]:
        """The latest persisted memo (a copy; ``{}`` when none was set)."""
        if self._memo is None:
            self._memo = {}
            for event in self.store.events(self._cid):
                if event.kind == "memo":
                    self._memo = dict(event.data or {})
        return copy.deepcopy(self._memo)

    def set_memo(self, memo: Mapping[str, Any]) -> None:
        """Persist ``memo`` as a ``memo`` event (nothing is written when it is unchanged).

        Args:
            memo: A JSON-compatible mapping.

        Raises:
            TypeError: ``memo`` is not a mapping.
            ValueError: It is not JSON-compatible.
        """
        if not isinstance(memo, Mapping):
            raise TypeError(f"memo must be a dict, not {type(memo).__name__}")
        if dict(memo) == self.memo:
            return
        self.store.record(self._cid, "memo", data=memo)
        self._memo = copy.deepcopy(dict(memo))

    # -- handlers ---------------------------------------------------------------------

    def _default_analysis(
        self,
        full_context: list[Message],
        context_window: list[Message],
        memo: dict[str, Any],
        settings: dict[str, Any],
    ) -> str | None:
        limit = settings.get("max_length")
        if limit is not None and sum(char_length(m) for m in context_window) > limit:
            return "simple_cut"
        return None

    def register_analysis_handler(self, handler: AnalysisHandler) -> Session:
        """Replace the analysis handler, which names the resize handler to run (or None).

        Args:
            handler: ``(full_context, context_window, memo, settings) -> str | None``.

        Returns:
            The session (for chaining).

        Raises:
            TypeError: ``handler`` is not callable.
        """
        if not callable(handler):
            raise TypeError(f"an analysis handler must be callable, not {handler!r:.80}")
        self._analysis = handler
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
        if not isinstance(name, str) or not name:
            raise TypeError(f"a resize handler needs a non-empty str name, not {name!r}")
        if not callable(handler):
            raise TypeError(f"resize handler {name!r} must be callable, not {handler!r:.80}")
        self._resize[name] = handler
        self._window = None
        return self

    def refresh(self) -> list[Message]:
        """Recompute the context window, running the handlers; persist a changed memo.

        A resize handler returning a full context (not None) replaces the stored history.

        Returns:
            The new context window (a copy).

        Raises:
            ValueError: The analysis handler named an unregistered resize handler.
            TypeError: A resize handler returned something other than a 3-tuple.
        """
        full = self.full_context
        window = self._provider.prepare(self._cid, copy.deepcopy(full))
        memo = self.memo
        name = self._analysis(copy.deepcopy(full), copy.deepcopy(window), memo, self.settings)
        if name is not None:
            handler = self._resize.get(name)
            if handler is None:
                raise ValueError(
                    f"the analysis handler chose {name!r} but the resize handlers are "
                    f"{sorted(self._resize)}; register it with register_resize_handler"
                )
            result = handler(copy.deepcopy(full), window, self.memo, self.settings)
            if not isinstance(result, tuple) or len(result) != 3:
                raise TypeError(
                    f"resize handler {name!r} must return (full_context or None, "
                    f"context_window, memo or None), returned {result!r:.80}"
                )
            new_full, new_window, new_memo = result
            window = _as_list(new_window)
            if new_full is not None:
                self._replace(_as_list(new_full))
            if new_memo is not None:
                self.set_memo(new_memo)
        self._window = window
        return copy.deepcopy(window)

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
        batch = _as_list(messages)
        if batch:
            self._provider.append(self._cid, batch)
        self.refresh()
        return self

    def set_chat_history(self, messages: Sequence[Message]) -> Session:
        """Replace the history with ``messages`` (a clear, then one write).

        Args:
            messages: The new history.

        Returns:
            The session (for chaining).

        Raises:
            InvalidMessage: A bad message (nothing is changed).
        """
        memo = self.memo
        self._replace(_as_list(messages))
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
        user = msgs.user(_render(prompt, self.input_keys))
        assistant = msgs.assistant(_render(reply, self.reply_keys))
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
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=2)

    def to_yaml(self) -> str:
        """The session as YAML text (see `to_dict`)."""
        return str(yaml.safe_dump(self.to_dict(), allow_unicode=True, sort_keys=False))

    @classmethod
    def from_dict(
        cls,
        data: Mapping[str, Any],
        provider: MemoryProvider | StoreHandle | None = None,
        *,
        conversation_id: str | None = None,
    ) -> Session:
        """Restore an exported session into a store, replacing that conversation's history.

        Args:
            data: What `to_dict` returned.
            provider: Where to restore it (as in the constructor).
            conversation_id: The conversation to write (default: the exported id).

        Returns:
            The restored session.

        Raises:
            ValueError: ``data`` is not an exported session.
            InvalidMessage: It holds a bad message.
        """
        if not isinstance(data, Mapping) or data.get("format") != FORMAT:
            raise ValueError(f"not an exported memoryd session (expected format {FORMAT!r})")
        settings = dict(data.get("settings") or {})
        session = cls(
            conversation_id or data.get("id"),
            provider,
            max_length=settings.pop("max_length", 12000),
            settings=settings,
            input_keys=data.get("input_keys"),
            reply_keys=data.get("reply_keys"),
        )
        history = _as_list(data.get("full_context") or [])
        session._replace(history)
        session._memo = None
        session.set_memo(dict(data.get("memo") or {}))
        session._window = None
        return session

    @classmethod
    def load_json(
        cls,
        text: str,
        provider: MemoryProvider | StoreHandle | None = None,
        *,
        conversation_id: str | None = None,
    ) -> Session:
        """Restore a session from `to_json` text (see `from_dict`).

        Raises:
            ValueError: The text is not JSON of an exported session.
        """
        try:
            data = json.loads(text)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"session JSON does not parse: {exc}") from None
        return cls.from_dict(data, provider, conversation_id=conversation_id)

    @classmethod
    def load_yaml(
        cls,
        text: str,
        provider: MemoryProvider | StoreHandle | None = None,
        *,
        conversation_id: str | None = None,
    ) -> Session:
        """Restore a session from `to_yaml` text (see `from_dict`).

        Raises:
            ValueError: The text is not YAML of an exported session.
        """
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ValueError(f"session YAML does not parse: {exc}") from None
        return cls.from_dict(data, provider, conversation_id=conversation_id)

    def __repr__(self) -> str:
        return f"<Session {self._cid!r}>"
