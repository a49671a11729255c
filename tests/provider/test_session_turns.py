"""What record_turn records: dotted-path keys and rendering (pure: no store)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from memoryd.provider.session_turns import check_keys, render


def test_check_keys_returns_a_tuple_or_none() -> None:
    """A list of dotted paths becomes a tuple; None means everything."""
    assert check_keys(["input.q", "answer"], "input_keys") == ("input.q", "answer")
    assert check_keys(None, "input_keys") is None
    assert check_keys([], "reply_keys") == ()


@pytest.mark.parametrize("bad", ["input.q", 3, {"a"}])
def test_check_keys_refuses_what_is_not_a_list(bad: Any) -> None:
    """A bare str (or a set, or a number) is a TypeError naming the argument."""
    with pytest.raises(TypeError, match="reply_keys"):
        check_keys(bad, "reply_keys")


@pytest.mark.parametrize("bad", ["", "a..b", ".a", "a.", 7])
def test_check_keys_refuses_a_bad_path(bad: Any) -> None:
    """Empty parts and non-str paths are a ValueError naming the argument."""
    with pytest.raises(ValueError, match="input_keys holds"):
        check_keys(["ok", bad], "input_keys")


def test_render_without_keys_keeps_text_and_writes_data_as_json() -> None:
    """A str is recorded as it is; other data as JSON with unicode kept."""
    assert render("hello", None) == "hello"
    assert render({"q": "\u4f60\u597d"}, None) == '{"q": "\u4f60\u597d"}'
    assert render([1, None], None) == "[1, null]"


def test_render_with_keys_records_only_the_paths_found() -> None:
    """Nested paths are picked, keyed by path; missing paths are skipped."""
    data = {"input": {"question": "2+2?", "secret": "x"}, "info": {"task": "math"}}
    text = render(data, ("input.question", "info.missing", "nothing"))
    assert json.loads(text) == {"input.question": "2+2?"}


def test_render_with_keys_on_text_records_an_empty_object() -> None:
    """A str has no paths, so nothing of it is chosen."""
    assert json.loads(render("plain", ("a",))) == {}
