"""Windows keep system messages: ``get(cid, limit=n, system=True)`` returns the last ``n``
messages after every system (and developer) message stored before them, whatever wrote
the history (add, pop, clear, fork, record)."""

from __future__ import annotations

import pytest

from memoryd.testing._messages import assistant, system, texts, user
from memoryd.testing._store import Store

__all__ = ["SystemContract"]


class SystemContract:
    """``get(..., system=True)``: the windowed read that never loses a system message.

    Part of `memoryd.testing.StoreContract`, which provides the ``store`` fixture.
    """

    def test_system_messages_before_the_tail_come_first(self, store: Store) -> None:
        """The system messages stored before the last n come before them, in order."""
        store.add("c", [system("persona"), user("u1"), assistant("a1")])
        store.add("c", [{"role": "developer", "content": "dev"}, user("u2"), assistant("a2")])
        store.add("c", [user("u3"), assistant("a3")])
        assert texts(store.get("c", limit=2, system=True)) == ["persona", "dev", "u3", "a3"]
        assert texts(store.get("c", limit=2)) == ["u3", "a3"]

    def test_system_messages_inside_the_tail_are_not_repeated(self, store: Store) -> None:
        """A system message within the last n is returned once, where it stands."""
        store.add("c", [system("s1"), user("u1"), system("s2"), user("u2")])
        assert texts(store.get("c", limit=3, system=True)) == ["s1", "u1", "s2", "u2"]
        assert texts(store.get("c", limit=2, system=True)) == ["s1", "s2", "u2"]

    def test_limit_zero_returns_only_the_system_messages(self, store: Store) -> None:
        """With limit 0 the read is every system message, nothing else."""
        store.add("c", [system("s1"), user("u1")])
        store.add("c", [system("s2"), assistant("a1")])
        assert texts(store.get("c", limit=0, system=True)) == ["s1", "s2"]

    def test_without_a_limit_it_is_the_whole_history(self, store: Store) -> None:
        """system=True without a limit changes nothing: the whole history, once."""
        store.add("c", [system("s"), user("u"), assistant("a")])
        assert store.get("c", system=True) == store.get("c")

    def test_unknown_conversation_is_empty(self, store: Store) -> None:
        """A conversation never written reads as empty."""
        assert store.get("nobody", limit=3, system=True) == []

    def test_after_clear_only_later_system_messages_remain(self, store: Store) -> None:
        """A clear drops the system messages with the rest; later ones are kept."""
        store.add("c", [system("old persona"), user("u1"), assistant("a1")])
        store.clear("c")
        assert store.get("c", limit=1, system=True) == []
        store.add("c", [system("new persona"), user("u2"), assistant("a2")])
        assert texts(store.get("c", limit=1, system=True)) == ["new persona", "a2"]

    def test_a_popped_system_message_is_gone(self, store: Store) -> None:
        """Popping a system message removes it from the windowed read too."""
        store.add("c", [system("keep"), user("u1"), system("drop")])
        assert store.pop("c") == system("drop")
        assert texts(store.get("c", limit=1, system=True)) == ["keep", "u1"]
        store.add("c", [user("u2"), assistant("a2")])
        assert texts(store.get("c", limit=1, system=True)) == ["keep", "a2"]

    def test_popping_past_a_system_message_then_adding_again(self, store: Store) -> None:
        """Pops down to an empty history and new adds leave no stale system message."""
        store.add("c", [system("s1"), user("u1")])
        store.pop("c")
        store.pop("c")
        store.add("c", [user("u2"), user("u3")])
        assert texts(store.get("c", limit=1, system=True)) == ["u3"]

    def test_a_fork_keeps_the_sources_system_messages(self, store: Store) -> None:
        """A forked conversation's windowed read has the system messages it copied."""
        store.add("src", [system("persona"), user("u1"), assistant("a1")])
        store.add("src", [system("late"), user("u2"), assistant("a2")])
        store.fork("src", "dst")
        assert texts(store.get("dst", limit=1, system=True)) == ["persona", "late", "a2"]
        store.fork("src", "old", at_version=1)
        assert texts(store.get("old", limit=1, system=True)) == ["persona", "a1"]

    def test_a_fork_into_a_cleared_target_drops_its_old_system_messages(self, store: Store) -> None:
        """A cleared target that is forked into holds only what the fork copied."""
        store.add("src", [user("u1"), assistant("a1")])
        store.add("dst", [system("dst persona"), user("mine")])
        store.clear("dst")
        store.fork("src", "dst")
        assert texts(store.get("dst", limit=1, system=True)) == ["a1"]

    def test_at_version_reads_the_history_as_it_was(self, store: Store) -> None:
        """With at_version, the system messages are those of that version's history."""
        store.add("c", [system("s1"), user("u1")])
        store.add("c", [system("s2"), user("u2")])
        store.pop("c")
        store.pop("c")
        assert texts(store.get("c", limit=1, at_version=2, system=True)) == ["s1", "s2", "u2"]
        assert texts(store.get("c", limit=1, system=True)) == ["s1", "u1"]

    @pytest.mark.parametrize("value", [1, "yes", None])
    def test_a_system_flag_that_is_not_a_bool_is_refused(self, store: Store, value: object) -> None:
        """system must be True or False: anything else raises ValueError."""
        store.add("c", [user("u")])
        with pytest.raises(ValueError, match="system"):
            store.get("c", limit=1, system=value)
