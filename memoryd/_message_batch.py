"""Checked messages: the one check of a message, and the batch that carries the fact.

`check_message` is the only function that checks a message (its JSON values with
`memoryd._json_values`, its fields with `memoryd._message_checks`, its compact size);
`check` runs it once per message of a batch and returns a `CheckedMessages`, which
whoever receives it takes as it is. Pure; `memoryd.messages` re-exports `check` and
`CheckedMessages` and builds `validate` on `check_message`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias, final

from memoryd._json_values import compact_json_bytes, copy_json_or_raise
from memoryd._message_checks import ROLES, check_structure, type_name
from memoryd.errors import InvalidMessage

__all__ = [
    "DEFAULT_MAX_MESSAGE_BYTES",
    "CheckedMessages",
    "check",
    "check_batch_type",
    "check_message",
    "too_large",
]

Message: TypeAlias = dict[str, Any]

DEFAULT_MAX_MESSAGE_BYTES = 1 << 20
"""Default limit on one message's compact-JSON size in UTF-8 bytes (1 MiB)."""

_TEXT_ROLES = ROLES - {"tool"}
"""The roles whose message may be a role and a str content alone (a tool message also
needs its ``tool_call_id``)."""
_TEXT_BYTES = len('{"role":"","content":}')
"""The compact JSON of such a message, less its role and its quoted content."""
_quote = json.encoder.encode_basestring  # the quoting `compact_json_bytes` does


def check_message(message: Any, max_bytes: int | None) -> tuple[Message, int]:
    """Check one message: its normalised deep copy and its compact-JSON size in bytes.

    The one place a message is checked: `memoryd.messages.validate`, ``validate_many``,
    `check` and the message builders all come here, once per message.

    Args:
        message: An OpenAI-format chat message.
        max_bytes: The largest allowed compact-JSON size in UTF-8 bytes; None for no limit.

    Returns:
        The copy and its size.

    Raises:
        InvalidMessage: As `memoryd.messages.validate`.
    """
    if type(message) is dict and len(message) == 2:  # most messages: a role and a text
        role = message.get("role")
        content = message.get("content")
        if type(content) is str and type(role) is str and role in _TEXT_ROLES:
            try:  # the size `compact_json_bytes` measures, without copying the walk
                size = _TEXT_BYTES + len(role) + len(_quote(content).encode("utf-8"))
            except UnicodeEncodeError:
                pass  # a lone surrogate: the walk below names it
            else:
                if max_bytes is not None and size > max_bytes:
                    raise InvalidMessage(too_large(size, max_bytes))
                return message.copy(), size  # str values: a shallow copy is a deep one
    if type(message) is not dict and not isinstance(message, Mapping):
        raise InvalidMessage(
            f"a message must be a dict with 'role' and 'content', got {type_name(message)}"
        )
    copy: Message = copy_json_or_raise(message, "message")
    check_structure(copy)
    size = len(compact_json_bytes(copy))
    if max_bytes is not None and size > max_bytes:
        raise InvalidMessage(too_large(size, max_bytes))
    return copy, size


def too_large(size: int, max_bytes: int) -> str:
    """The error text of a message of ``size`` bytes over the limit ``max_bytes``."""
    return (
        f"message is {size} bytes as compact JSON; the limit is {max_bytes}. "
        "Split it, or raise the store's max_message_bytes"
    )


def check_batch_type(messages: Any) -> None:
    """Refuse anything but a non-empty list or tuple, with `InvalidMessage`."""
    if not isinstance(messages, list | tuple):
        raise InvalidMessage(
            f"messages must be a list or tuple of message dicts, got {type_name(messages)}"
        )
    if not messages:
        raise InvalidMessage("messages is empty; give at least one message")


_MINT = object()  # only `check` (and `CheckedMessages.join`) make CheckedMessages


@final
class CheckedMessages(tuple[Message, ...]):
    """A non-empty batch of messages `check` normalised: the proof they need no more checks.

    A tuple of message dicts (it goes wherever a list of messages goes, and is
    accepted by every store method, provider and agent that takes messages), made
    only by `check`. Whoever receives one takes its messages as they are: no copy and
    no second check, only its size limit compared with `sizes`. Its messages belong
    to it: do not mutate them (a plain list is what a caller who mutates passes).

    Attributes:
        sizes: Each message's compact-JSON size in UTF-8 bytes, in order.
    """

    sizes: tuple[int, ...]

    def __new__(
        cls, messages: Sequence[Message], sizes: Sequence[int], mint: object = None
    ) -> CheckedMessages:
        if mint is not _MINT:
            raise TypeError("CheckedMessages are made by memoryd.messages.check(messages)")
        return _make(tuple(messages), tuple(sizes))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"CheckedMessages is immutable; cannot set {name!r}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (tuple(self), self.sizes))

    def join(self, other: CheckedMessages) -> CheckedMessages:
        """This batch followed by ``other``, still checked (nothing is checked again).

        Args:
            other: Another checked batch.

        Returns:
            The joined batch.

        Raises:
            TypeError: ``other`` is not a `CheckedMessages`.
        """
        if not isinstance(other, CheckedMessages):
            raise TypeError(f"join takes CheckedMessages, not {type(other).__name__}")
        return _make((*self, *other), (*self.sizes, *other.sizes))

    def __repr__(self) -> str:
        return f"CheckedMessages({list(self)!r})"


def _make(messages: Sequence[Message], sizes: tuple[int, ...]) -> CheckedMessages:
    made = tuple.__new__(CheckedMessages, messages)
    made.__dict__["sizes"] = sizes  # past the __setattr__ that keeps it immutable
    return made


def _rebuild(messages: tuple[Message, ...], sizes: tuple[int, ...]) -> CheckedMessages:
    return _make(messages, tuple(sizes))


def check(
    messages: Sequence[Mapping[str, Any]], *, max_bytes: int | None = DEFAULT_MAX_MESSAGE_BYTES
) -> CheckedMessages:
    """Check a non-empty batch once and return it as a `CheckedMessages`.

    A plain list or tuple is fully checked, as `validate_many` does: normalised deep
    copies, so the caller's later changes to it change nothing. A `CheckedMessages`
    is returned as it is, after only comparing its recorded sizes with ``max_bytes``.

    Args:
        messages: A list or tuple of messages, or a `CheckedMessages`.
        max_bytes: The per-message size limit; None for no limit.

    Returns:
        The checked batch.

    Raises:
        InvalidMessage: ``messages`` is not a non-empty list or tuple, or one message is
            invalid or larger than ``max_bytes`` (the error names its index).
    """
    if isinstance(messages, CheckedMessages):
        if max_bytes is not None:
            for index, size in enumerate(messages.sizes):
                if size > max_bytes:
                    raise InvalidMessage(f"messages[{index}]: {too_large(size, max_bytes)}")
        return messages
    kind = type(messages)
    if (kind is not list and kind is not tuple) or not messages:
        check_batch_type(messages)
    if len(messages) == 1:  # one input, one reply, one tool result: most batches
        try:
            copy, size = check_message(messages[0], max_bytes)
        except InvalidMessage as exc:
            raise InvalidMessage(f"messages[0]: {exc}") from exc
        return _make((copy,), (size,))
    copies: list[Message] = []
    sizes: list[int] = []
    index = 0
    try:
        for index, message in enumerate(messages):  # noqa: B007 (named in the error)
            copy, size = check_message(message, max_bytes)
            copies.append(copy)
            sizes.append(size)
    except InvalidMessage as exc:
        raise InvalidMessage(f"messages[{index}]: {exc}") from exc
    return _make(copies, tuple(sizes))
