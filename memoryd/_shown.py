"""How an error message shows a value the caller gave: whole when short, else cut. Pure."""

from __future__ import annotations

from typing import Any

__all__ = ["described", "shown"]


def shown(text: str, limit: int = 40) -> str:
    """``repr(text)``, or its first ``limit`` characters and how long it was.

    Args:
        text: The value (an id, a name, a key).
        limit: The most characters shown.

    Returns:
        ``'abc'``, or ``'abcd…'... (5000 characters)``.
    """
    return repr(text) if len(text) <= limit else f"{text[:limit]!r}... ({len(text)} characters)"


def described(value: Any, limit: int = 60) -> str:
    """Any value as an error shows it: a short repr whole, a long str cut with its
    length, an int past 128 bits by its size (its digits alone may be past what Python
    converts to text), and anything else by its type (and size).

    Args:
        value: The value (a caller's argument, a field of an answer).
        limit: The most characters of a str's repr shown.

    Returns:
        ``5``, ``'abc'``, ``'abcd...'... (5000 characters)``, ``an int of 400 bits``,
        ``a list of 3`` or ``a bytes``.
    """
    if type(value) is int and value.bit_length() > 128:
        return f"an int of {value.bit_length()} bits"
    if value is None or type(value) in (bool, int, float):
        return repr(value)
    if isinstance(value, str):
        text = repr(value)
        return text if len(text) <= limit else f"{text[:limit]}... ({len(value)} characters)"
    size = f" of {len(value)}" if isinstance(value, list | dict | tuple) else ""
    return f"a {type(value).__name__}{size}"
