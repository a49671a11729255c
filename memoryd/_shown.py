"""How an error message shows a value the caller gave: whole when short, else cut. Pure."""

from __future__ import annotations

__all__ = ["shown"]


def shown(text: str, limit: int = 40) -> str:
    """``repr(text)``, or its first ``limit`` characters and how long it was.

    Args:
        text: The value (an id, a name, a key).
        limit: The most characters shown.

    Returns:
        ``'abc'``, or ``'abcd…'... (5000 characters)``.
    """
    return repr(text) if len(text) <= limit else f"{text[:limit]!r}... ({len(text)} characters)"
