"""The journal-space contract: memoryd's own bookkeeping stays out of listings and the
change feed, and an add can clear another conversation with it (the run journal's needs)."""

from __future__ import annotations

import pytest

import memoryd
from memoryd.store.requests import HIDDEN_PREFIX
from memoryd.testing._messages import assistant, texts, user
from memoryd.testing._store import StoreFactory

__all__ = ["JournalSpaceContract"]

_JOURNAL = f"{HIDDEN_PREFIX}r1"


class JournalSpaceContract:
    """Hidden ids and ``add(then_clear=...)``. A backend's test class mixes this in next
    to `StoreContract`; it uses the same ``make_store`` factory."""

    @pytest.fixture
    def handle(self, make_store: StoreFactory) -> memoryd.StoreHandle:
        """A new, empty store from ``make_store`` (a `StoreHandle`)."""
        store = make_store()
        assert isinstance(store, memoryd.StoreHandle)
        return store

    def test_hidden_ids_are_listed_only_by_their_prefix(self, handle: memoryd.StoreHandle) -> None:
        """Ids in the hidden space are not in a plain listing, even with include_empty."""
        handle.add(_JOURNAL, [user("step")])
        handle.add("a", [user("x")])
        handle.add("n", [user("y")])
        assert handle.conversations() == ["a", "n"]
        assert handle.conversations(include_empty=True) == ["a", "n"]
        assert handle.conversations(limit=1, after="a") == ["n"]
        assert handle.conversations(prefix=HIDDEN_PREFIX) == [_JOURNAL]
        assert texts(handle.get(_JOURNAL)) == ["step"]

    def test_the_change_feed_skips_hidden_ids(self, handle: memoryd.StoreHandle) -> None:
        """tail() shows no change to a hidden id, also when only hidden changes are new."""
        handle.add("a", [user("x")])
        for n in range(3):
            handle.add(_JOURNAL, [user(f"step {n}")])
        assert [c.conversation_id for c in handle.tail()] == ["a"]
        last = handle.tail()[-1].position
        assert handle.tail(after=last) == []
        handle.add("b", [user("y")])
        assert [c.conversation_id for c in handle.tail(after=last, limit=1)] == ["b"]

    def test_an_add_clears_then_clear_with_it(self, handle: memoryd.StoreHandle) -> None:
        """add(then_clear=j) appends and leaves j without messages: no longer listed."""
        handle.add(_JOURNAL, [user("step")])
        version = handle.add("c", [user("q"), assistant("a")], then_clear=_JOURNAL)
        assert version == 1
        assert texts(handle.get("c")) == ["q", "a"]
        assert handle.get(_JOURNAL) == []
        assert handle.conversations(prefix=HIDDEN_PREFIX) == []

    def test_a_cleared_journal_reads_as_never_written(self, handle: memoryd.StoreHandle) -> None:
        """A clear of a hidden conversation erases it, memos and all (a finished run leaves
        nothing): version 0, no events, not listed even by its prefix; it may start again."""
        handle.add(_JOURNAL, [user("step")])
        handle.record(_JOURNAL, "memo", data={"owner": "p1"})
        handle.add("c", [user("q")], then_clear=_JOURNAL)
        assert (handle.version(_JOURNAL), handle.events(_JOURNAL)) == (0, [])
        assert handle.conversations(prefix=HIDDEN_PREFIX, include_empty=True) == []
        assert handle.add(_JOURNAL, [user("again")], expected_version=0) == 1
        handle.clear(_JOURNAL)
        assert (handle.version(_JOURNAL), handle.events(_JOURNAL)) == (0, [])
        assert texts(handle.get("c")) == ["q"]

    def test_a_refused_add_clears_nothing(self, handle: memoryd.StoreHandle) -> None:
        """A conflicting add leaves then_clear's messages where they were."""
        handle.add(_JOURNAL, [user("step")])
        handle.add("c", [user("q")])
        with pytest.raises(memoryd.ConflictError):
            handle.add("c", [user("r")], expected_version=0, then_clear=_JOURNAL)
        assert texts(handle.get(_JOURNAL)) == ["step"]

    def test_then_clear_must_name_another_conversation(self, handle: memoryd.StoreHandle) -> None:
        """then_clear naming the conversation added to is refused, nothing written."""
        with pytest.raises(ValueError, match="then_clear"):
            handle.add("c", [user("q")], then_clear="c")
        assert handle.version("c") == 0
