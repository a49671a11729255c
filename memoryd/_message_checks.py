"""What a well-formed chat message looks like: its role, content and tool fields.

`check_structure` checks a message already deep-copied by
`memoryd._json_values.copy_json_or_raise`, normalising it in place (``tool_calls: None``
or ``[]`` is dropped; an assistant with tool_calls and no content gets ``content: None``);
every problem raises `InvalidMessage` naming the field. Pure functions;
`memoryd.messages.validate` runs them, and re-exports `ROLES`.
"""

from __future__ import annotations

from typing import Any

from memoryd._shown import shown
from memoryd.errors import InvalidMessage

__all__ = [
    "ROLES",
    "check_content_parts",
    "check_structure",
    "check_tool_call",
    "check_tool_calls",
    "type_name",
]

ROLES = frozenset({"assistant", "developer", "system", "tool", "user"})
"""Every role a message may have."""

_ROLE_LIST = ", ".join(sorted(ROLES))


def type_name(value: Any) -> str:
    """Name a value's type for an error message ("None" for None)."""
    return "None" if value is None else type(value).__name__


def check_content_parts(parts: list[Any], where: str) -> None:
    """Check a copied list of content parts: non-empty, each a dict with a str ``type``
    and, for a text part, a str ``text``.

    Args:
        parts: The copied ``content`` list.
        where: Its path, for error messages (``message.content``).

    Raises:
        InvalidMessage: A part is missing or malformed.
    """
    if not parts:
        raise InvalidMessage(f"{where} is an empty list; give a str or at least one content part")
    for index, part in enumerate(parts):
        at = f"{where}[{index}]"
        if not isinstance(part, dict):
            raise InvalidMessage(
                f"{at} must be a content-part dict with a str 'type', got {type_name(part)}"
            )
        kind = part.get("type")
        if not isinstance(kind, str) or not kind:
            raise InvalidMessage(f"{at}.type must be a non-empty str such as 'text', got {kind!r}")
        if kind == "text" and not isinstance(part.get("text"), str):
            raise InvalidMessage(
                f"{at} is a text part, so it needs a str 'text', got {type_name(part.get('text'))}"
            )


def check_tool_call(call: Any, where: str) -> str:
    """Check one copied tool call.

    Args:
        call: The copied tool call.
        where: Its path, for error messages (``message.tool_calls[0]``).

    Returns:
        The call's id.

    Raises:
        InvalidMessage: The call is not a dict with a non-empty str ``id``, ``type``
            ``"function"`` and a ``function`` dict holding a non-empty str ``name`` and
            a str ``arguments``.
    """
    if not isinstance(call, dict):
        raise InvalidMessage(f"{where} must be a tool-call dict, got {type_name(call)}")
    call_id = call.get("id")
    if not isinstance(call_id, str) or not call_id:
        raise InvalidMessage(f"{where}.id must be a non-empty str, got {call_id!r}")
    if call.get("type") != "function":
        raise InvalidMessage(f"{where}.type must be 'function', got {call.get('type')!r}")
    function = call.get("function")
    if not isinstance(function, dict):
        raise InvalidMessage(
            f"{where}.function must be a dict with 'name' and 'arguments', "
            f"got {type_name(function)}"
        )
    name = function.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidMessage(f"{where}.function.name must be a non-empty str, got {name!r}")
    if not isinstance(function.get("arguments"), str):
        raise InvalidMessage(
            f"{where}.function.arguments must be a JSON-encoded str, got "
            f"{type_name(function.get('arguments'))}; use messages.tool_call() to build it"
        )
    return call_id


def check_tool_calls(calls: Any) -> None:
    """Check a copied ``tool_calls`` value: a list of tool calls with unique ids.

    Raises:
        InvalidMessage: It is not a list, a call is malformed, or an id repeats.
    """
    if not isinstance(calls, list):
        raise InvalidMessage(
            f"message.tool_calls must be a list of tool calls, got {type_name(calls)}"
        )
    seen: set[str] = set()
    for index, call in enumerate(calls):
        call_id = check_tool_call(call, f"message.tool_calls[{index}]")
        if call_id in seen:
            raise InvalidMessage(
                f"message.tool_calls[{index}].id {call_id!r} appears twice; "
                "tool call ids must be unique"
            )
        seen.add(call_id)


def check_structure(message: dict[str, Any]) -> None:
    """Check the role, content and tool fields of a copied message, normalising in place.

    Args:
        message: A message copied by `memoryd._json_values.copy_json_or_raise`.

    Raises:
        InvalidMessage: The role is missing or unknown, the content is missing or
            malformed, or the tool fields do not fit the role.
    """
    if "role" not in message:
        raise InvalidMessage(f"message has no 'role'; give one of: {_ROLE_LIST}")
    role = message["role"]
    if not isinstance(role, str):
        raise InvalidMessage(f"message.role must be a str, got {type_name(role)}")
    if role not in ROLES:
        # the role shown cut: a caller's text, and this message is echoed to it
        raise InvalidMessage(f"message.role {shown(role)} is not one of: {_ROLE_LIST}")

    if "tool_calls" in message and message["tool_calls"] in (None, []):
        del message["tool_calls"]
    has_tool_calls = "tool_calls" in message
    if has_tool_calls:
        if role != "assistant":
            raise InvalidMessage(
                f"only assistant messages may have tool_calls; this one has role {role!r}"
            )
        check_tool_calls(message["tool_calls"])

    if role == "tool":
        call_id = message.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            raise InvalidMessage(
                "a tool message needs a non-empty str 'tool_call_id' naming the call it "
                f"answers, got {call_id!r}"
            )
    elif "tool_call_id" in message:
        raise InvalidMessage(f"only tool messages have a tool_call_id; this one has role {role!r}")

    if "content" not in message:
        if not has_tool_calls:
            raise InvalidMessage(
                f"a {role} message needs 'content' (a str or a list of content parts)"
            )
        message["content"] = None
    content = message["content"]
    if content is None:
        if not has_tool_calls:
            raise InvalidMessage(
                "message.content is None; only an assistant message with tool_calls "
                "may have no content"
            )
    elif isinstance(content, list):
        check_content_parts(content, "message.content")
    elif not isinstance(content, str):
        raise InvalidMessage(
            "message.content must be a str, a list of content parts or None, "
            f"got {type_name(content)}"
        )
