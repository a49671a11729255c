"""The import contract: ``import_events()`` writes an exported log exactly, continues it,
and refuses what does not fit, writing nothing."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

import memoryd
from memoryd.testing._messages import assistant, system, texts, user
from memoryd.testing._refused import BAD_CONVERSATION_IDS, ONE_MIB
from memoryd.testing._store import Message, Store, StoreFactory

__all__ = ["ImportContract"]


def _event(version: int, kind: str, messages: Sequence[Message] = (), **fields: Any) -> Any:
    """An event to import, with a fixed past timestamp unless one is given."""
    fields.setdefault("timestamp", 1_700_000_000.25 + version)
    return memoryd.Event(version=version, kind=kind, messages=tuple(messages), **fields)


def _a_full_log() -> list[Any]:
    """A log using every kind of event: keys, data, a fork, a pop, a memo, a compaction."""
    return [
        _event(1, "appended", [user("a"), assistant("b")], idempotency_key="k-1"),
        _event(2, "memo", data={"memo": "likes tea", "n": [1, 2.5, None]}),
        _event(3, "appended", [user("c")]),
        _event(4, "popped", [user("c")]),
        _event(5, "forked", [user("x"), assistant("y")], data={"source": "s", "source_version": 9}),
        _event(6, "compacted", [system("x and y")], data={"replaces": {"from": 5, "to": 5}}),
        _event(7, "appended", [user("z")], idempotency_key="k-7"),
    ]


def _changes_of(store: Store, cid: str) -> list[Any]:
    """The change feed's entries of ``cid``, as plain events, in feed order."""
    return [c.event for c in store.tail(limit=100_000) if c.conversation_id == cid]


