"""Preprocessors: order, redaction, character and token budgets (pure)."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest

from memoryd import InvalidMessage, preprocessors
from memoryd.provider.budget import approximate_tokens, char_length, default_counter
from tests.provider.test_safe_window import a, calls, label, r, s, u

Message = dict[str, Any]


def test_order_matters_window_then_filter_differs_from_filter_then_window() -> None:
    """Koog: window(3) then filter keeps fewer than filter then window(3)."""
    history = [u("keep 1"), u("keep 2"), u("drop"), u("keep 3"), u("drop"), u("drop")]
    keep = preprocessors.filter_messages(lambda m: m["content"].startswith("keep"))
    window = preprocessors.window_size(3)
    assert [m["content"] for m in preprocessors.run([window, keep], history)] == ["keep 3"]
    assert [m["content"] for m in preprocessors.run([keep, window], history)] == [
        "keep 1",
        "keep 2",
        "keep 3",
    ]


def test_filter_drops_a_tool_exchange_it_broke() -> None:
    """Filtering out a tool result also drops the call it answered."""
    history = [u("q"), calls("x"), r("x"), a("done")]
    no_tools = preprocessors.filter_messages(lambda m: m["role"] != "tool")
    assert [label(m) for m in no_tools(history)] == ["q", "done"]


def test_drop_system_removes_system_and_developer() -> None:
    """drop_system keeps only non-system messages."""
    history = [s("S"), {"role": "developer", "content": "D"}, u("1")]
    assert [label(m) for m in preprocessors.drop_system()(history)] == ["1"]


def test_redact_rewrites_text_parts_and_tool_arguments_without_mutating() -> None:
    """Content, text parts and JSON argument values are redacted; the input is unchanged."""
    call = calls("x")
    call["tool_calls"][0]["function"]["arguments"] = json.dumps({"to": "bob@example.com"})
    history = [
        u("mail alice@example.com"),
        {"role": "user", "content": [{"type": "text", "text": "cc carol@example.org"}]},
        call,
    ]
    before = copy.deepcopy(history)
    out = preprocessors.redact(r"[\w.]+@[\w.]+")(history)
    assert out[0]["content"] == "mail [REDACTED]"
    assert out[1]["content"][0]["text"] == "cc [REDACTED]"
    assert json.loads(out[2]["tool_calls"][0]["function"]["arguments"]) == {"to": "[REDACTED]"}
    assert history == before


def test_redact_reads_arguments_nested_too_deeply_as_text() -> None:
    """Tool call arguments too deep for the JSON decoder are redacted as plain text."""
    call = calls("x")
    call["tool_calls"][0]["function"]["arguments"] = (
        "[" * 50_000 + '"bob@example.com"' + "]" * 50_000
    )
    [out] = preprocessors.redact(r"[\w.]+@[\w.]+")([call])
    arguments = out["tool_calls"][0]["function"]["arguments"]
    assert "bob@example.com" not in arguments and "[REDACTED]" in arguments


@pytest.mark.parametrize(
    ("pattern", "error"),
    [("(", ValueError), ("x*", ValueError), (42, TypeError), (re.compile(b"x"), TypeError)],
)
def test_redact_refuses_bad_patterns(pattern: Any, error: type[Exception]) -> None:
    """Invalid regexes, patterns matching the empty string and non-patterns are refused."""
    with pytest.raises(error):
        preprocessors.redact(pattern)


def test_char_budget_keeps_the_newest_messages_that_fit() -> None:
    """Newest first while they fit; the first that does not fit ends the window."""
    history = [u("a" * 50), u("b" * 50), u("c" * 10), u("d" * 10)]
    limit = char_length(u("c" * 10)) + char_length(u("d" * 10))
    assert [m["content"] for m in preprocessors.char_budget(limit)(history)] == ["c" * 10, "d" * 10]


def test_char_budget_keeps_system_messages_and_counts_them() -> None:
    """System messages are kept at the head and use up part of the budget."""
    history = [s("S" * 20), u("1" * 10), u("2" * 10)]
    limit = char_length(s("S" * 20)) + char_length(u("2" * 10))
    assert [label(m) for m in preprocessors.char_budget(limit)(history)] == ["S" * 20, "2" * 10]


def test_char_budget_keeps_the_tail_of_one_oversized_message() -> None:
    """If even the newest message does not fit, the tail of its text is kept, within budget."""
    history = [u("old"), u("x" * 500 + "THE END")]
    out = preprocessors.char_budget(60)(history)
    assert len(out) == 1
    assert out[0]["content"].endswith("THE END")
    assert char_length(out[0]) <= 60
    assert char_length({**out[0], "content": "x" + out[0]["content"]}) > 60
    assert history[1]["content"].startswith("x" * 500)


def test_char_budget_never_splits_a_tool_call_from_its_results() -> None:
    """A tool exchange is kept whole or not at all."""
    history = [u("q"), calls("x", "y"), r("x"), r("y"), a("done")]
    whole = sum(char_length(m) for m in history[1:])
    out = preprocessors.char_budget(whole - 1)(history)
    assert [label(m) for m in out] == ["done"]
    out = preprocessors.char_budget(whole)(history)
    assert [label(m) for m in out] == ["c:x,y", "r:x", "r:y", "done"]


def test_token_budget_uses_the_given_counter() -> None:
    """A custom counter decides: one token per message keeps the newest three."""
    history = [u(str(i)) for i in range(10)]
    out = preprocessors.token_budget(3, counter=lambda m: 1)(history)
    assert [m["content"] for m in out] == ["7", "8", "9"]


def test_token_budget_default_counter_is_offline_and_monotone() -> None:
    """The default counter counts longer messages as more tokens; CJK counts per character."""
    counter = default_counter()
    assert counter(u("x" * 400)) > counter(u("x" * 40)) > 0
    assert approximate_tokens(u("\u4e2d" * 100)) >= 100
    out = preprocessors.token_budget(approximate_tokens(u("y" * 40)))([u("x" * 400), u("y" * 40)])
    assert [m["content"] for m in out] == ["y" * 40]


def test_token_budget_refuses_a_counter_returning_garbage() -> None:
    """A counter must return an int >= 0; the error names the counter."""

    def bad(message: Message) -> int:
        return -1

    with pytest.raises(ValueError, match="bad"):
        preprocessors.token_budget(10, counter=bad)([u("x")])


@pytest.mark.parametrize("limit", [0, -3, 1.5, "100", None, True])
def test_budgets_refuse_bad_limits(limit: Any) -> None:
    """Limits must be ints >= 1."""
    with pytest.raises(ValueError):
        preprocessors.char_budget(limit)
    with pytest.raises(ValueError):
        preprocessors.token_budget(limit)


def test_bad_arguments_to_preprocessors_raise() -> None:
    """Non-callables and bad messages get clear errors."""
    with pytest.raises(TypeError):
        preprocessors.filter_messages("role == user")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        preprocessors.token_budget(10, counter=5)  # type: ignore[arg-type]
    with pytest.raises(InvalidMessage):
        preprocessors.drop_system()(["not a message"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="must return a list"):
        preprocessors.run([lambda m: None], [u("x")])  # type: ignore[list-item]
