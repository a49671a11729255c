"""The exported session document as JSON and YAML text (pure: no store)."""

from __future__ import annotations

from typing import Any

import pytest

from memoryd.provider import session
from memoryd.provider.session_export import FORMAT, Syntax, dump, parse
from tests.helpers import python_prints

DOCUMENT: dict[str, Any] = {
    "format": FORMAT,
    "id": "c",
    "full_context": [{"role": "user", "content": "\u8ba2\u5355 'A-100' \"x\"\n"}],
    "memo": {"note": "\u4f60\u597d", "nested": {"ok": True, "none": None}},
    "settings": {"max_length": 5000},
    "input_keys": None,
    "reply_keys": ["a"],
}


def test_session_module_keeps_the_format_tag() -> None:
    """FORMAT stays importable from memoryd.provider.session."""
    assert vars(session)["FORMAT"] == FORMAT == "memoryd.session/1"


@pytest.mark.parametrize("syntax", ["json", "yaml"])
def test_dump_then_parse_gives_the_document_back(syntax: Syntax) -> None:
    """Unicode, quotes, newlines, None and nesting survive both syntaxes."""
    assert parse(dump(DOCUMENT, syntax), syntax) == DOCUMENT


@pytest.mark.parametrize("syntax", ["json", "yaml"])
def test_dump_keeps_unicode_and_key_order(syntax: Syntax) -> None:
    """Characters are written as they are, and ``format`` comes first."""
    text = dump(DOCUMENT, syntax)
    assert "\u4f60\u597d" in text
    assert text.index("format") < text.index("full_context") < text.index("reply_keys")


@pytest.mark.parametrize(
    ("syntax", "text"), [("json", "{not json"), ("yaml", "a: [unclosed"), ("json", "")]
)
def test_parse_names_the_syntax_that_failed(syntax: Syntax, text: str) -> None:
    """Text that does not parse is a ValueError saying which syntax was expected."""
    with pytest.raises(ValueError, match=f"session {syntax.upper()} does not parse"):
        parse(text, syntax)


BILLION_LAUGHS = (
    "format: memoryd.session/1\na: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
    + "".join(
        f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n"
        for p, n in zip("abcdefgh", "bcdefghi", strict=True)
    )
    + "memo: {x: *i}\n"
)


def test_yaml_aliases_are_refused_before_they_expand() -> None:
    """Nine lines of nested aliases expand to 9**9 values (a "billion laughs"): the
    parse refuses the first alias, naming it, instead of building them."""
    with pytest.raises(
        ValueError, match=r"alias \*a is refused: a session export holds no aliases"
    ):
        parse(BILLION_LAUGHS, "yaml")


def test_a_value_shared_by_two_places_is_dumped_twice_and_read_back() -> None:
    """`dump` never writes an anchor and an alias, so what it writes parses again."""
    shared = {"note": "same"}
    document = {**DOCUMENT, "memo": {"a": shared, "b": shared}}
    text = dump(document, "yaml")
    assert "&" not in text and "*" not in text
    assert parse(text, "yaml") == document


@pytest.mark.parametrize("syntax", ["json", "yaml"])
def test_text_nested_too_deeply_is_a_value_error(syntax: Syntax) -> None:
    """100,000 levels of brackets: a ValueError saying so, not a RecursionError."""
    text = "[" * 100_000 + "]" * 100_000
    with pytest.raises(
        ValueError, match=f"session {syntax.upper()} does not parse.*nests too deeply"
    ):
        parse(text, syntax)


def test_parse_leaves_the_format_check_to_restore() -> None:
    """Valid text of something else parses; whether it is a session is checked later."""
    assert parse("[1, 2]", "json") == [1, 2]
    assert parse("- 1\n- 2\n", "yaml") == [1, 2]


def test_yaml_is_imported_only_when_a_session_is_written_or_read_as_yaml() -> None:
    """Importing memoryd, its agents and a store loads no YAML parser (10-40 ms of a
    process's start, paid by every recovery process); the first YAML export loads it."""
    probe = (
        "import sys, memoryd\n"
        "from memoryd.agents import AgentSystem\n"
        "import memoryd.store.lmdb.handle, memoryd.provider.session\n"
        "print('yaml' in sys.modules)\n"
        "from memoryd.provider.session_export import dump\n"
        "dump({'format': 'x'}, 'yaml')\n"
        "print('yaml' in sys.modules)\n"
    )
    assert python_prints(probe) == ["False", "True"]
