"""The store contract (DESIGN.md §3.1 to §5), written once and run against every backend.

A backend's test module subclasses :class:`StoreContract` and provides the ``make_store``
fixture: a factory ``make_store(**options) -> store handle`` that starts a new, empty store
each time it is called (``name=`` is passed through when given; otherwise every store gets
a name of its own). Stores are stopped by the suite-wide ``memoryd.shutdown()`` fixture.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import pytest

import memoryd
import supervisors
from tests.helpers import Worker

Message = dict[str, Any]


class Store(Protocol):
    """What the tests call on a store handle (the binding API)."""

    name: str

    def add(
        self,
        cid: Any,
        messages: Any,
        *,
        idempotency_key: str | None = None,
        expected_version: int | None = None,
    ) -> int: ...
    def get(
        self, cid: Any, *, limit: int | None = None, at_version: int | None = None
    ) -> list[Message]: ...
    def clear(self, cid: Any) -> None: ...
    def pop(self, cid: Any) -> Message | None: ...
    def version(self, cid: Any) -> int: ...
    def events(self, cid: Any, *, after: int = 0) -> list[Any]: ...
    def conversations(
        self,
        *,
        prefix: str = "",
        after: str | None = None,
        limit: int | None = None,
        include_empty: bool = False,
    ) -> list[str]: ...
    def fork(self, source: Any, target: Any, *, at_version: int | None = None) -> int: ...
    def record(
        self,
        cid: Any,
        kind: Any,
        *,
        messages: Any = (),
        data: Any = None,
        idempotency_key: str | None = None,
        expected_version: int | None = None,
    ) -> int: ...
    def import_events(self, cid: Any, events: Any) -> int: ...
    def tail(self, *, after: int = 0, limit: int = 1000, timeout: float = 0.0) -> list[Any]: ...
    def stats(self) -> dict[str, Any]: ...
    def stop(self) -> None: ...


StoreFactory = Callable[..., Store]


# --- message builders (canonical OpenAI Chat Completions dicts) -----------------------------


def user(text: str) -> Message:
    return {"role": "user", "content": text}


def assistant(text: str) -> Message:
    return {"role": "assistant", "content": text}


def system(text: str) -> Message:
    return {"role": "system", "content": text}


def tool_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def assistant_calls(*calls: dict[str, Any]) -> Message:
    return {"role": "assistant", "content": None, "tool_calls": list(calls)}


def tool_result(call_id: str, content: str) -> Message:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def texts(messages: Sequence[Message]) -> list[Any]:
    return [m["content"] for m in messages]


# --- inputs the contract refuses ------------------------------------------------------------

BAD_CONVERSATION_IDS: list[Any] = [
    pytest.param("", id="empty"),
    pytest.param("x" * 257, id="257-ascii-bytes"),
    pytest.param("\u00e9" * 129, id="258-utf8-bytes"),
    pytest.param("a\nb", id="newline"),
    pytest.param("a\x00b", id="nul"),
    pytest.param("\t", id="tab"),
    pytest.param("a\x1fb", id="unit-separator"),
    pytest.param("a\x7fb", id="delete"),
    pytest.param("a\x85b", id="c1-next-line"),
    pytest.param(None, id="none"),
    pytest.param(7, id="int"),
    pytest.param(b"abc", id="bytes"),
    pytest.param(["a"], id="list"),
]

BAD_MESSAGE_BATCHES: list[Any] = [
    pytest.param([{"role": "robot", "content": "hi"}], id="unknown-role"),
    pytest.param([{"content": "hi"}], id="missing-role"),
    pytest.param([{"role": 1, "content": "hi"}], id="non-str-role"),
    pytest.param([{"role": "tool", "content": "42"}], id="tool-without-tool-call-id"),
    pytest.param([{"role": "assistant", "content": None}], id="assistant-none-without-tool-calls"),
    pytest.param([{"role": "user", "content": None}], id="user-content-none"),
    pytest.param([{"role": "user", "content": 42}], id="int-content"),
    pytest.param([{"role": "user", "content": [1, 2]}], id="content-parts-not-dicts"),
    pytest.param([{"role": "user", "content": "x", "metadata": {"when": object()}}], id="object"),
    pytest.param([{"role": "user", "content": "x", "metadata": {1, 2}}], id="set-value"),
    pytest.param([{"role": "user", "content": "x", "raw": b"\x00\x01"}], id="bytes-value"),
    pytest.param(["hello"], id="message-not-a-dict"),
    pytest.param([None], id="message-none"),
    pytest.param([], id="empty-list"),
    pytest.param({"role": "user", "content": "hi"}, id="a-dict-not-a-list"),
    pytest.param("hello", id="a-str-not-a-list"),
    pytest.param(None, id="none-not-a-list"),
    pytest.param(
        [user("fine"), {"role": "robot", "content": "bad"}, user("fine too")],
        id="one-bad-among-good",
    ),
]

ONE_MIB = 1024 * 1024


def _assert_nothing_written(store: Store, cid: str, before: tuple[int, list[Message]]) -> None:
    version, history = before
    assert store.version(cid) == version
    assert store.get(cid) == history


class StoreContract:
    """Behaviour every store backend must show.

    A backend's test class defines the fixture ``make_store`` (``make_store(**options)``
    starts a fresh, empty store); pytest reports a missing one as a missing fixture.
    """

    @pytest.fixture
    def store(self, make_store: StoreFactory) -> Store:
        return make_store()

    # --- basics and ordering ----------------------------------------------------------------

    def test_unknown_conversation_reads_as_empty(self, store: Store) -> None:
        """A conversation never written has no messages, version 0 and no events."""
        assert store.get("nobody") == []
        assert store.version("nobody") == 0
        assert store.events("nobody") == []

    def test_add_returns_the_new_version(self, store: Store) -> None:
        """Each add returns the conversation's version after it: 1, 2, 3, ..."""
        assert store.add("c", [user("one")]) == 1
        assert store.add("c", [user("two"), assistant("three")]) == 2
        assert store.add("c", [user("four")]) == 3
        assert store.version("c") == 3

    def test_get_returns_messages_in_insertion_order(self, store: Store) -> None:
        """get returns every message added, chronologically, across adds."""
        store.add("c", [system("s"), user("u1")])
        store.add("c", [assistant("a1")])
        store.add("c", [user("u2"), assistant("a2"), user("u3")])
        assert texts(store.get("c")) == ["s", "u1", "a1", "u2", "a2", "u3"]

    def test_messages_round_trip_unchanged(self, store: Store) -> None:
        """Canonical messages come back equal, extra JSON-compatible keys included."""
        batch = [
            system("be brief"),
            {"role": "developer", "content": "developer note"},
            {"role": "user", "content": "hi", "name": "alice", "metadata": {"n": [1, 2.5, None]}},
            {"role": "assistant", "content": "hello", "metadata": {"ok": True, "tags": []}},
        ]
        store.add("c", batch)
        assert store.get("c") == batch

    def test_add_of_many_messages_is_one_event(self, store: Store) -> None:
        """One add of several messages is one event holding all of them."""
        batch = [user("a"), assistant("b"), user("c")]
        store.add("c", batch)
        events = store.events("c")
        assert len(events) == 1
        assert list(events[0].messages) == batch

    # --- isolation ----------------------------------------------------------------------------

    PREFIX_IDS = ("a", "ab", "a\u00e9", "ae\u0301", "a/b", "a b", "A", "a.", "aa", "b")

    def test_conversations_sharing_a_prefix_are_isolated(self, store: Store) -> None:
        """Ids that are prefixes of one another never see each other's messages."""
        for cid in self.PREFIX_IDS:
            store.add(cid, [user(f"only {cid}")])
            store.add(cid, [assistant(f"reply {cid}")])
        for cid in self.PREFIX_IDS:
            assert texts(store.get(cid)) == [f"only {cid}", f"reply {cid}"]
            assert store.version(cid) == 2
            assert [e.version for e in store.events(cid)] == [1, 2]

    def test_clearing_one_conversation_leaves_prefix_siblings(self, store: Store) -> None:
        """clear("a") leaves "ab", "a/b" and the others untouched."""
        for cid in self.PREFIX_IDS:
            store.add(cid, [user(cid)])
        store.clear("a")
        store.pop("ab")
        assert store.get("a") == []
        assert store.get("ab") == []
        for cid in self.PREFIX_IDS:
            if cid not in ("a", "ab"):
                assert texts(store.get(cid)) == [cid]

    def test_longest_valid_conversation_id_is_accepted(self, store: Store) -> None:
        """An id of exactly 256 UTF-8 bytes is valid."""
        cid = "\u00e9" * 128
        store.add(cid, [user("x")])
        assert texts(store.get(cid)) == ["x"]

    # --- limit ------------------------------------------------------------------------------

    def test_limit_returns_the_last_n_in_chronological_order(self, store: Store) -> None:
        """get(limit=N) returns the last N messages, oldest first."""
        for i in range(10):
            store.add("c", [user(f"m{i}")])
        assert texts(store.get("c", limit=3)) == ["m7", "m8", "m9"]

    def test_limit_spans_event_boundaries(self, store: Store) -> None:
        """limit counts messages, not events."""
        store.add("c", [user("a"), assistant("b")])
        store.add("c", [user("c"), assistant("d")])
        assert texts(store.get("c", limit=3)) == ["b", "c", "d"]

    def test_limit_larger_than_history_returns_everything(self, store: Store) -> None:
        """get(limit=N) with N above the message count returns the whole history."""
        store.add("c", [user("a"), user("b")])
        assert texts(store.get("c", limit=100)) == ["a", "b"]

    def test_limit_zero_returns_nothing(self, store: Store) -> None:
        """get(limit=0) returns []."""
        store.add("c", [user("a")])
        assert store.get("c", limit=0) == []

    def test_negative_limit_raises_value_error(self, store: Store) -> None:
        """get(limit=-1) raises ValueError."""
        store.add("c", [user("a")])
        with pytest.raises(ValueError):
            store.get("c", limit=-1)

    def test_limit_applies_to_history_at_version(self, store: Store) -> None:
        """get(at_version=v, limit=N) is the last N messages of the history at v."""
        for i in range(5):
            store.add("c", [user(f"m{i}")])
        assert texts(store.get("c", at_version=3, limit=2)) == ["m1", "m2"]

    # --- copies, not aliases -------------------------------------------------------------------

    def test_mutating_returned_messages_changes_nothing_stored(self, store: Store) -> None:
        """Messages returned by get are fresh copies."""
        store.add("c", [{"role": "user", "content": [{"type": "text", "text": "hi"}]}])
        got = store.get("c")
        got[0]["content"][0]["text"] = "changed"
        got[0]["role"] = "system"
        got.append(user("extra"))
        assert store.get("c") == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]

    def test_mutating_the_added_list_changes_nothing_stored(self, store: Store) -> None:
        """add copies its input: later changes to the list or its dicts do not leak in."""
        batch = [{"role": "user", "content": "hi", "metadata": {"tags": ["a"]}}]
        store.add("c", batch)
        batch[0]["content"] = "changed"
        batch[0]["metadata"]["tags"].append("b")
        batch.append(user("extra"))
        assert store.get("c") == [{"role": "user", "content": "hi", "metadata": {"tags": ["a"]}}]

    def test_mutating_event_messages_changes_nothing_stored(self, store: Store) -> None:
        """Messages inside returned events are copies too."""
        store.add("c", [user("hi")])
        event = store.events("c")[0]
        event.messages[0]["content"] = "changed"
        assert texts(store.get("c")) == ["hi"]
        assert texts(store.events("c")[0].messages) == ["hi"]

    # --- tool calls, unicode, content parts ----------------------------------------------------

    def test_tool_call_and_tool_result_round_trip(self, store: Store) -> None:
        """An assistant tool call and its tool result are stored and returned as given."""
        batch = [
            user("weather in Paris?"),
            assistant_calls(tool_call("call_1", "get_weather", '{"city": "Paris"}')),
            tool_result("call_1", "18 C, cloudy"),
            assistant("It is 18 C and cloudy."),
        ]
        store.add("c", batch)
        assert store.get("c") == batch

    def test_parallel_tool_calls_round_trip(self, store: Store) -> None:
        """An assistant message with several tool calls keeps them all, in order."""
        batch = [
            user("compare"),
            assistant_calls(
                tool_call("call_a", "lookup", '{"q": "a"}'),
                tool_call("call_b", "lookup", '{"q": "b"}'),
                tool_call("call_c", "lookup", '{"q": "c"}'),
            ),
            tool_result("call_b", "B"),
            tool_result("call_a", "A"),
            tool_result("call_c", "C"),
        ]
        store.add("c", batch[:2])
        store.add("c", batch[2:])
        assert store.get("c") == batch

    def test_unicode_content_round_trips(self, store: Store) -> None:
        """Non-ASCII text (emoji, CJK, RTL, combining marks, astral planes) is kept exactly."""
        text = "h\u00e9llo \U0001f600 \u4f60\u597d \u05e9\u05dc\u05d5\u05dd e\u0301 \U00010348\n\t"
        store.add("c\u00e9 \U0001f600", [user(text)])
        assert texts(store.get("c\u00e9 \U0001f600")) == [text]

    def test_content_part_lists_round_trip(self, store: Store) -> None:
        """List-of-parts content (text and image parts) round-trips."""
        message = {
            "role": "user",
            "content": [
                {"type": "text", "text": "what is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0K"}},
            ],
        }
        store.add("c", [message])
        assert store.get("c") == [message]

    def test_unicode_ids_are_not_normalised(self, store: Store) -> None:
        """ "a\\u00e9" (NFC) and "ae\\u0301" (NFD) are different conversations."""
        store.add("a\u00e9", [user("nfc")])
        store.add("ae\u0301", [user("nfd")])
        assert texts(store.get("a\u00e9")) == ["nfc"]
        assert texts(store.get("ae\u0301")) == ["nfd"]

    # --- bad input --------------------------------------------------------------------------

    @pytest.mark.parametrize("cid", BAD_CONVERSATION_IDS)
    def test_bad_conversation_id_rejected_and_nothing_written(self, store: Store, cid: Any) -> None:
        """add with an invalid id raises InvalidConversationId and writes nothing anywhere."""
        with pytest.raises(memoryd.InvalidConversationId):
            store.add(cid, [user("x")])
        assert store.tail() == []
        assert store.conversations() == []

    @pytest.mark.parametrize(
        "call",
        [
            pytest.param(lambda s, c: s.get(c), id="get"),
            pytest.param(lambda s, c: s.version(c), id="version"),
            pytest.param(lambda s, c: s.events(c), id="events"),
            pytest.param(lambda s, c: s.clear(c), id="clear"),
            pytest.param(lambda s, c: s.pop(c), id="pop"),
            pytest.param(lambda s, c: s.fork(c, "ok"), id="fork-source"),
            pytest.param(lambda s, c: s.fork("ok", c), id="fork-target"),
        ],
    )
    @pytest.mark.parametrize("cid", ["", "a\nb", "x" * 257, None])
    def test_every_method_rejects_a_bad_conversation_id(
        self, store: Store, call: Callable[[Store, Any], Any], cid: Any
    ) -> None:
        """Every method taking a conversation id raises InvalidConversationId for a bad one."""
        store.add("ok", [user("keep")])
        with pytest.raises(memoryd.InvalidConversationId):
            call(store, cid)
        assert texts(store.get("ok")) == ["keep"]
        assert len(store.tail()) == 1

    @pytest.mark.parametrize("batch", BAD_MESSAGE_BATCHES)
    def test_bad_messages_rejected_and_nothing_written(self, store: Store, batch: Any) -> None:
        """add with an invalid message (or message list) raises InvalidMessage, writes nothing."""
        store.add("c", [user("before")])
        before = (store.version("c"), store.get("c"))
        with pytest.raises(memoryd.InvalidMessage):
            store.add("c", batch)
        _assert_nothing_written(store, "c", before)
        assert len(store.events("c")) == 1

    def test_message_over_max_message_bytes_rejected(self, store: Store) -> None:
        """A message over the default limit (1 MiB) raises InvalidMessage and writes nothing."""
        store.add("c", [user("before")])
        before = (store.version("c"), store.get("c"))
        with pytest.raises(memoryd.InvalidMessage):
            store.add("c", [user("a"), user("x" * (ONE_MIB + 1))])
        _assert_nothing_written(store, "c", before)

    def test_large_message_under_the_limit_round_trips(self, store: Store) -> None:
        """A 512 KiB message (well under the 1 MiB default) is stored whole."""
        big = "0123456789abcdef" * (ONE_MIB // 32)
        store.add("c", [user(big), user("small")])
        assert texts(store.get("c")) == [big, "small"]

    # --- idempotency ---------------------------------------------------------------------------

    def test_repeated_idempotency_key_returns_the_original_version(self, store: Store) -> None:
        """A second add with the same key returns the version the first one produced."""
        first = store.add("c", [user("a")], idempotency_key="k1")
        assert store.add("c", [user("a")], idempotency_key="k1") == first

    def test_repeated_idempotency_key_writes_nothing(self, store: Store) -> None:
        """A repeated key leaves version, history and event log unchanged."""
        store.add("c", [user("a")], idempotency_key="k1")
        before = (store.version("c"), store.get("c"))
        store.add("c", [user("a")], idempotency_key="k1")
        _assert_nothing_written(store, "c", before)
        assert len(store.events("c")) == 1

    def test_repeated_idempotency_key_with_other_messages_writes_nothing(
        self, store: Store
    ) -> None:
        """The key alone decides: a repeat carrying different messages is still a no-op."""
        store.add("c", [user("a")], idempotency_key="k1")
        assert store.add("c", [user("different")], idempotency_key="k1") == 1
        assert texts(store.get("c")) == ["a"]

    def test_repeated_idempotency_key_after_later_writes(self, store: Store) -> None:
        """Retrying an old key after other writes returns its original version, writes nothing."""
        store.add("c", [user("a")], idempotency_key="k1")
        store.add("c", [user("b")], idempotency_key="k2")
        store.add("c", [user("c")])
        assert store.add("c", [user("a")], idempotency_key="k1") == 1
        assert store.version("c") == 3
        assert texts(store.get("c")) == ["a", "b", "c"]

    def test_repeated_idempotency_key_after_clear_writes_nothing(self, store: Store) -> None:
        """A key used before a clear is still remembered after it."""
        store.add("c", [user("a")], idempotency_key="k1")
        store.clear("c")
        assert store.add("c", [user("a")], idempotency_key="k1") == 1
        assert store.get("c") == []
        assert store.version("c") == 2

    def test_idempotency_keys_are_scoped_per_conversation(self, store: Store) -> None:
        """The same key in two conversations makes two writes."""
        assert store.add("c1", [user("x")], idempotency_key="k") == 1
        store.add("c2", [user("first")])
        assert store.add("c2", [user("y")], idempotency_key="k") == 2
        assert texts(store.get("c1")) == ["x"]
        assert texts(store.get("c2")) == ["first", "y"]

    def test_event_records_its_idempotency_key(self, store: Store) -> None:
        """An event keeps the key it was written with (None without one)."""
        store.add("c", [user("a")], idempotency_key="k1")
        store.add("c", [user("b")])
        assert [e.idempotency_key for e in store.events("c")] == ["k1", None]

    def test_retry_with_same_key_and_stale_expected_version_returns_original(
        self, store: Store
    ) -> None:
        """A retried write (same key, now-stale expected_version) is answered, not a conflict."""
        assert store.add("c", [user("a")], idempotency_key="k1", expected_version=0) == 1
        assert store.add("c", [user("a")], idempotency_key="k1", expected_version=0) == 1
        assert store.version("c") == 1

    # --- optimistic concurrency -----------------------------------------------------------------

    def test_matching_expected_version_appends(self, store: Store) -> None:
        """add(expected_version=current) succeeds."""
        assert store.add("c", [user("a")], expected_version=0) == 1
        assert store.add("c", [user("b")], expected_version=1) == 2

    def test_mismatched_expected_version_raises_conflict(self, store: Store) -> None:
        """add(expected_version != current) raises ConflictError and writes nothing."""
        store.add("c", [user("a")])
        before = (store.version("c"), store.get("c"))
        for wrong in (0, 2, 7):
            with pytest.raises(memoryd.ConflictError):
                store.add("c", [user("b")], expected_version=wrong)
        _assert_nothing_written(store, "c", before)

    def test_conflicting_add_does_not_consume_its_idempotency_key(self, store: Store) -> None:
        """A write refused for a conflict can be made later with the same key."""
        store.add("c", [user("a")])
        with pytest.raises(memoryd.ConflictError):
            store.add("c", [user("b")], idempotency_key="k", expected_version=0)
        assert store.add("c", [user("b")], idempotency_key="k", expected_version=1) == 2
        assert texts(store.get("c")) == ["a", "b"]

    # --- pop ----------------------------------------------------------------------------------

    def test_pop_returns_and_removes_the_last_message(self, store: Store) -> None:
        """pop returns the last message and get no longer holds it."""
        store.add("c", [user("a"), assistant("b"), user("c")])
        assert store.pop("c") == user("c")
        assert texts(store.get("c")) == ["a", "b"]
        assert store.pop("c") == assistant("b")
        assert texts(store.get("c")) == ["a"]

    def test_pop_writes_a_popped_event(self, store: Store) -> None:
        """pop increments the version by one with a 'popped' event."""
        store.add("c", [user("a"), user("b")])
        store.pop("c")
        assert store.version("c") == 2
        assert [e.kind for e in store.events("c")] == ["appended", "popped"]

    def test_pop_on_empty_conversation_returns_none_and_writes_nothing(self, store: Store) -> None:
        """pop on a never-written or emptied conversation returns None, version unchanged."""
        assert store.pop("never") is None
        assert store.version("never") == 0
        store.add("c", [user("a")])
        store.pop("c")
        assert store.pop("c") is None
        assert store.version("c") == 2
        assert store.tail(after=0)[-1].kind == "popped"

    def test_add_after_pop_appends_after_the_remaining_messages(self, store: Store) -> None:
        """After a pop, new messages follow the ones that remain."""
        store.add("c", [user("a"), user("b")])
        store.pop("c")
        store.add("c", [user("c")])
        assert texts(store.get("c")) == ["a", "c"]

    # --- clear --------------------------------------------------------------------------------

    def test_clear_removes_every_message(self, store: Store) -> None:
        """After clear, get returns []."""
        store.add("c", [user("a"), user("b")])
        store.clear("c")
        assert store.get("c") == []

    def test_clear_writes_a_cleared_event(self, store: Store) -> None:
        """clear increments the version by one and the log starts at the 'cleared' marker."""
        store.add("c", [user("a")])
        store.add("c", [user("b")])
        store.clear("c")
        assert store.version("c") == 3
        events = store.events("c")
        assert [(e.version, e.kind) for e in events] == [(3, "cleared")]

    def test_clear_deletes_earlier_event_payloads(self, store: Store) -> None:
        """After clear no event before the marker (nor its messages) can be read back."""
        store.add("c", [user("secret")])
        store.clear("c")
        for event in store.events("c"):
            assert event.kind != "appended"
            assert all(m.get("content") != "secret" for m in event.messages)
        with pytest.raises(ValueError):
            store.get("c", at_version=1)

    def test_clear_of_empty_conversation_writes_nothing(self, store: Store) -> None:
        """clear on a conversation holding nothing is a no-op: no event, same version."""
        store.clear("never")
        assert store.version("never") == 0
        assert store.events("never") == []
        store.add("c", [user("a")])
        store.clear("c")
        store.clear("c")
        assert store.version("c") == 2
        store.add("d", [user("a")])
        store.pop("d")
        store.clear("d")
        assert store.version("d") == 2
        assert store.tail()[-1].conversation_id == "d"
        assert store.tail()[-1].kind == "popped"

    def test_add_after_clear_continues_the_version(self, store: Store) -> None:
        """Versions keep counting across a clear; history holds only the new messages."""
        store.add("c", [user("a")])
        store.clear("c")
        assert store.add("c", [user("b")]) == 3
        assert texts(store.get("c")) == ["b"]
        assert [e.kind for e in store.events("c")] == ["cleared", "appended"]

    # --- at_version ---------------------------------------------------------------------------

    def test_at_version_returns_history_right_after_that_event(self, store: Store) -> None:
        """get(at_version=v) is the history as it was right after event v."""
        store.add("c", [user("a")])
        store.add("c", [user("b"), user("c")])
        store.pop("c")
        store.add("c", [user("d")])
        assert texts(store.get("c", at_version=1)) == ["a"]
        assert texts(store.get("c", at_version=2)) == ["a", "b", "c"]
        assert texts(store.get("c", at_version=3)) == ["a", "b"]
        assert texts(store.get("c", at_version=4)) == ["a", "b", "d"]

    def test_at_current_version_equals_get(self, store: Store) -> None:
        """get(at_version=version()) equals get()."""
        store.add("c", [user("a")])
        store.add("c", [user("b")])
        assert store.get("c", at_version=store.version("c")) == store.get("c")

    def test_at_version_beyond_current_raises_value_error(self, store: Store) -> None:
        """get(at_version=v) with v above the current version raises ValueError."""
        store.add("c", [user("a")])
        with pytest.raises(ValueError):
            store.get("c", at_version=2)

    def test_at_version_before_last_clear_raises_value_error(self, store: Store) -> None:
        """History from before the last clear is gone: asking for it raises ValueError."""
        store.add("c", [user("a")])
        store.add("c", [user("b")])
        store.clear("c")
        store.add("c", [user("c")])
        for gone in (1, 2):
            with pytest.raises(ValueError):
                store.get("c", at_version=gone)

    def test_at_version_of_the_clear_is_empty(self, store: Store) -> None:
        """get(at_version=<the clear's version>) returns []."""
        store.add("c", [user("a")])
        store.clear("c")
        store.add("c", [user("b")])
        assert store.get("c", at_version=2) == []
        assert texts(store.get("c", at_version=3)) == ["b"]

    # --- fork ---------------------------------------------------------------------------------

    def test_fork_copies_the_source_history(self, store: Store) -> None:
        """After fork, the target holds a copy of the source's messages."""
        store.add("src", [system("s"), user("a")])
        store.add("src", [assistant("b")])
        store.fork("src", "dst")
        assert store.get("dst") == store.get("src")

    def test_fork_returns_the_target_version(self, store: Store) -> None:
        """fork returns the target's new version (one 'forked' event)."""
        store.add("src", [user("a")])
        store.add("src", [user("b")])
        assert store.fork("src", "dst") == 1
        assert store.version("dst") == 1

    def test_fork_writes_a_forked_event_on_the_target(self, store: Store) -> None:
        """The target's log holds one 'forked' event carrying the copied messages."""
        store.add("src", [user("a"), assistant("b")])
        store.fork("src", "dst")
        events = store.events("dst")
        assert [(e.version, e.kind) for e in events] == [(1, "forked")]
        assert list(events[0].messages) == [user("a"), assistant("b")]

    def test_fork_leaves_the_source_unchanged(self, store: Store) -> None:
        """fork writes nothing to the source."""
        store.add("src", [user("a")])
        store.fork("src", "dst")
        assert store.version("src") == 1
        assert [e.kind for e in store.events("src")] == ["appended"]

    def test_fork_at_version_copies_that_history(self, store: Store) -> None:
        """fork(at_version=v) copies the source history as it was at v."""
        store.add("src", [user("a")])
        store.add("src", [user("b")])
        store.add("src", [user("c")])
        store.fork("src", "dst", at_version=2)
        assert texts(store.get("dst")) == ["a", "b"]

    def test_fork_at_version_beyond_source_raises_value_error(self, store: Store) -> None:
        """fork(at_version=v) with v above the source version raises ValueError, writes nothing."""
        store.add("src", [user("a")])
        with pytest.raises(ValueError):
            store.fork("src", "dst", at_version=5)
        assert store.version("dst") == 0

    def test_fork_into_a_target_with_messages_raises_conflict(self, store: Store) -> None:
        """A target that holds messages refuses the fork with ConflictError; nothing written."""
        store.add("src", [user("a")])
        store.add("dst", [user("mine")])
        with pytest.raises(memoryd.ConflictError):
            store.fork("src", "dst")
        assert texts(store.get("dst")) == ["mine"]
        assert store.version("dst") == 1

    def test_fork_into_a_cleared_target_is_allowed(self, store: Store) -> None:
        """A target emptied by clear holds no messages, so it accepts a fork."""
        store.add("src", [user("a")])
        store.add("dst", [user("old")])
        store.clear("dst")
        assert store.fork("src", "dst") == 3
        assert texts(store.get("dst")) == ["a"]

    def test_fork_onto_itself_raises_value_error(self, store: Store) -> None:
        """fork(x, x) raises ValueError and writes nothing."""
        store.add("c", [user("a")])
        with pytest.raises(ValueError):
            store.fork("c", "c")
        assert store.version("c") == 1

    def test_forked_conversations_evolve_independently(self, store: Store) -> None:
        """Writes to source or target after a fork do not show in the other."""
        store.add("src", [user("a")])
        store.fork("src", "dst")
        store.add("src", [user("src only")])
        store.add("dst", [user("dst only")])
        store.pop("src")
        assert texts(store.get("src")) == ["a"]
        assert texts(store.get("dst")) == ["a", "dst only"]

    def test_fork_between_prefix_sharing_ids(self, store: Store) -> None:
        """Forking "a" into "ab" copies only "a"'s messages."""
        store.add("a", [user("from a")])
        store.add("a/b", [user("from a/b")])
        store.fork("a", "ab")
        assert texts(store.get("ab")) == ["from a"]

    # --- events -------------------------------------------------------------------------------

    def test_events_list_every_write_in_order(self, store: Store) -> None:
        """events returns one event per write, versions 1..n, with their kinds."""
        store.add("c", [user("a")])
        store.add("c", [user("b"), user("c")])
        store.pop("c")
        store.add("c", [user("d")])
        assert [(e.version, e.kind) for e in store.events("c")] == [
            (1, "appended"),
            (2, "appended"),
            (3, "popped"),
            (4, "appended"),
        ]

    def test_event_carries_messages_timestamp_and_type(self, store: Store) -> None:
        """An Event is a memoryd.Event with a tuple of messages and a time.time() stamp."""
        before = time.time()
        store.add("c", [user("a"), assistant("b")])
        after = time.time()
        (event,) = store.events("c")
        assert isinstance(event, memoryd.Event)
        assert event.version == 1
        assert event.kind == "appended"
        assert isinstance(event.messages, tuple)
        assert list(event.messages) == [user("a"), assistant("b")]
        assert isinstance(event.timestamp, float)
        assert before <= event.timestamp <= after
        assert event.idempotency_key is None

    def test_events_are_frozen(self, store: Store) -> None:
        """Assigning to an Event field raises FrozenInstanceError."""
        store.add("c", [user("a")])
        event = store.events("c")[0]
        with pytest.raises(dataclasses.FrozenInstanceError):
            event.version = 99

    def test_events_after_returns_only_later_events(self, store: Store) -> None:
        """events(after=v) returns the events with version > v."""
        for i in range(5):
            store.add("c", [user(str(i))])
        assert [e.version for e in store.events("c", after=3)] == [4, 5]
        assert store.events("c", after=5) == []

    # --- tail ---------------------------------------------------------------------------------

    def test_tail_of_an_empty_store_is_empty(self, store: Store) -> None:
        """A new store has no changes."""
        assert store.tail() == []

    def test_tail_positions_start_at_one_and_increase(self, store: Store) -> None:
        """Change positions are 1, 2, 3, ... in commit order."""
        for i in range(4):
            store.add(f"c{i % 2}", [user(str(i))])
        assert [c.position for c in store.tail()] == [1, 2, 3, 4]

    def test_tail_orders_changes_across_conversations(self, store: Store) -> None:
        """The global feed interleaves conversations in the order writes were made."""
        store.add("a", [user("1")])
        store.add("b", [user("2")])
        store.add("a", [user("3")])
        store.add("ab", [user("4")])
        changes = store.tail()
        assert [(c.conversation_id, c.version) for c in changes] == [
            ("a", 1),
            ("b", 1),
            ("a", 2),
            ("ab", 1),
        ]
        assert [texts(c.messages) for c in changes] == [["1"], ["2"], ["3"], ["4"]]

    def test_tail_change_carries_every_field(self, store: Store) -> None:
        """A Change is a memoryd.Change with position, id, version, kind, messages, key, time."""
        before = time.time()
        store.add("c", [user("a")], idempotency_key="k")
        after = time.time()
        (change,) = store.tail()
        assert isinstance(change, memoryd.Change)
        assert change.position == 1
        assert change.conversation_id == "c"
        assert change.version == 1
        assert change.kind == "appended"
        assert list(change.messages) == [user("a")]
        assert change.idempotency_key == "k"
        assert before <= change.timestamp <= after

    def test_tail_records_every_kind_of_write(self, store: Store) -> None:
        """pop, fork and clear appear in the feed with their kinds."""
        store.add("c", [user("a"), user("b")])
        kinds = []
        for write in (
            lambda: store.pop("c"),
            lambda: store.fork("c", "d"),
            lambda: store.clear("c"),
        ):
            last = store.tail()[-1].position
            write()
            (change,) = store.tail(after=last)
            kinds.append((change.conversation_id, change.version, change.kind))
        assert kinds == [("c", 2, "popped"), ("d", 1, "forked"), ("c", 3, "cleared")]

    def test_tail_after_excludes_earlier_positions(self, store: Store) -> None:
        """tail(after=p) returns only changes with position > p."""
        for i in range(5):
            store.add("c", [user(str(i))])
        assert [c.position for c in store.tail(after=3)] == [4, 5]
        assert store.tail(after=5) == []

    def test_tail_limit_pages_through_the_feed(self, store: Store) -> None:
        """tail(limit=n) returns at most n changes; paging with after walks all of them."""
        for i in range(7):
            store.add(f"c{i % 3}", [user(str(i))])
        assert len(store.tail(limit=3)) == 3
        seen: list[int] = []
        after = 0
        while page := store.tail(after=after, limit=3):
            assert len(page) <= 3
            seen.extend(c.position for c in page)
            after = page[-1].position
        assert seen == [1, 2, 3, 4, 5, 6, 7]

    def test_tail_with_zero_timeout_returns_empty_when_nothing_is_new(self, store: Store) -> None:
        """tail(after=last, timeout=0) returns [] at once when there is nothing newer."""
        store.add("c", [user("a")])
        assert store.tail(after=1, timeout=0.0) == []

    def test_tail_blocks_until_a_change_arrives(self, store: Store) -> None:
        """tail(timeout=5) waiting for a change returns it once another thread writes."""
        store.add("c", [user("before")])

        def write_later() -> None:
            time.sleep(0.2)
            store.add("late", [user("late")])

        writer = Worker(write_later)
        writer.start()
        changes = store.tail(after=1, timeout=5.0)
        writer.outcome()
        assert [(c.position, c.conversation_id) for c in changes] == [(2, "late")]

    def test_tail_times_out_with_an_empty_list(self, store: Store) -> None:
        """tail(timeout=t) with nothing new returns [] once the timeout passes."""
        store.add("c", [user("a")])
        assert store.tail(after=1, timeout=0.1) == []

    # --- conversations listing ----------------------------------------------------------------

    def test_conversations_are_listed_sorted(self, store: Store) -> None:
        """conversations() lists every conversation holding messages, sorted."""
        ids = ["b", "a", "a\u00e9", "ab", "a/b", "\U0001f600", "Z"]
        for cid in ids:
            store.add(cid, [user(cid)])
        assert store.conversations() == sorted(ids)

    def test_conversations_prefix_filters(self, store: Store) -> None:
        """conversations(prefix=p) lists only ids starting with p."""
        for cid in ("a", "ab", "a/b", "b", "ba", "A"):
            store.add(cid, [user(cid)])
        assert store.conversations(prefix="a") == ["a", "a/b", "ab"]
        assert store.conversations(prefix="ab") == ["ab"]
        assert store.conversations(prefix="zzz") == []

    def test_conversations_after_is_exclusive(self, store: Store) -> None:
        """conversations(after=x) starts strictly after x."""
        for cid in ("a", "b", "c", "d"):
            store.add(cid, [user(cid)])
        assert store.conversations(after="b") == ["c", "d"]
        assert store.conversations(after="bb") == ["c", "d"]

    def test_conversations_limit_paging_walks_all(self, store: Store) -> None:
        """Paging with limit and after visits every conversation exactly once, in order."""
        ids = [f"conv-{i:02d}" for i in range(11)] + ["other"]
        for cid in ids:
            store.add(cid, [user(cid)])
        seen: list[str] = []
        after: str | None = None
        while page := store.conversations(prefix="conv-", after=after, limit=4):
            assert len(page) <= 4
            seen.extend(page)
            after = page[-1]
        assert seen == [f"conv-{i:02d}" for i in range(11)]

    def test_emptied_conversations_are_not_listed(self, store: Store) -> None:
        """Cleared conversations, and ones popped to empty, are not listed."""
        for cid in ("cleared", "kept", "popped"):
            store.add(cid, [user(cid)])
        store.clear("cleared")
        store.pop("popped")
        assert store.conversations() == ["kept"]

    def test_include_empty_lists_every_conversation_with_events(self, store: Store) -> None:
        """include_empty=True adds cleared, popped-to-empty and memo-only logs, sorted, paged."""
        for cid in ("cleared", "kept", "popped"):
            store.add(cid, [user(cid)])
        store.clear("cleared")
        store.pop("popped")
        store.record("memo-only", "memo", data={"note": "no messages here"})
        assert store.conversations() == ["kept"]
        every = ["cleared", "kept", "memo-only", "popped"]
        assert store.conversations(include_empty=True) == every
        assert store.conversations(include_empty=True, prefix="m") == ["memo-only"]
        assert store.conversations(include_empty=True, after="kept", limit=1) == ["memo-only"]
        assert "never-written" not in store.conversations(include_empty=True)

    def test_include_empty_must_be_a_bool(self, store: Store) -> None:
        """A non-bool include_empty is refused, naming the argument."""
        with pytest.raises(ValueError, match="include_empty"):
            store.conversations(include_empty="yes")  # type: ignore[arg-type]

    def test_forked_target_is_listed(self, store: Store) -> None:
        """A fork's target holds messages, so it is listed."""
        store.add("src", [user("a")])
        store.fork("src", "dst")
        assert store.conversations() == ["dst", "src"]

    # --- concurrency --------------------------------------------------------------------------

    def test_concurrent_adds_lose_nothing_and_keep_each_threads_order(self, store: Store) -> None:
        """8 threads x 500 adds: every add lands once, versions unique, per-thread order kept."""
        threads, per_thread = 8, 500
        barrier = threading.Barrier(threads)

        def writer(t: int) -> list[int]:
            barrier.wait()
            return [store.add("shared", [user(f"t{t}-{i}")]) for i in range(per_thread)]

        workers = [Worker(lambda t=t: writer(t), name=f"writer-{t}") for t in range(threads)]
        for w in workers:
            w.start()
        versions = {t: w.outcome(timeout=120) for t, w in enumerate(workers)}

        total = threads * per_thread
        all_versions = [v for vs in versions.values() for v in vs]
        assert sorted(all_versions) == list(range(1, total + 1))
        assert store.version("shared") == total
        history = texts(store.get("shared"))
        assert len(history) == total
        for t in range(threads):
            assert versions[t] == sorted(versions[t])
            mine = [m for m in history if m.startswith(f"t{t}-")]
            assert mine == [f"t{t}-{i}" for i in range(per_thread)]
        by_version = {e.version: texts(e.messages) for e in store.events("shared")}
        for t in range(threads):
            for i, v in enumerate(versions[t]):
                assert by_version[v] == [f"t{t}-{i}"]

    def test_write_is_visible_to_reads_from_another_thread(self, store: Store) -> None:
        """Once add returned, a get from any other thread sees it (read-your-writes)."""
        for i in range(100):
            version = store.add("c", [user(str(i))])
            seen = Worker(lambda: (store.version("c"), texts(store.get("c", limit=1))))
            seen.start()
            assert seen.outcome() == (version, [str(i)])

    # --- crash, restart, registry -------------------------------------------------------------

    def test_acknowledged_writes_survive_an_actor_crash(self, store: Store) -> None:
        """After supervisors.kill, the restarted store still holds every acknowledged write."""
        for i in range(20):
            store.add(f"c{i % 3}", [user(str(i))], idempotency_key=f"k{i}")
        before = {cid: store.get(cid) for cid in ("c0", "c1", "c2")}
        supervisors.kill(store.name)
        assert {cid: store.get(cid) for cid in ("c0", "c1", "c2")} == before
        assert store.version("c0") == 7

    def test_handle_keeps_working_after_a_crash(self, store: Store) -> None:
        """The same handle writes to the restarted store; versions continue."""
        store.add("c", [user("a")])
        supervisors.kill(store.name)
        assert store.add("c", [user("b")]) == 2
        assert texts(store.get("c")) == ["a", "b"]

    def test_idempotency_keys_survive_a_crash(self, store: Store) -> None:
        """A key acknowledged before a crash is still deduplicated after it."""
        store.add("c", [user("a")], idempotency_key="k1")
        supervisors.kill(store.name)
        assert store.add("c", [user("a")], idempotency_key="k1") == 1
        assert store.version("c") == 1

    def test_tail_positions_continue_after_a_crash(self, store: Store) -> None:
        """Feed positions keep increasing across a restart."""
        store.add("c", [user("a")])
        store.add("c", [user("b")])
        supervisors.kill(store.name)
        store.add("c", [user("c")])
        assert [c.position for c in store.tail()] == [1, 2, 3]

    def test_store_keeps_its_name_after_a_crash(self, store: Store) -> None:
        """After a crash the restarted store is registered under the same name."""
        store.add("c", [user("a")])
        supervisors.kill(store.name)
        again = memoryd.whereis(store.name)
        assert again is not None
        assert texts(again.get("c")) == ["a"]

    def test_store_is_registered_under_its_name(self, make_store: StoreFactory) -> None:
        """whereis(name) returns a handle to the same store."""
        name = f"contract-{uuid.uuid4().hex[:8]}"
        store = make_store(name=name)
        assert store.name == name
        other = memoryd.whereis(name)
        assert other is not None
        store.add("c", [user("a")])
        assert texts(other.get("c")) == ["a"]

    def test_whereis_unknown_name_returns_none(self, store: Store) -> None:
        """whereis of a name nobody registered returns None."""
        assert memoryd.whereis(f"nobody-{uuid.uuid4().hex}") is None

    def test_starting_with_a_taken_name_raises_already_started(
        self, make_store: StoreFactory
    ) -> None:
        """A second store under a name in use raises AlreadyStarted; the first keeps working."""
        first = make_store(name="taken")
        first.add("c", [user("a")])
        with pytest.raises(memoryd.AlreadyStarted):
            make_store(name="taken")
        assert texts(first.get("c")) == ["a"]

    def test_stopped_store_raises_store_unavailable(self, store: Store) -> None:
        """Calls on a stopped store raise StoreUnavailable."""
        store.add("c", [user("a")])
        store.stop()
        with pytest.raises(memoryd.StoreUnavailable):
            store.get("c")
        with pytest.raises(memoryd.StoreUnavailable):
            store.add("c", [user("b")])

    def test_stopped_store_frees_its_name(self, make_store: StoreFactory) -> None:
        """After stop, whereis(name) is None and the name can be started again."""
        store = make_store(name="reusable")
        store.stop()
        assert memoryd.whereis("reusable") is None
        again = make_store(name="reusable")
        assert again.version("c") == 0

    def test_shutdown_stops_every_store(self, make_store: StoreFactory) -> None:
        """memoryd.shutdown() stops all stores; the next start works on a fresh tree."""
        one, two = make_store(name="one"), make_store(name="two")
        memoryd.shutdown()
        for handle in (one, two):
            with pytest.raises(memoryd.StoreUnavailable):
                handle.version("c")
        assert memoryd.whereis("one") is None
        fresh = make_store(name="one")
        assert fresh.add("c", [user("a")]) == 1

    # --- stats --------------------------------------------------------------------------------

    def test_stats_counts_conversations_and_events(self, store: Store) -> None:
        """stats() reports at least 'conversations' and 'events'."""
        store.add("a", [user("1")])
        store.add("a", [user("2")])
        store.add("b", [user("3"), user("4")])
        stats = store.stats()
        assert stats["conversations"] == 2
        assert stats["events"] == 3


class RecordContract:
    """``record()``: memo and compacted events. A backend's test class mixes this in
    (next to `StoreContract`) once it supports ``record``; it uses the same ``store``
    fixture and ``make_store`` factory.
    """

    @pytest.fixture
    def store(self, make_store: StoreFactory) -> Store:
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
        ],
    )
    def test_record_refuses_bad_input(
        self, store: Store, kind: str, options: dict[str, Any], error: type[Exception]
    ) -> None:
        """Bad kinds, non-JSON data and bad messages are refused; nothing is written."""
        with pytest.raises(error):
            store.record("c", kind, **options)
        assert store.version("c") == 0


# --- import_events ----------------------------------------------------------------------------


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
