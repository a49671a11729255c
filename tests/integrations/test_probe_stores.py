"""Both adapters refuse, at construction, what is no store, naming the fix.

A user switching from ``SQLiteSession("user-1", "chat.db")`` or
``SQLChatMessageHistory(session_id, connection)`` writes a path where the store belongs,
or the two arguments in the other order; before, the mistake surfaced at the first call
as an ``AttributeError`` deep in the adapter.
"""

from __future__ import annotations

from typing import Any, cast

import pytest

from memoryd.integrations.langchain import MemorydChatMessageHistory
from memoryd.integrations.openai_agents import MemorydSession
from memoryd.store.handle import StoreHandle


@pytest.mark.parametrize("not_a_store", ["chat.db", None, {}], ids=["path", "none", "dict"])
def test_a_session_on_something_that_is_no_store_is_refused_at_construction(
    not_a_store: Any,
) -> None:
    """MemorydSession("user-1", "chat.db") raises TypeError naming what a store is."""
    with pytest.raises(TypeError, match="needs a memoryd store handle"):
        MemorydSession("user-1", cast(StoreHandle, not_a_store))


@pytest.mark.parametrize(
    "not_a_store", ["sqlite:///chat.db", None, {}], ids=["url", "none", "dict"]
)
def test_a_history_on_something_that_is_no_store_is_refused_at_construction(
    not_a_store: Any,
) -> None:
    """MemorydChatMessageHistory("sqlite:///chat.db", "s") raises TypeError naming a store."""
    with pytest.raises(TypeError, match="needs a memoryd store handle"):
        MemorydChatMessageHistory(cast(StoreHandle, not_a_store), "s")


def test_a_path_given_as_the_store_is_named_with_the_call_that_opens_it() -> None:
    """The message says how to open a store at the path the user gave."""
    with pytest.raises(TypeError, match=r"memoryd\.LmdbStore\.start\('chat\.db'\)"):
        MemorydSession("user-1", cast(StoreHandle, "chat.db"))


def test_swapped_arguments_are_named_as_swapped(store: StoreHandle) -> None:
    """The SQL history's order (session id first) given to the memoryd one, and the
    reverse for the session, is reported as a swap."""
    with pytest.raises(TypeError, match="swapped"):
        MemorydChatMessageHistory(cast(StoreHandle, "user-1"), cast(str, store))
    with pytest.raises(TypeError, match="swapped"):
        MemorydSession(cast(str, store), cast(StoreHandle, "user-1"))
