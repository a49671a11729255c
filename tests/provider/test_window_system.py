"""A window never loses a stored system message: what `DefaultProvider.prepare` sends from
its O(window) history read equals `safe_window` over the whole stored log, on real stores."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import memoryd
from memoryd import DefaultProvider, safe_window
from memoryd.llm import ScriptedModel
from tests.provider.test_safe_window import a, calls, r, s, u

Message = dict[str, Any]

_ids = itertools.count()

_message = st.one_of(
    st.builds(s, st.sampled_from(["persona", "rules", "late"])),
    st.just({"role": "developer", "content": "dev"}),
    st.builds(u, st.sampled_from(["u1", "u2", "u3"])),
    st.builds(a, st.sampled_from(["a1", "a2"])),
    st.just(calls("c1")),
    st.just(r("c1")),
    st.just(calls("c1", "c2")),
    st.just(r("c2")),
)
_step = st.one_of(
    st.tuples(st.just("add"), st.lists(_message, min_size=1, max_size=4)),
    st.tuples(st.just("pop"), st.just([])),
    st.tuples(st.just("clear"), st.just([])),
)


@pytest.fixture
def store() -> Iterator[memoryd.StoreHandle]:
    handle = memoryd.EphemeralStore.start()
    yield handle
    handle.stop()


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    steps=st.lists(_step, max_size=12),
    n=st.integers(min_value=0, max_value=8),
    turn=st.lists(_message, max_size=2),
)
def test_prepare_equals_safe_window_over_the_full_log(
    store: memoryd.StoreHandle, steps: list[tuple[str, list[Message]]], n: int, turn: list[Message]
) -> None:
    """Random histories (system messages anywhere, pops and clears between adds), random n:
    prepare(history + turn) == safe_window(store.get(cid) + turn, n). Each example writes
    a conversation of its own in the test's store."""
    cid = f"prop-{next(_ids)}"
    for op, batch in steps:
        if op == "add":
            store.add(cid, batch)
        elif op == "pop":
            store.pop(cid)
        else:
            store.clear(cid)
    provider = DefaultProvider(store, window=n)
    full = store.get(cid)
    assert provider.prepare(cid, provider.history(cid) + turn) == safe_window(full + turn, n)


def test_a_persona_stored_first_is_sent_on_every_turn(store: memoryd.StoreHandle) -> None:
    """A system message stored at the start is still sent after many turns past the window."""
    provider = DefaultProvider(store, window=2)
    provider.append("persona", [s("You are a pirate.")])
    for i in range(20):
        provider.append("persona", [u(f"q{i}"), a(f"r{i}")])
    sent = provider.prepare("persona", [*provider.history("persona"), u("now")])
    assert [m["content"] for m in sent] == ["You are a pirate.", "r19", "now"]


def test_an_agent_with_a_window_keeps_the_stored_persona() -> None:
    """Agent(memory=memoryd.window(n)) sends the stored system message on a later turn."""
    cid = f"agent-{next(_ids)}"
    try:
        memoryd.default_store().add(cid, [s("You are a pirate.")])
        model = ScriptedModel([f"reply {i}" for i in range(6)])
        agent = memoryd.Agent(llm=model, memory=memoryd.window(2))
        for i in range(6):
            agent.run(f"question {i}", conversation_id=cid)
        last = model.calls[-1]
        assert last[0] == s("You are a pirate.")
        assert [m["content"] for m in last[1:]] == ["reply 4", "question 5"]
    finally:
        memoryd.shutdown()
