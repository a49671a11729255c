"""Session window handlers: analysis, resize, settings (pure: no store, no actors)."""

from __future__ import annotations

from typing import Any

import pytest

from memoryd import InvalidMessage
from memoryd.provider.budget import char_length
from memoryd.provider.session import AnalysisHandler, ResizeHandler
from memoryd.provider.session_handlers import (
    Resized,
    WindowHandlers,
    as_messages,
    default_analysis,
    settings_for,
    simple_cut,
)
from tests.provider.test_safe_window import a, u

Message = dict[str, Any]


def test_session_reexports_the_handler_types() -> None:
    """The handler type aliases stay importable from memoryd.provider.session."""
    from memoryd.provider import session_handlers

    assert AnalysisHandler is session_handlers.AnalysisHandler
    assert ResizeHandler is session_handlers.ResizeHandler


def test_default_analysis_names_simple_cut_only_past_max_length() -> None:
    """At the limit nothing is named; one character over, simple_cut is."""
    window = [u("a" * 10), a("b" * 10)]
    size = sum(char_length(m) for m in window)
    assert default_analysis([], window, {}, {"max_length": size}) is None
    assert default_analysis([], window, {}, {"max_length": size - 1}) == "simple_cut"
    assert default_analysis([], window, {}, {"max_length": None}) is None


def test_simple_cut_keeps_the_newest_messages_that_fit() -> None:
    """The window is cut to max_length; the history is left alone and the memo kept."""
    window = [u("a" * 30), u("b" * 30), u("c" * 30)]
    limit = char_length(window[1]) + char_length(window[2])
    full, cut, memo = simple_cut(window, window, {"k": 1}, {"max_length": limit})
    assert full is None
    assert [m["content"][0] for m in cut] == ["b", "c"]
    assert memo == {"k": 1}


def test_settings_for_adds_max_length_to_a_copy() -> None:
    """The settings dict is new, holds max_length, and the caller's mapping is untouched."""
    given = {"lang": "zh"}
    settings = settings_for(500, given)
    assert settings == {"lang": "zh", "max_length": 500}
    assert given == {"lang": "zh"}
    assert settings_for(None, None) == {"max_length": None}


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "10"])
def test_settings_for_refuses_a_bad_max_length(bad: Any) -> None:
    """max_length must be None or an int >= 1 (a bool is not one)."""
    with pytest.raises(ValueError, match="max_length"):
        settings_for(bad, None)


def test_settings_for_refuses_settings_that_are_not_a_mapping() -> None:
    """A list of settings is a TypeError naming its type."""
    with pytest.raises(TypeError, match="list"):
        settings_for(10, [("lang", "zh")])


def test_as_messages_takes_one_message_or_a_list() -> None:
    """A dict becomes a one-item list; an empty list stays empty; a str is refused."""
    assert as_messages(u("hi")) == [u("hi")]
    assert as_messages((u("1"), a("2"))) == [u("1"), a("2")]
    assert as_messages([]) == []
    with pytest.raises(InvalidMessage, match="str"):
        as_messages("hello")
    with pytest.raises(InvalidMessage):
        as_messages([{"role": "nobody", "content": "x"}])


def test_run_without_a_resize_keeps_the_window() -> None:
    """Under max_length the window comes back as it is, with nothing to store."""
    window = [u("1"), a("2")]
    resized = WindowHandlers().run(window, window, {}, {"max_length": None})
    assert resized == Resized(window=window)
    assert resized.full_context is None
    assert resized.memo is None


def test_run_hands_each_handler_its_own_copies() -> None:
    """A handler that mutates its memo, settings or history does not change the caller's."""
    seen: list[Any] = []

    def analysis(
        full: list[Message], window: list[Message], memo: dict[str, Any], settings: dict[str, Any]
    ) -> str:
        memo["touched"] = True
        settings["touched"] = True
        full.clear()
        window.clear()
        return "grow"

    def grow(
        full: list[Message], window: list[Message], memo: dict[str, Any], settings: dict[str, Any]
    ) -> tuple[list[Message], list[Message], dict[str, Any]]:
        seen.append((len(full), len(window), dict(memo), dict(settings)))
        return [*full, u("new")], window[-1:], {**memo, "n": 1}

    handlers = WindowHandlers()
    handlers.set_analysis(analysis)
    handlers.add_resize("grow", grow)
    full, window, memo, settings = [u("1"), a("2")], [a("2")], {"k": 0}, {"max_length": None}
    resized = handlers.run(full, window, memo, settings)
    assert seen == [(2, 1, {"k": 0}, {"max_length": None})]
    assert resized.full_context == [u("1"), a("2"), u("new")]
    assert resized.window == [a("2")]
    assert resized.memo == {"k": 0, "n": 1}
    assert (full, memo, settings) == ([u("1"), a("2")], {"k": 0}, {"max_length": None})


def test_run_refuses_an_unregistered_name() -> None:
    """The error names the missing handler and the registered ones."""
    handlers = WindowHandlers()
    handlers.set_analysis(lambda *args: "missing")
    with pytest.raises(ValueError, match=r"'missing'.*\['simple_cut'\]"):
        handlers.run([], [], {}, {"max_length": None})


def test_run_refuses_a_result_that_is_not_a_three_tuple() -> None:
    """A resize handler must return (full_context or None, window, memo or None)."""
    handlers = WindowHandlers()
    handlers.set_analysis(lambda *args: "bad")
    handlers.add_resize("bad", lambda *args: (None, []))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must return"):
        handlers.run([], [], {}, {"max_length": None})


def test_run_refuses_bad_messages_from_a_resize() -> None:
    """A window or history holding a bad message is an InvalidMessage."""
    handlers = WindowHandlers()
    handlers.set_analysis(lambda *args: "bad")
    handlers.add_resize("bad", lambda *args: ([u("ok")], ["oops"], None))  # type: ignore[arg-type]
    with pytest.raises(InvalidMessage):
        handlers.run([], [], {}, {"max_length": None})
    handlers.add_resize("bad", lambda *args: (["oops"], [u("ok")], None))  # type: ignore[arg-type]
    with pytest.raises(InvalidMessage):
        handlers.run([], [], {}, {"max_length": None})


def test_registering_refuses_bad_handlers() -> None:
    """Handlers must be callable; a resize handler needs a non-empty str name."""
    handlers = WindowHandlers()
    with pytest.raises(TypeError, match="analysis handler"):
        handlers.set_analysis("simple_cut")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="non-empty str"):
        handlers.add_resize("", simple_cut)
    with pytest.raises(TypeError, match="'cut' must be callable"):
        handlers.add_resize("cut", None)  # type: ignore[arg-type]
