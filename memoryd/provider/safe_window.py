"""The safe window: the last ``n`` messages that an OpenAI-compatible API accepts.

Pure: no I/O, inputs never mutated. The message dicts of the result are the input's
own (not copied).

A *tool exchange* is an assistant message with ``tool_calls`` followed directly by the
tool messages answering each of its calls. Trimming may cut one in half; the API then
rejects the request ("tool message without a preceding tool_calls", "tool_calls must be
followed by tool messages responding to each tool_call_id"). `repair` drops the broken
parts, `safe_window` trims and repairs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from memoryd.errors import InvalidMessage
from memoryd.messages import SYSTEM_ROLES

__all__ = ["check_messages", "check_window", "repair", "safe_window", "units"]

Message = dict[str, Any]


def check_window(n: Any, name: str = "n") -> int:
    """Check a window size.

    Args:
        n: The candidate size.
        name: The argument's name, for the error.

    Returns:
        ``n`` as a plain int.

    Raises:
        ValueError: ``n`` is not an int >= 0 (a bool is refused too).
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"{name} must be an int >= 0 (a number of messages), not {n!r}")
    return int(n)


def check_messages(messages: Any) -> list[Message]:
    """Check that ``messages`` is a list or tuple of message dicts with a role.

    Args:
        messages: The candidate list.

    Returns:
        A new list holding the same dicts.

    Raises:
        InvalidMessage: It is not a list or tuple, or an item is not a dict with a role.
    """
    if not isinstance(messages, list | tuple):
        raise InvalidMessage(
            f"messages must be a list of message dicts, got {type(messages).__name__}"
        )
    for index, message in enumerate(messages):
        if type(message) is dict and type(message.get("role")) is str:
            continue  # the usual case, without the ABC check below
        if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
            raise InvalidMessage(
                f"messages[{index}] must be a message dict with a str 'role', got {message!r:.80}"
            )
    return list(messages)


def _call_ids(message: Mapping[str, Any]) -> list[str]:
    if message.get("role") != "assistant":
        return []
    ids: list[str] = []
    for call in message.get("tool_calls") or ():
        call_id = call.get("id") if type(call) is dict or isinstance(call, Mapping) else None
        ids.append(call_id if isinstance(call_id, str) else "")
    return ids


def units(messages: Sequence[Message]) -> list[list[Message]]:
    """Group messages into the units trimming must keep whole; drop what is broken.

    A unit is one message, or a complete tool exchange (the assistant message with
    ``tool_calls`` and the answers to all of its calls, in their order). Tool messages
    that answer no call of the exchange right before them, and exchanges missing an
    answer, are left out.

    Args:
        messages: Messages, oldest first (system messages included as single units).

    Returns:
        The units, oldest first.
    """
    out: list[list[Message]] = []
    i, size = 0, len(messages)
    while i < size:
        message = messages[i]
        role = message.get("role")
        ids = _call_ids(message) if role == "assistant" else None
        if ids:
            wanted = set(ids)
            answers: list[Message] = []
            j = i + 1
            while j < size and messages[j].get("role") == "tool":
                reply = messages[j]
                call_id = reply.get("tool_call_id")
                if call_id in wanted:
                    wanted.discard(call_id)
                    answers.append(reply)
                j += 1
            if not wanted and "" not in ids and len(set(ids)) == len(ids):
                out.append([message, *answers])
            i = j
            continue
        if role != "tool":
            out.append([message])
        i += 1
    return out


def repair(messages: Sequence[Message]) -> list[Message]:
    """Drop orphan tool results and tool calls that are not fully answered.

    Args:
        messages: Messages, oldest first.

    Returns:
        The messages that form complete units, in order (a subsequence of the input).
    """
    return [message for unit in units(messages) for message in unit]


def safe_window(messages: Sequence[Message], n: int) -> list[Message]:
    """The last ``n`` non-system messages, made safe to send, after every system message.

    System (and developer) messages are all kept, moved to the head in their order, and
    not counted. Of the others, the last ``n`` are taken; then a tool result whose
    assistant tool call fell outside the window is dropped, and so is an assistant tool
    call missing any of its results (with the results it has), for example a dangling
    call at the end left by a crashed run. The result may hold fewer than ``n`` messages.

    Args:
        messages: The conversation, oldest first. Not mutated.
        n: How many non-system messages to keep at most (0 keeps only system messages).

    Returns:
        A new list (sharing the input's message dicts).

    Raises:
        ValueError: ``n`` is not an int >= 0.
        InvalidMessage: ``messages`` is not a list of message dicts.
    """
    n = check_window(n)
    items = check_messages(messages)
    system: list[Message] = []
    others: list[Message] = []
    for message in items:
        (system if message.get("role") in SYSTEM_ROLES else others).append(message)
    tail = others[-n:] if n else []
    return system + repair(tail)
