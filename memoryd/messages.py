"""Chat messages: builders and validation (OpenAI Chat Completions format).

Messages are plain dicts, so they go straight to any OpenAI-compatible client::

    {"role": "user", "content": "My name is Alice"}
    {"role": "assistant", "content": None,
     "tool_calls": [{"id": "call_1", "type": "function",
                     "function": {"name": "lookup", "arguments": "{\\"q\\":\\"x\\"}"}}]}
    {"role": "tool", "tool_call_id": "call_1", "content": "42"}

`validate` returns a normalised deep copy (tuples become lists, str/int/float subclasses
become plain values, ``tool_calls: None`` or ``[]`` is dropped, an assistant with tool_calls
and no content gets ``content: None``) or raises `InvalidMessage` naming the problem.
`check` does the same for a batch and returns a `CheckedMessages`: a tuple that carries
the fact that its messages were checked, with their encoded sizes, so a store, a
provider or an agent handed one takes it as it is instead of copying and checking again.
Every check of a message, whichever function is called, runs once per message here.
The builders return messages that already passed `validate` (without a size limit: the
size limit belongs to the store that receives them). The checks of a message's role,
content and tool fields are in the private `memoryd._message_checks`; the deep copy and
the compact encoding in `memoryd._json_values`; the one function that checks a message,
`check` and `CheckedMessages` in `memoryd._message_batch`.

Everything here is pure: no I/O, no clocks, inputs are never mutated.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias

from memoryd import _message_batch as _batch
from memoryd._json_values import (
    COMPACT,
    MAX_NESTING_DEPTH,
    compact_json_bytes,
    copy_json_or_raise,
)
from memoryd._message_batch import DEFAULT_MAX_MESSAGE_BYTES, CheckedMessages, check
from memoryd._message_checks import ROLES, check_tool_call, type_name
from memoryd._shown import shown
from memoryd.errors import InvalidConversationId, InvalidMessage

__all__ = [
    "DEFAULT_MAX_MESSAGE_BYTES",
    "MAX_CONVERSATION_ID_BYTES",
    "MAX_NESTING_DEPTH",
    "ROLES",
    "SYSTEM_ROLES",
    "CheckedMessages",
    "Content",
    "Message",
    "assistant",
    "check",
    "developer",
    "encoded_size",
    "is_system",
    "system",
    "tool",
    "tool_call",
    "tool_call_ids",
    "user",
    "validate",
    "validate_conversation_id",
    "validate_many",
    "validate_turn_conversation_id",
]

Message: TypeAlias = dict[str, Any]
"""A chat message: a JSON-compatible dict with at least a ``role``."""

Content: TypeAlias = str | Sequence[Mapping[str, Any]]
"""Message content: a str, or a list of content-part dicts each with a str ``type``."""

MAX_CONVERSATION_ID_BYTES = 256
"""The longest conversation id, in UTF-8 bytes."""

BOOKKEEPING_PREFIX = "memoryd.run/"
"""Conversation ids memoryd keeps for itself (run journals, instance leases): a store
lists them only when asked by this prefix, and no turn is written there
(`validate_turn_conversation_id`)."""

SYSTEM_ROLES = frozenset({"developer", "system"})
"""Roles that count as system messages everywhere."""


def encoded_size(message: Mapping[str, Any]) -> int:
    """Measure a message as the length of its compact JSON in UTF-8 bytes.

    This is the size `validate` compares with ``max_bytes``.

    Args:
        message: A JSON-compatible message.

    Returns:
        The size in bytes.

    Raises:
        InvalidMessage: The message is not JSON-compatible.
    """
    return len(compact_json_bytes(copy_json_or_raise(message, "message")))


# --------------------------------------------------------------------------- validation


def validate(
    message: Mapping[str, Any], *, max_bytes: int | None = DEFAULT_MAX_MESSAGE_BYTES
) -> Message:
    """Check a message and return a normalised deep copy of it.

    Args:
        message: An OpenAI-format chat message.
        max_bytes: The largest allowed compact-JSON size in UTF-8 bytes; None for no limit.

    Returns:
        A deep copy made of plain dicts, lists and scalars; mutating it changes nothing
        the caller holds.

    Raises:
        InvalidMessage: The message is not a dict, has a bad role, content, tool_call_id or
            tool_calls, holds a value that is not JSON-compatible, nests too deeply, or is
            larger than ``max_bytes``.
    """
    return _batch.check_message(message, max_bytes)[0]


def validate_many(
    messages: Sequence[Mapping[str, Any]], *, max_bytes: int | None = DEFAULT_MAX_MESSAGE_BYTES
) -> list[Message]:
    """Validate a non-empty batch of messages.

    Args:
        messages: A list or tuple of messages.
        max_bytes: The per-message size limit passed to `validate`.

    Returns:
        Normalised deep copies, in order (fresh copies even of a `CheckedMessages`).

    Raises:
        InvalidMessage: ``messages`` is not a non-empty list or tuple, or one message is
            invalid (the error names its index).
    """
    _batch.check_batch_type(messages)
    out: list[Message] = []
    for index, message in enumerate(messages):
        try:
            out.append(_batch.check_message(message, max_bytes)[0])
        except InvalidMessage as exc:
            raise InvalidMessage(f"messages[{index}]: {exc}") from exc
    return out


def validate_conversation_id(cid: Any) -> str:
    """Check a conversation id.

    Args:
        cid: The candidate id.

    Returns:
        The id as a plain str.

    Raises:
        InvalidConversationId: ``cid`` is not a str, is empty, has a control character or a
            lone surrogate, or is longer than 256 UTF-8 bytes.
    """
    if not isinstance(cid, str):
        raise InvalidConversationId(f"conversation id must be a str, got {type_name(cid)}")
    if not cid:
        raise InvalidConversationId("conversation id is empty; give a non-empty str")
    if len(cid) > MAX_CONVERSATION_ID_BYTES:  # more characters than bytes allowed: too long
        size = len(cid.encode("utf-8", "surrogatepass"))
        raise InvalidConversationId(
            f"conversation id is {size} bytes; the limit is {MAX_CONVERSATION_ID_BYTES}"
        )
    # printable ids (the usual case) hold no control character and no surrogate
    for index, char in enumerate("" if cid.isprintable() else cid):
        category = unicodedata.category(char)
        if category == "Cc":
            raise InvalidConversationId(
                f"conversation id has the control character U+{ord(char):04X} at index "
                f"{index}; remove it"
            )
        if category == "Cs":
            raise InvalidConversationId(
                f"conversation id has the lone surrogate U+{ord(char):04X} at index {index}, "
                "which cannot be encoded as UTF-8"
            )
    size = len(cid.encode("utf-8"))
    if size > MAX_CONVERSATION_ID_BYTES:
        raise InvalidConversationId(
            f"conversation id is {size} bytes; the limit is {MAX_CONVERSATION_ID_BYTES}"
        )
    return str(cid)


def validate_turn_conversation_id(cid: Any) -> str:
    """Check the id of a conversation that turns are written to (an agent's run, a
    session, a kernel's memory): a valid conversation id outside `BOOKKEEPING_PREFIX`,
    memoryd's own space (run journals and instance leases, which a turn written there
    would hide from listings or corrupt).

    Args:
        cid: The candidate id.

    Returns:
        The id as a plain str.

    Raises:
        InvalidConversationId: ``cid`` is not a valid conversation id, or is in
            memoryd's own space.
    """
    checked = validate_conversation_id(cid)
    if checked.startswith(BOOKKEEPING_PREFIX):
        raise InvalidConversationId(
            f"conversation id {shown(checked, 60)} starts with {BOOKKEEPING_PREFIX!r}, "
            "memoryd's own space (run journals and leases); choose another id"
        )
    return checked


# --------------------------------------------------------------------------- helpers


def is_system(message: Mapping[str, Any]) -> bool:
    """Tell whether a message is a system message (role system or developer).

    Args:
        message: A message.

    Returns:
        True for system and developer messages.
    """
    return message.get("role") in SYSTEM_ROLES


def tool_call_ids(message: Mapping[str, Any]) -> list[str]:
    """List the ids of the tool calls an assistant message makes.

    Args:
        message: A validated message.

    Returns:
        The ids in order; empty when the message makes no tool calls.
    """
    calls = message.get("tool_calls") or []
    return [call["id"] for call in calls]


# --------------------------------------------------------------------------- builders


def _build(message: Message) -> Message:
    return validate(message, max_bytes=None)


def system(text: Content) -> Message:
    """Build a system message: the instructions the model follows.

    Args:
        text: The instructions, a str or a list of content parts.

    Returns:
        ``{"role": "system", "content": text}``, validated.

    Raises:
        InvalidMessage: ``text`` is not valid content.
    """
    return _build({"role": "system", "content": text})


def developer(text: Content) -> Message:
    """Build a developer message: `system` under the newer role name.

    It counts as a system message everywhere (`is_system`, `SYSTEM_ROLES`).

    Args:
        text: The instructions, as for `system`.

    Returns:
        The validated message, with role ``developer``.

    Raises:
        InvalidMessage: ``text`` is not valid content.
    """
    return _build({"role": "developer", "content": text})


def user(text: Content) -> Message:
    """Build a user message.

    Args:
        text: What the user said, a str or a list of content parts (text, images, ...).

    Returns:
        ``{"role": "user", "content": text}``, validated.

    Raises:
        InvalidMessage: ``text`` is not a str or a non-empty list of content parts.
    """
    return _build({"role": "user", "content": text})


def assistant(
    text: Content | None = None, *, tool_calls: Sequence[Mapping[str, Any]] | None = None
) -> Message:
    """Build an assistant message.

    Args:
        text: The reply; may be None only when ``tool_calls`` is given.
        tool_calls: Tool calls built with `tool_call`.

    Returns:
        The validated message; ``tool_calls`` is present only when non-empty.

    Raises:
        InvalidMessage: Neither text nor tool calls are given, or one is invalid.
    """
    message: Message = {"role": "assistant", "content": text}
    if tool_calls:
        message["tool_calls"] = list(tool_calls)
    return _build(message)


def tool_call(id: str, name: str, arguments: Mapping[str, Any] | str) -> Message:
    """Build one tool call for `assistant`.

    Args:
        id: The call id, echoed by the tool message that answers it.
        name: The function name.
        arguments: The arguments as a dict (encoded as compact JSON) or an already
            JSON-encoded str (kept verbatim).

    Returns:
        ``{"id": id, "type": "function", "function": {"name": name, "arguments": ...}}``.

    Raises:
        InvalidMessage: The id or name is not a non-empty str, or the arguments are not a
            dict of JSON values or a str.
    """
    if isinstance(arguments, Mapping):
        plain = copy_json_or_raise(arguments, "arguments")
        encoded = COMPACT.encode(plain)
    elif isinstance(arguments, str):
        encoded = str(arguments)
    else:
        raise InvalidMessage(
            f"tool call arguments must be a dict or a JSON str, got {type_name(arguments)}"
        )
    call = {"id": id, "type": "function", "function": {"name": name, "arguments": encoded}}
    copy: Message = copy_json_or_raise(call, "tool_call")
    check_tool_call(copy, "tool_call")
    return copy


def tool(tool_call_id: str, content: Content) -> Message:
    """Build a tool message answering one tool call.

    Args:
        tool_call_id: The id of the call this answers.
        content: The tool's result, a str or a list of content parts.

    Returns:
        The validated message.

    Raises:
        InvalidMessage: The id is not a non-empty str, or the content is invalid.
    """
    return _build({"role": "tool", "tool_call_id": tool_call_id, "content": content})
