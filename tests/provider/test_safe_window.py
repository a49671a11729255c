"""safe_window: table-driven cases and properties (pure: no store, no disk)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memoryd import InvalidMessage, safe_window
from memoryd.messages import is_system

Message = dict[str, Any]


def s(text: str) -> Message:
    return {"role": "system", "content": text}


def u(text: str) -> Message:
    return {"role": "user", "content": text}


def a(text: str) -> Message:
    return {"role": "assistant", "content": text}


def calls(*ids: str) -> Message:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}} for i in ids
        ],
    }


def r(call_id: str) -> Message:
    return {"role": "tool", "tool_call_id": call_id, "content": f"result {call_id}"}


def label(message: Message) -> str:
    if message["role"] == "tool":
        return f"r:{message['tool_call_id']}"
    if message.get("tool_calls"):
        return "c:" + ",".join(c["id"] for c in message["tool_calls"])
    return str(message["content"])


CASES = [
    pytest.param([u("1"), a("2"), u("3"), a("4")], 2, ["3", "4"], id="plain-last-n"),
    pytest.param([u("1"), a("2")], 10, ["1", "2"], id="n-above-length"),
    pytest.param([s("S"), u("1"), a("2"), u("3")], 0, ["S"], id="n-zero-keeps-systems"),
    pytest.param([u("1"), a("2")], 0, [], id="n-zero-no-systems"),
    pytest.param([], 5, [], id="empty"),
    pytest.param(
        [u("1"), s("S1"), a("2"), s("S2"), u("3")], 1, ["S1", "S2", "3"], id="systems-anywhere"
    ),
    pytest.param(
        [s("S"), u("1"), a("2"), u("3")],
        2,
        ["S", "2", "3"],
        id="systems-uncounted",
    ),
    pytest.param([u("q"), calls("x"), r("x"), a("done")], 2, ["done"], id="orphan-result-at-head"),
    pytest.param(
        [u("q"), calls("x", "y"), r("x"), r("y"), a("done")],
        3,
        ["done"],
        id="parallel-calls-cut-in-the-middle",
    ),
    pytest.param(
        [u("q"), calls("x", "y"), r("x"), r("y"), a("done")],
        4,
        ["c:x,y", "r:x", "r:y", "done"],
        id="parallel-calls-whole",
    ),
    pytest.param([u("q"), a("a"), u("go"), calls("x")], 10, ["q", "a", "go"], id="dangling-call"),
    pytest.param(
        [u("go"), calls("x", "y"), r("x")], 10, ["go"], id="dangling-call-partly-answered"
    ),
    pytest.param(
        [calls("x"), r("x"), calls("y"), r("y"), calls("z")],
        4,
        ["c:y", "r:y"],
        id="only-tool-traffic",
    ),
    pytest.param([r("x"), r("y")], 5, [], id="only-orphan-results"),
    pytest.param(
        [u("q"), calls("x"), s("S"), r("x")], 5, ["S", "q", "c:x", "r:x"], id="system-inside-pair"
    ),
]


@pytest.mark.parametrize(("history", "n", "expected"), CASES)
def test_safe_window_table(history: list[Message], n: int, expected: list[str]) -> None:
    """Each row: the labels of what the window keeps."""
    assert [label(m) for m in safe_window(history, n)] == expected


def test_safe_window_does_not_mutate_its_input() -> None:
    """The input list and its dicts are unchanged, and the result is a new list."""
    history = [s("S"), r("orphan"), u("1"), calls("x"), r("x"), a("2"), calls("dangling")]
    before = copy.deepcopy(history)
    out = safe_window(history, 3)
    assert history == before
    assert out is not history
    out.append(u("extra"))
    assert history == before


@pytest.mark.parametrize("n", [-1, 1.5, "3", None, True])
def test_bad_window_size_raises_value_error(n: Any) -> None:
    """n must be an int >= 0; the error names it."""
    with pytest.raises(ValueError, match="n must be an int >= 0"):
        safe_window([u("x")], n)


@pytest.mark.parametrize("messages", ["hello", [u("x"), "hello"], [{"content": "no role"}], None])
def test_bad_messages_raise_invalid_message(messages: Any) -> None:
    """messages must be a list of dicts with a role."""
    with pytest.raises(InvalidMessage):
        safe_window(messages, 2)


# --- properties -----------------------------------------------------------------------------


@st.composite
def valid_history(draw: st.DrawFn, systems_anywhere: bool = True) -> list[Message]:
    """A valid OpenAI sequence: turns of text and complete tool exchanges."""
    out: list[Message] = []
    if draw(st.booleans()):
        out.append(s("head"))
    kinds = st.lists(st.sampled_from(["user", "assistant", "tools", "system"]), max_size=25)
    for counter, kind in enumerate(draw(kinds)):
        if kind == "user":
            out.append(u(f"u{counter}"))
        elif kind == "assistant":
            out.append(a(f"a{counter}"))
        elif kind == "system" and systems_anywhere:
            out.append(s(f"s{counter}"))
        elif kind == "tools":
            ids = [f"c{counter}_{i}" for i in range(draw(st.integers(1, 3)))]
            out.append(calls(*ids))
            out.extend(r(i) for i in draw(st.permutations(ids)))
    return out


@st.composite
def any_history(draw: st.DrawFn) -> list[Message]:
    """Arbitrary sequences: orphan results, dangling or partly answered calls, reused ids."""
    ids = st.sampled_from(["x", "y", "z"])
    message = st.one_of(
        st.builds(u, st.just("u")),
        st.builds(a, st.just("a")),
        st.builds(s, st.just("s")),
        st.builds(r, ids),
        st.lists(ids, min_size=1, max_size=3, unique=True).map(lambda i: calls(*i)),
    )
    return draw(st.lists(message, max_size=30))


def assert_valid(messages: list[Message]) -> None:
    """Every tool call is answered right after it, and every result answers such a call."""
    i = 0
    while i < len(messages):
        message = messages[i]
        assert message["role"] != "tool", f"result without its call at {i}"
        if message.get("tool_calls"):
            wanted = {c["id"] for c in message["tool_calls"]}
            j = i + 1
            while j < len(messages) and messages[j]["role"] == "tool":
                assert messages[j]["tool_call_id"] in wanted
                wanted.discard(messages[j]["tool_call_id"])
                j += 1
            assert not wanted, f"call at {i} lacks results for {wanted}"
            i = j
        else:
            i += 1


def is_subsequence(part: list[Message], whole: list[Message]) -> bool:
    it = iter(whole)
    return all(any(item is other for other in it) for item in part)


@given(valid_history(systems_anywhere=False), st.integers(0, 40))
def test_output_is_a_valid_subsequence(history: list[Message], n: int) -> None:
    """For any valid history and n: a valid sequence, and a subsequence of the input."""
    out = safe_window(history, n)
    assert_valid(out)
    assert is_subsequence(out, history)
    assert sum(1 for m in out if not is_system(m)) <= n


@given(st.one_of(valid_history(), any_history()), st.integers(0, 40))
def test_any_input_gives_valid_output_with_systems_first(history: list[Message], n: int) -> None:
    """Systems come first in their order; the rest is a valid subsequence of the others."""
    out = safe_window(history, n)
    systems = [m for m in history if is_system(m)]
    assert out[: len(systems)] == systems
    rest = out[len(systems) :]
    assert not any(is_system(m) for m in rest)
    assert_valid(rest)
    assert is_subsequence(rest, [m for m in history if not is_system(m)])
    assert len(rest) <= n


@given(valid_history(), st.integers(0, 5))
def test_window_keeps_every_message_when_n_covers_a_valid_history(
    history: list[Message], extra: int
) -> None:
    """A valid history that fits in n comes back whole (nothing is dropped needlessly)."""
    others = [m for m in history if not is_system(m)]
    out = safe_window(history, len(others) + extra)
    assert out == [m for m in history if is_system(m)] + others
