"""Values shared by the core tests: Hypothesis strategies for JSON values and chat
messages, and a plain msgpack encoder for hand-made records."""

from __future__ import annotations

from typing import Any

import msgpack
from hypothesis import strategies as st

from memoryd import messages

__all__ = ["any_message", "json_scalars", "json_values", "packb"]

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=15,
)
content_parts = st.lists(
    st.builds(lambda t: {"type": "text", "text": t}, st.text(max_size=30))
    | st.builds(lambda u: {"type": "image_url", "image_url": {"url": u}}, st.text(max_size=30)),
    min_size=1,
    max_size=3,
)
contents = st.text(max_size=60) | content_parts
call_ids = st.text(min_size=1, max_size=12)
tool_calls = st.lists(
    st.builds(
        messages.tool_call,
        call_ids,
        st.text(min_size=1, max_size=12),
        st.dictionaries(st.text(max_size=8), json_values, max_size=3),
    ),
    min_size=1,
    max_size=3,
    unique_by=lambda call: call["id"],
)
any_message = st.one_of(
    st.builds(messages.system, contents),
    st.builds(messages.developer, contents),
    st.builds(messages.user, contents),
    st.builds(messages.assistant, contents),
    st.builds(lambda calls: messages.assistant(tool_calls=calls), tool_calls),
    st.builds(lambda text, calls: messages.assistant(text, tool_calls=calls), contents, tool_calls),
    st.builds(messages.tool, call_ids, contents),
)


def packb(obj: Any) -> bytes:
    """Encode ``obj`` with msgpack as memoryd does (bin type for bytes), unchecked."""
    return msgpack.packb(obj, use_bin_type=True)