class ImportContract:
    """``import_events()``: the exact import path. A backend's test class mixes this in
    (next to `StoreContract`) once it supports ``import_events``.
    """

    @pytest.fixture
    def store(self, make_store: StoreFactory) -> Store:
        """A new, empty store from ``make_store``."""
        return make_store()

    def test_import_writes_every_field_of_every_kind_exactly(self, store: Store) -> None:
        """Versions, kinds, messages, timestamps, keys and data come back as imported."""
        log = _a_full_log()
        assert store.import_events("c", log) == 7
        assert store.events("c") == log
        assert store.version("c") == 7
        assert store.get("c") == [user("x"), assistant("y"), user("z")]
        assert store.get("c", at_version=3) == [user("a"), assistant("b"), user("c")]
        assert store.get("c", limit=1) == [user("z")]
        assert _changes_of(store, "c") == log
        assert "c" in store.conversations()

    def test_imported_log_continues_like_a_written_one(self, store: Store) -> None:
        """After an import, the message count, keys and versions behave as if written."""
        store.import_events("c", _a_full_log())
        assert store.add("c", [user("again")], idempotency_key="k-1") == 1
        assert store.add("c", [user("w")]) == 8
        assert store.pop("c") == user("w")
        assert store.pop("c") == user("z")
        assert store.pop("c") == assistant("y")
        assert store.pop("c") == user("x")
        assert store.pop("c") is None
        assert "c" not in store.conversations()

    def test_identical_reimport_changes_nothing(self, store: Store) -> None:
        """Importing the same events again (or a prefix of them) writes nothing."""
        log = _a_full_log()
        store.import_events("c", log)
        feed = store.tail(limit=100_000)
        assert store.import_events("c", log) == 7
        assert store.import_events("c", log[:3]) == 7
        assert store.events("c") == log
        assert store.tail(limit=100_000) == feed

    def test_import_in_chunks_continues_the_log(self, store: Store) -> None:
        """A log imported in pieces, overlapping or not, equals the log imported at once."""
        log = _a_full_log()
        assert store.import_events("c", log[:2]) == 2
        assert store.import_events("c", log[1:5]) == 5
        assert store.import_events("c", log[5:]) == 7
        assert store.events("c") == log

    def test_mismatched_reimport_raises_conflict_and_writes_nothing(self, store: Store) -> None:
        """An event that differs from the stored one at its version is a conflict."""
        log = _a_full_log()
        store.import_events("c", log)
        feed = store.tail(limit=100_000)
        other = [*log[:2], _event(3, "appended", [user("not c")]), *log[3:]]
        more = [*other, _event(8, "appended", [user("new")])]
        for attempt in (other, more, [_event(2, "memo", data={"memo": "other"})]):
            with pytest.raises(memoryd.ConflictError):
                store.import_events("c", attempt)
        assert store.events("c") == log
        assert store.tail(limit=100_000) == feed

    def test_import_that_does_not_continue_the_log_conflicts(self, store: Store) -> None:
        """New events must start at the next version: a gap or other history is refused."""
        store.add("c", [user("mine")])
        with pytest.raises(memoryd.ConflictError):
            store.import_events("c", [_event(3, "appended", [user("later")])])
        with pytest.raises(memoryd.ConflictError):
            store.import_events("c", [_event(5, "cleared"), _event(6, "appended", [user("x")])])
        with pytest.raises(memoryd.ConflictError):
            store.import_events("c", [_event(1, "appended", [user("theirs")])])
        assert store.get("c") == [user("mine")]
        assert store.version("c") == 1

    def test_a_log_starting_with_a_cleared_marker(self, store: Store) -> None:
        """An export of a cleared conversation starts with its cleared marker: kept as is."""
        log = [_event(5, "cleared"), _event(6, "appended", [user("after")])]
        assert store.import_events("c", log) == 6
        assert store.events("c") == log
        assert store.get("c") == [user("after")]
        assert store.get("c", at_version=5) == []
        with pytest.raises(ValueError, match="cleared"):
            store.get("c", at_version=4)
        assert store.import_events("c", log) == 6
        assert store.events("c") == log

    def test_a_cleared_marker_may_continue_an_emptied_conversation(self, store: Store) -> None:
        """A conversation holding no messages takes a log starting with a later clear."""
        store.add("c", [user("old")])
        store.clear("c")
        log = [_event(9, "cleared"), _event(10, "appended", [user("new")])]
        assert store.import_events("c", log) == 10
        assert store.events("c") == log
        assert store.get("c") == [user("new")]

    def test_a_cleared_event_inside_a_log_deletes_what_came_before(self, store: Store) -> None:
        """A clear in the middle of the imported log acts as clear() does."""
        log = [
            _event(1, "appended", [user("a")]),
            _event(2, "cleared"),
            _event(3, "appended", [user("b")]),
        ]
        assert store.import_events("c", log) == 3
        assert store.events("c") == log[1:]
        assert store.get("c") == [user("b")]
        assert store.import_events("c", log) == 3

    def test_a_fork_event_is_imported_as_a_fork(self, store: Store) -> None:
        """A forked event keeps its kind, copied history and source data."""
        store.add("source", [user("a"), assistant("b")])
        store.fork("source", "copy")
        log = store.events("copy")
        assert [e.kind for e in log] == ["forked"]
        assert store.import_events("target", log) == 1
        assert store.events("target") == log
        assert store.get("target") == [user("a"), assistant("b")]
        assert store.pop("target") == assistant("b")

    def test_an_imported_log_keeps_its_system_messages_for_windows(self, store: Store) -> None:
        """After an import (appends, a pop, a clear, a fork), ``get(limit, system=True)``
        holds the system messages of the imported history, whole or chunk by chunk."""
        store.add("src", [system("gone"), user("u0")])
        store.clear("src")
        store.add("src", [system("persona"), user("u1"), system("popped")])
        store.pop("src")
        store.add("src", [assistant("a1"), user("u2")])
        log = store.events("src")
        assert store.import_events("whole", log) == store.version("src")
        for event in log:
            store.import_events("chunks", [event])
        for cid in ("whole", "chunks"):
            assert texts(store.get(cid, limit=1, system=True)) == ["persona", "u2"], cid
        store.fork("src", "forked")
        assert store.import_events("copy", store.events("forked")) == 1
        assert texts(store.get("copy", limit=0, system=True)) == ["persona"]

    def test_memo_events_are_imported(self, store: Store) -> None:
        """A log of memos alone gives a version but no messages, as record() does."""
        log = [_event(1, "memo", data={"memo": "m1"}), _event(2, "memo", data={"memo": "m2"})]
        assert store.import_events("m", log) == 2
        assert store.events("m") == log
        assert store.get("m") == []
        assert "m" not in store.conversations()
        assert store.add("m", [user("hi")]) == 3

    @pytest.mark.parametrize(
        ("events", "error"),
        [
            pytest.param([], ValueError, id="empty"),
            pytest.param(None, ValueError, id="none"),
            pytest.param("events", ValueError, id="a-str"),
            pytest.param([{"version": 1}], ValueError, id="not-an-event"),
            pytest.param(
                [_event(1, "appended", [user("a")]), _event(3, "appended", [user("b")])],
                ValueError,
                id="version-gap",
            ),
            pytest.param(
                [_event(2, "appended", [user("a")]), _event(1, "appended", [user("b")])],
                ValueError,
                id="versions-decrease",
            ),
            pytest.param(
                [_event(1, "appended", [user("a")]), _event(2, "appended", [{"role": "robot"}])],
                memoryd.InvalidMessage,
                id="bad-message-after-a-good-event",
            ),
            pytest.param(
                [_event(1, "memo", data={"when": object()})], ValueError, id="data-object"
            ),
            pytest.param(
                [_event(1, "memo", data={"big": "x" * ONE_MIB})], ValueError, id="data-too-big"
            ),
            pytest.param(
                [_event(1, "appended", [user("a")], idempotency_key="k" * 300)],
                ValueError,
                id="key-too-long",
            ),
            pytest.param(
                [_event(1, "appended", [user("x" * ONE_MIB)])],
                memoryd.InvalidMessage,
                id="message-too-big",
            ),
        ],
    )
    def test_import_refuses_bad_input(
        self, store: Store, events: Any, error: type[Exception]
    ) -> None:
        """Bad events are refused before anything is written."""
        with pytest.raises(error):
            store.import_events("c", events)
        assert store.version("c") == 0
        assert store.events("c") == []
        assert store.tail() == []

    @pytest.mark.parametrize("cid", BAD_CONVERSATION_IDS)
    def test_import_refuses_bad_conversation_ids(self, store: Store, cid: Any) -> None:
        """A bad id raises InvalidConversationId; nothing is written."""
        with pytest.raises(memoryd.InvalidConversationId):
            store.import_events(cid, [_event(1, "appended", [user("a")])])
        assert store.tail() == []
