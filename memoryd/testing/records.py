"""The record contract: ``record()`` appends memo and compacted events that leave the
history as it was."""

from __future__ import annotations

from typing import Any

import pytest

import memoryd
import supervisors
from memoryd.store.requests import HIDDEN_PREFIX
from memoryd.testing._messages import assistant, system, texts, user
from memoryd.testing._refused import ONE_MIB
from memoryd.testing._store import Store, StoreFactory

__all__ = ["RecordContract"]


class RecordContract:
    """``record()``: memo and compacted events. A backend's test class mixes this in
    (next to `StoreContract`) once it supports ``record``; it uses the same ``store``
    fixture and ``make_store`` factory.
    """

    @pytest.fixture
    def store(self, make_store: StoreFactory) -> Store:
        """A new, empty store from ``make_store``."""
        return make_store()

    def test_record_appends_an_event_that_leaves_the_history_unchanged(self, store: Store) -> None:
        """record() of a memo or compacted event bumps the version; get() is unchanged."""
        store.add("c", [user("a"), assistant("b")])
        assert store.record("c", "memo", data={"note": "x", "n": [1, 2.5, None]}) == 2
        summary = system("summary of a")
        version = store.record(
            "c", "compacted", messages=[summary], data={"replaces": {"from_version": 1}}
        )
        assert version == 3
        assert texts(store.get("c")) == ["a", "b"]
        assert texts(store.get("c", limit=1)) == ["b"]
        assert store.pop("c") == assistant("b")
        assert texts(store.get("c")) == ["a"]
        kinds = [(e.kind, e.data) for e in store.events("c")]
        assert kinds[1:3] == [
            ("memo", {"note": "x", "n": [1, 2.5, None]}),
            ("compacted", {"replaces": {"from_version": 1}}),
        ]
        assert list(store.events("c")[2].messages) == [summary]

    def test_record_on_an_empty_conversation_lists_no_conversation(self, store: Store) -> None:
        """A memo alone gives a version but no messages, so conversations() omits it."""
        assert store.record("m", "memo", data={"k": 1}) == 1
        assert store.get("m") == []
        assert store.version("m") == 1
        assert "m" not in store.conversations()

    def test_record_honours_idempotency_and_expected_version(self, store: Store) -> None:
        """A repeated key writes nothing; a wrong expected_version raises ConflictError."""
        record = store.record
        assert record("c", "memo", data={"k": 1}, idempotency_key="memo-1") == 1
        assert record("c", "memo", data={"k": 2}, idempotency_key="memo-1") == 1
        assert len(store.events("c")) == 1
        with pytest.raises(memoryd.ConflictError):
            record("c", "memo", data={"k": 3}, expected_version=0)
        assert record("c", "memo", data={"k": 3}, expected_version=1) == 2

    def test_record_survives_a_crash(self, store: Store) -> None:
        """A recorded memo is still in the log after the store restarts."""
        store.record("c", "memo", data={"k": "v"})
        supervisors.kill(store.name)
        assert [(e.kind, e.data) for e in store.events("c")] == [("memo", {"k": "v"})]

    def test_a_superseding_memo_leaves_itself_alone_in_the_log(self, store: Store) -> None:
        """Each superseding memo (to a hidden id) replaces the events before it; the version
        counts on, compare-and-set still holds, and a restart keeps it so."""
        lease = f"{HIDDEN_PREFIX}lease/t/k"
        assert store.record(lease, "memo", data={"n": 1}) == 1
        assert store.record(lease, "memo", data={"n": 2}, supersede=True) == 2
        assert store.record(lease, "memo", data={"n": 3}, expected_version=2, supersede=True) == 3
        with pytest.raises(memoryd.ConflictError):
            store.record(lease, "memo", data={"n": 4}, expected_version=2, supersede=True)
        assert [(e.version, e.kind, e.data) for e in store.events(lease)] == [(3, "memo", {"n": 3})]
        assert [e.version for e in store.events(lease, after=2)] == [3]
        assert store.version(lease) == 3
        assert store.conversations(prefix=HIDDEN_PREFIX, include_empty=True) == [lease]
        supervisors.kill(store.name)
        assert [(e.version, e.data) for e in store.events(lease)] == [(3, {"n": 3})]
        assert store.record(lease, "memo", data={"n": 5}, expected_version=3) == 4
        assert [e.version for e in store.events(lease)] == [3, 4]

    def test_a_superseding_memo_never_drops_messages(self, store: Store) -> None:
        """A conversation holding messages is refused (nothing written); once cleared, it
        may be superseded."""
        cid = f"{HIDDEN_PREFIX}kept"
        store.add(cid, [user("a")])
        with pytest.raises(ValueError, match="holds 1 message"):
            store.record(cid, "memo", data={"k": 2}, supersede=True)
        assert store.version(cid) == 1
        assert [e.kind for e in store.events(cid)] == ["appended"]
        assert texts(store.get(cid)) == ["a"]
        store.clear(cid)
        version = store.record(cid, "memo", data={"k": 3}, supersede=True)
        assert [(e.version, e.kind, e.data) for e in store.events(cid)] == [
            (version, "memo", {"k": 3})
        ]
        assert store.get(cid) == []

    @pytest.mark.parametrize(
        ("kind", "options", "error"),
        [
            pytest.param("appended", {}, ValueError, id="kind-appended"),
            pytest.param("bogus", {}, ValueError, id="kind-unknown"),
            pytest.param("memo", {"data": {"when": object()}}, ValueError, id="data-object"),
            pytest.param("memo", {"data": {1: "x"}}, ValueError, id="data-int-key"),
            pytest.param("memo", {"data": {"x": float("nan")}}, ValueError, id="data-nan"),
            pytest.param("memo", {"data": ["a"]}, ValueError, id="data-list"),
            pytest.param(
                "compacted", {"messages": [{"role": "robot"}]}, memoryd.InvalidMessage, id="msg"
            ),
            pytest.param("memo", {"data": {"big": "x" * ONE_MIB}}, ValueError, id="data-too-big"),
            pytest.param("compacted", {"supersede": True}, ValueError, id="supersede-compacted"),
            pytest.param("memo", {"supersede": "yes"}, ValueError, id="supersede-not-bool"),
            pytest.param("memo", {"supersede": True}, ValueError, id="supersede-visible-id"),
        ],
    )
    def test_record_refuses_bad_input(
        self, store: Store, kind: str, options: dict[str, Any], error: type[Exception]
    ) -> None:
        """Bad kinds, non-JSON data and bad messages are refused; nothing is written."""
        with pytest.raises(error):
            store.record("c", kind, **options)
        assert store.version("c") == 0
