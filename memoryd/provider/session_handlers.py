"""Session window handlers: an analysis handler names a resize handler to run. Pure.

A `Session` asks its `WindowHandlers` what to do with the window its provider prepared:
the analysis handler looks at ``(full_context, context_window, memo, settings)`` and
returns the name of a resize handler, or None to keep the window. The named resize
handler returns ``(full_context or None, context_window, memo or None)``; `run` checks
that result and hands back a `Resized` for the session to apply. By default the analysis
picks ``simple_cut`` once the window passes ``settings["max_length"]`` characters.

Nothing here touches a store: handlers receive copies and their results are validated.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from memoryd import messages as msgs
from memoryd.errors import InvalidMessage
from memoryd.provider.budget import char_length, fit

__all__ = [
    "AnalysisHandler",
    "ResizeHandler",
    "Resized",
    "WindowHandlers",
    "as_messages",
    "default_analysis",
    "settings_for",
    "simple_cut",
]

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


def as_messages(messages: Any) -> list[Message]:
    """Validate one message dict or a list of them, as a list.

    Args:
        messages: A message dict, or a list or tuple of them.

    Returns:
        The validated messages (``[]`` for an empty list).

    Raises:
        InvalidMessage: ``messages`` is neither, or holds a bad message.
    """
    if isinstance(messages, Mapping):
        messages = [messages]
    if not isinstance(messages, list | tuple):
        raise InvalidMessage(
            f"chat history must be a message dict or a list of them, got {type(messages).__name__}"
        )
    return msgs.validate_many(messages, max_bytes=None) if messages else []


def settings_for(max_length: Any, settings: Any) -> dict[str, Any]:
    """The settings handlers receive: ``settings`` with ``max_length`` added.

    Args:
        max_length: The ``simple_cut`` budget in characters, or None for no length control.
        settings: A mapping of JSON-compatible settings, or None.

    Returns:
        A new dict.

    Raises:
        ValueError: ``max_length`` is not None or an int >= 1.
        TypeError: ``settings`` is not a mapping or None.
    """
    if max_length is not None and (
        isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 1
    ):
        raise ValueError(f"max_length must be an int >= 1 or None, not {max_length!r}")
    if settings is not None and not isinstance(settings, Mapping):
        raise TypeError(f"settings must be a mapping or None, not {type(settings).__name__}")
    chosen: dict[str, Any] = dict(settings or {})
    chosen["max_length"] = max_length
    return chosen


def default_analysis(
    full_context: list[Message],
    context_window: list[Message],
    memo: dict[str, Any],
    settings: dict[str, Any],
) -> str | None:
    """Name ``simple_cut`` when the window passes ``settings["max_length"]`` characters.

    Args:
        full_context: The stored history.
        context_window: The window the provider prepared.
        memo: The current memo.
        settings: The session's settings (``max_length`` None: no length control).

    Returns:
        ``"simple_cut"`` or None.
    """
    limit = settings.get("max_length")
    if limit is not None and sum(char_length(m) for m in context_window) > limit:
        return "simple_cut"
    return None


def simple_cut(
    full_context: list[Message],
    context_window: list[Message],
    memo: dict[str, Any],
    settings: dict[str, Any],
) -> tuple[None, list[Message], dict[str, Any]]:
    """Keep the newest messages of the window that fit in ``settings["max_length"]``.

    Args:
        full_context: The stored history (kept as it is).
        context_window: The window to cut.
        memo: The current memo (returned as it is).
        settings: The session's settings, with an int ``max_length``.

    Returns:
        ``(None, the cut window, memo)``.
    """
    return None, fit(context_window, int(settings["max_length"]), char_length), memo


@dataclass(frozen=True, kw_only=True, slots=True)
class Resized:
    """What the handlers decided for one window.

    Attributes:
        window: The context window to send (validated).
        full_context: A history to store in place of the current one, or None to keep it.
        memo: A memo to persist, or None to keep the current one.
    """

    window: list[Message]
    full_context: list[Message] | None = None
    memo: Any = None


class WindowHandlers:
    """One analysis handler and the resize handlers it may name (``simple_cut`` built in)."""

    def __init__(self) -> None:
        self._analysis: AnalysisHandler = default_analysis
        self._resize: dict[str, ResizeHandler] = {"simple_cut": simple_cut}

    def set_analysis(self, handler: AnalysisHandler) -> None:
        """Replace the analysis handler.

        Args:
            handler: An `AnalysisHandler`.

        Raises:
            TypeError: ``handler`` is not callable.
        """
        if not callable(handler):
            raise TypeError(f"an analysis handler must be callable, not {handler!r:.80}")
        self._analysis = handler

    def add_resize(self, name: str, handler: ResizeHandler) -> None:
        """Register (or replace) the resize handler called ``name``.

        Args:
            name: The name the analysis handler returns.
            handler: A `ResizeHandler`.

        Raises:
            TypeError: ``name`` is not a non-empty str or ``handler`` is not callable.
        """
        if not isinstance(name, str) or not name:
            raise TypeError(f"a resize handler needs a non-empty str name, not {name!r}")
        if not callable(handler):
            raise TypeError(f"resize handler {name!r} must be callable, not {handler!r:.80}")
        self._resize[name] = handler

    @property
    def reads_full_context(self) -> bool:
        """False while only the built-in pair is registered (`default_analysis` and
        `simple_cut`), which look at the window alone: a run then need not read the
        whole history for them."""
        return self._analysis is not default_analysis or self._resize != {"simple_cut": simple_cut}

    def copy(self) -> WindowHandlers:
        """The same handlers in a new registry (registering on one leaves the other)."""
        twin = WindowHandlers()
        twin._analysis = self._analysis
        twin._resize = dict(self._resize)
        return twin

    def run(
        self,
        full_context: list[Message],
        context_window: list[Message],
        memo: dict[str, Any],
        settings: dict[str, Any],
    ) -> Resized:
        """Run the analysis handler, then the resize handler it names (if any).

        Each handler gets its own copies of ``full_context``, ``memo`` and ``settings``;
        the analysis handler also gets a copy of the window, which the resize handler
        then receives as it is.

        Args:
            full_context: The stored history.
            context_window: The window the provider prepared.
            memo: The current memo.
            settings: The session's settings.

        Returns:
            The window to send, and the history and memo to store (None: unchanged).

        Raises:
            ValueError: The analysis handler named an unregistered resize handler.
            TypeError: A resize handler returned something other than a 3-tuple.
            InvalidMessage: It returned a bad message.
        """
        name = self._analysis(
            copy.deepcopy(full_context),
            copy.deepcopy(context_window),
            copy.deepcopy(memo),
            copy.deepcopy(settings),
        )
        if name is None:
            return Resized(window=context_window)
        handler = self._resize.get(name)
        if handler is None:
            raise ValueError(
                f"the analysis handler chose {name!r} but the resize handlers are "
                f"{sorted(self._resize)}; register it with register_resize_handler"
            )
        result = handler(
            copy.deepcopy(full_context),
            context_window,
            copy.deepcopy(memo),
            copy.deepcopy(settings),
        )
        if not isinstance(result, tuple) or len(result) != 3:
            raise TypeError(
                f"resize handler {name!r} must return (full_context or None, "
                f"context_window, memo or None), returned {result!r:.80}"
            )
        new_full, new_window, new_memo = result
        window = as_messages(new_window)
        return Resized(
            window=window,
            full_context=None if new_full is None else as_messages(new_full),
            memo=new_memo,
        )
