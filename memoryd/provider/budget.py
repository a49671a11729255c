"""Size budgets: keep the newest messages that fit in a number of characters or tokens.

Agently's ``max_length`` with ``simple_cut``, made safe for tool calls: system messages
are kept (at the head, counted); then, from the newest backwards, whole units (a
message, or a tool call with all its results) are kept while they fit; the first that
does not fit ends the window. If not even the newest unit fits, the tail of its text is
kept (for a tool exchange: the newest results' text first), so the window is never
empty only because the last message is long. Pure: inputs are never mutated.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import json
import math
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from memoryd.messages import is_system
from memoryd.provider.safe_window import check_messages, units

__all__ = [
    "Counter",
    "approximate_tokens",
    "char_length",
    "default_counter",
    "fit",
]

Message = dict[str, Any]
Counter = Callable[[Mapping[str, Any]], int]
"""Measures one message (in characters, tokens, ...)."""

_TIKTOKEN_ENCODINGS = ("o200k_base", "cl100k_base")
_TIKTOKEN_BLOB = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"
_PER_MESSAGE_TOKENS = 4


def _compact(message: Mapping[str, Any]) -> str:
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False, default=str)


def char_length(message: Mapping[str, Any]) -> int:
    """The message's length in characters of compact JSON (Agently's approximation).

    Args:
        message: A message dict.

    Returns:
        The number of characters.
    """
    return len(_compact(message))


def approximate_tokens(message: Mapping[str, Any]) -> int:
    """An offline token estimate: 4 ASCII characters or 1 other character per token.

    Counted on the compact JSON of the message, plus a per-message overhead of 4; it
    tends to overcount, which keeps a budget on the safe side.

    Args:
        message: A message dict.

    Returns:
        The estimated number of tokens.
    """
    text = _compact(message)
    ascii_chars = sum(1 for char in text if char < "\x80")
    return _PER_MESSAGE_TOKENS + math.ceil(ascii_chars / 4) + (len(text) - ascii_chars)


def _tiktoken_counter() -> Counter | None:
    """A tiktoken counter if tiktoken is installed and its files are cached (no network)."""
    try:
        tiktoken = importlib.import_module("tiktoken")
    except ImportError:
        return None
    cache_dir = os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR")
    if cache_dir is None:
        cache_dir = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    for name in _TIKTOKEN_ENCODINGS:
        key = hashlib.sha1(_TIKTOKEN_BLOB.format(name).encode()).hexdigest()
        if not cache_dir or not os.path.exists(os.path.join(cache_dir, key)):
            continue
        try:
            encoding = tiktoken.get_encoding(name)
            encoding.encode("probe")
        except Exception:  # any failure means: use the approximation
            continue

        def count(message: Mapping[str, Any], _enc: Any = encoding) -> int:
            return _PER_MESSAGE_TOKENS + len(_enc.encode(_compact(message)))

        return count
    return None


@functools.cache
def default_counter() -> Counter:
    """The default token counter.

    tiktoken (``o200k_base``, else ``cl100k_base``) when it is installed and its encoding
    file is already cached locally, so nothing is downloaded; `approximate_tokens`
    otherwise.

    Returns:
        A function from a message to its token count.
    """
    return _tiktoken_counter() or approximate_tokens


def _measure(counter: Counter, message: Mapping[str, Any]) -> int:
    size = counter(message)
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        name = getattr(counter, "__name__", repr(counter))
        raise ValueError(f"the counter {name} must return an int >= 0, returned {size!r}")
    return size


def _text_slots(unit: Sequence[Message]) -> list[tuple[int, int | None, int]]:
    """(message index, part index or None, text length) of each text, newest first."""
    slots: list[tuple[int, int | None, int]] = []
    for index in range(len(unit) - 1, -1, -1):
        content = unit[index].get("content")
        if isinstance(content, str):
            slots.append((index, None, len(content)))
        elif isinstance(content, list):
            for part_index in range(len(content) - 1, -1, -1):
                part = content[part_index]
                if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                    slots.append((index, part_index, len(part["text"])))
    return slots


def _cut_unit(unit: Sequence[Message], keep: int) -> list[Message]:
    """Copies of ``unit`` keeping the last ``keep`` text characters, newest text first."""
    out = [dict(message) for message in unit]
    left = keep
    for index, part_index, size in _text_slots(unit):
        kept = min(size, left)
        left -= kept
        if part_index is None:
            text = out[index]["content"]
            out[index]["content"] = text[len(text) - kept :]
        else:
            parts = [
                dict(part) if isinstance(part, Mapping) else part for part in out[index]["content"]
            ]
            text = parts[part_index]["text"]
            parts[part_index]["text"] = text[len(text) - kept :]
            out[index]["content"] = parts
    return out


def _tail_that_fits(unit: Sequence[Message], budget: int, counter: Counter) -> list[Message] | None:
    """The unit with the longest text tail that fits ``budget``, or None if none does."""
    total = sum(size for _, _, size in _text_slots(unit))

    def size_of(keep: int) -> int:
        return sum(_measure(counter, m) for m in _cut_unit(unit, keep))

    if total == 0 or size_of(1) > budget:
        return None
    low, high = 1, total  # size_of(low) fits; find the largest keep that fits
    while low < high:
        mid = (low + high + 1) // 2
        if size_of(mid) <= budget:
            low = mid
        else:
            high = mid - 1
    return _cut_unit(unit, low)


def fit(messages: Sequence[Message], limit: int, counter: Counter) -> list[Message]:
    """Keep system messages and the newest whole units whose total size fits ``limit``.

    Args:
        messages: The conversation, oldest first. Not mutated.
        limit: The budget, in ``counter``'s unit.
        counter: Measures one message.

    Returns:
        System messages first, then the newest units that fit (a cut copy of the newest
        one when even it does not fit). Untouched messages are the input's dicts.

    Raises:
        InvalidMessage: ``messages`` is not a list of message dicts.
        ValueError: ``counter`` returned something other than an int >= 0.
    """
    items = check_messages(messages)
    system = [m for m in items if is_system(m)]
    remaining = limit - sum(_measure(counter, m) for m in system)
    kept: list[list[Message]] = []
    groups = units([m for m in items if not is_system(m)])
    for unit in reversed(groups):
        size = sum(_measure(counter, m) for m in unit)
        if size > remaining:
            break
        kept.append(unit)
        remaining -= size
    if not kept and groups and remaining > 0:
        cut = _tail_that_fits(groups[-1], remaining, counter)
        if cut is not None:
            kept.append(cut)
    return system + [message for unit in reversed(kept) for message in unit]
