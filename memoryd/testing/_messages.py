"""Message builders for the contract: plain OpenAI Chat Completions dicts, built unchecked.

Unlike `memoryd.messages`, these do not validate, so the contract decides alone what the
store is given.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memoryd.testing._store import Message

__all__ = ["assistant", "assistant_calls", "system", "texts", "tool_call", "tool_result", "user"]


def user(text: str) -> Message:
    """A user message with ``text`` as its content."""
    return {"role": "user", "content": text}


def assistant(text: str) -> Message:
    """An assistant message with ``text`` as its content."""
    return {"role": "assistant", "content": text}


def system(text: str) -> Message:
    """A system message with ``text`` as its content."""
    return {"role": "system", "content": text}


def tool_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    """One function tool call, for `assistant_calls`."""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def assistant_calls(*calls: dict[str, Any]) -> Message:
    """An assistant message making ``calls`` and holding no text."""
    return {"role": "assistant", "content": None, "tool_calls": list(calls)}


def tool_result(call_id: str, content: str) -> Message:
    """A tool message answering the call ``call_id``."""
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def texts(messages: Sequence[Message]) -> list[Any]:
    """The ``content`` of each message, in order: the short way to compare histories."""
    return [m["content"] for m in messages]
