"""Inputs the contract expects every store to refuse, whole, before it writes anything."""

from __future__ import annotations

from typing import Any

import pytest

from memoryd.testing._messages import user

__all__ = ["BAD_CONVERSATION_IDS", "BAD_MESSAGE_BATCHES", "ONE_MIB"]

BAD_CONVERSATION_IDS: list[Any] = [
    pytest.param("", id="empty"),
    pytest.param("x" * 257, id="257-ascii-bytes"),
    pytest.param("\u00e9" * 129, id="258-utf8-bytes"),
    pytest.param("a\nb", id="newline"),
    pytest.param("a\x00b", id="nul"),
    pytest.param("\t", id="tab"),
    pytest.param("a\x1fb", id="unit-separator"),
    pytest.param("a\x7fb", id="delete"),
    pytest.param("a\x85b", id="c1-next-line"),
    pytest.param(None, id="none"),
    pytest.param(7, id="int"),
    pytest.param(b"abc", id="bytes"),
    pytest.param(["a"], id="list"),
]

BAD_MESSAGE_BATCHES: list[Any] = [
    pytest.param([{"role": "robot", "content": "hi"}], id="unknown-role"),
    pytest.param([{"content": "hi"}], id="missing-role"),
    pytest.param([{"role": 1, "content": "hi"}], id="non-str-role"),
    pytest.param([{"role": "tool", "content": "42"}], id="tool-without-tool-call-id"),
    pytest.param([{"role": "assistant", "content": None}], id="assistant-none-without-tool-calls"),
    pytest.param([{"role": "user", "content": None}], id="user-content-none"),
    pytest.param([{"role": "user", "content": 42}], id="int-content"),
    pytest.param([{"role": "user", "content": [1, 2]}], id="content-parts-not-dicts"),
    pytest.param([{"role": "user", "content": "x", "metadata": {"when": object()}}], id="object"),
    pytest.param([{"role": "user", "content": "x", "metadata": {1, 2}}], id="set-value"),
    pytest.param([{"role": "user", "content": "x", "raw": b"\x00\x01"}], id="bytes-value"),
    pytest.param(["hello"], id="message-not-a-dict"),
    pytest.param([None], id="message-none"),
    pytest.param([], id="empty-list"),
    pytest.param({"role": "user", "content": "hi"}, id="a-dict-not-a-list"),
    pytest.param("hello", id="a-str-not-a-list"),
    pytest.param(None, id="none-not-a-list"),
    pytest.param(
        [user("fine"), {"role": "robot", "content": "bad"}, user("fine too")],
        id="one-bad-among-good",
    ),
]

ONE_MIB = 1024 * 1024
"""The default ``max_message_bytes``: a message of more is refused."""
