"""What a store keeps and gives back: messages in order, per conversation, copied, limited;
and the conversation ids and messages it refuses, writing nothing."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

import memoryd
from memoryd.store.requests import HIDDEN_PREFIX
from memoryd.testing._messages import (
    assistant,
    assistant_calls,
    system,
    texts,
    tool_call,
    tool_result,
    user,
)
from memoryd.testing._refused import BAD_CONVERSATION_IDS, BAD_MESSAGE_BATCHES, ONE_MIB
from memoryd.testing._store import Message, Store, assert_nothing_written

__all__ = ["HistoryContract"]


class HistoryContract:
    """Adds and gets: ordering, isolation, ``limit``, copies, round trips, refused input.

    Part of `memoryd.testing.StoreContract`, which provides the ``store`` fixture.
    """

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
        batch: list[Message] = [{"role": "user", "content": "hi", "metadata": {"tags": ["a"]}}]
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

    @pytest.mark.parametrize(
        "call",
        [
            pytest.param(lambda s, c: s.fork("ok", c), id="fork-target"),
            pytest.param(lambda s, c: s.import_events(c, s.events("ok")), id="import"),
        ],
    )
    def test_a_copy_into_memoryds_bookkeeping_space_is_refused(
        self, store: Store, call: Callable[[Store, str], Any]
    ) -> None:
        """A fork into, or an import to, an id under memoryd's bookkeeping prefix
        (``memoryd.run/``, which listings, the change feed and exports skip) raises
        InvalidConversationId naming the prefix, and writes nothing."""
        store.add("ok", [user("keep")])
        hidden = f"{HIDDEN_PREFIX}copy"
        with pytest.raises(memoryd.InvalidConversationId, match=re.escape(repr(HIDDEN_PREFIX))):
            call(store, hidden)
        assert (store.version(hidden), store.events(hidden)) == (0, [])
        assert store.conversations(prefix=HIDDEN_PREFIX, include_empty=True) == []
        assert len(store.tail()) == 1

    @pytest.mark.parametrize("batch", BAD_MESSAGE_BATCHES)
    def test_bad_messages_rejected_and_nothing_written(self, store: Store, batch: Any) -> None:
        """add with an invalid message (or message list) raises InvalidMessage, writes nothing."""
        store.add("c", [user("before")])
        before = (store.version("c"), store.get("c"))
        with pytest.raises(memoryd.InvalidMessage):
            store.add("c", batch)
        assert_nothing_written(store, "c", before)
        assert len(store.events("c")) == 1

    def test_message_over_max_message_bytes_rejected(self, store: Store) -> None:
        """A message over the default limit (1 MiB) raises InvalidMessage and writes nothing."""
        store.add("c", [user("before")])
        before = (store.version("c"), store.get("c"))
        with pytest.raises(memoryd.InvalidMessage):
            store.add("c", [user("a"), user("x" * (ONE_MIB + 1))])
        assert_nothing_written(store, "c", before)

    def test_large_message_under_the_limit_round_trips(self, store: Store) -> None:
        """A 512 KiB message (well under the 1 MiB default) is stored whole."""
        big = "0123456789abcdef" * (ONE_MIB // 32)
        store.add("c", [user(big), user("small")])
        assert texts(store.get("c")) == [big, "small"]
