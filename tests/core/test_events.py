"""Event values and the pure reducer (DESIGN §3.3)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memoryd import messages
from memoryd.events import KINDS, SCHEMA_VERSION, Change, Event, EventKind, apply, replay, walk_back


def msg(n: int) -> dict[str, Any]:
    return messages.user(f"m{n}")


def valid_event_fields(**changed: Any) -> dict[str, Any]:
    """The fields of a valid appended event (one message), with ``changed`` applied."""
    return {"version": 1, "kind": "appended", "messages": (msg(1),), "timestamp": 1.0, **changed}


def ev(
    version: int = 1,
    kind: str = "appended",
    msgs: tuple[dict[str, Any], ...] | None = None,
    **kw: Any,
) -> Event:
    if msgs is None:
        msgs = (msg(version),) if kind == "appended" else ()
    return Event(
        version=version, kind=kind, messages=msgs, timestamp=kw.pop("timestamp", 1.0), **kw
    )


# --------------------------------------------------------------------------- values


def test_kinds_are_the_six_documented_strings() -> None:
    """The kinds are exactly the six of the design, and each enum member is its str."""
    assert {"appended", "cleared", "popped", "forked", "compacted", "memo"} == KINDS
    assert {kind.value for kind in EventKind} == KINDS
    assert EventKind("appended") is EventKind.APPENDED
    assert str(EventKind.APPENDED) == "appended"
    assert SCHEMA_VERSION == 1


def test_event_is_frozen_keyword_only_and_slotted() -> None:
    """Event is a frozen, kw_only, slots dataclass."""
    event = ev()
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.version = 2  # type: ignore[misc]
    with pytest.raises(TypeError):
        Event(1, "appended", (msg(1),), 1.0)  # type: ignore[call-arg]
    assert not hasattr(event, "__dict__")
    assert event.idempotency_key is None and event.data is None


def test_event_fields_are_those_of_the_contract() -> None:
    """Event has version, kind, messages, timestamp, idempotency_key, data."""
    assert [f.name for f in dataclasses.fields(Event)] == [
        "version",
        "kind",
        "messages",
        "timestamp",
        "idempotency_key",
        "data",
    ]
    change_fields = [f.name for f in dataclasses.fields(Change)]
    assert change_fields[:2] == ["position", "conversation_id"]
    assert set(change_fields) == {"position", "conversation_id"} | {
        f.name for f in dataclasses.fields(Event)
    }


def test_event_stores_a_list_as_a_tuple_and_a_kind_as_plain_str() -> None:
    """A list of messages becomes a tuple; an EventKind becomes a plain str."""
    event = Event(version=1, kind=EventKind.APPENDED, messages=[msg(1)], timestamp=0)  # type: ignore[arg-type]
    assert event.messages == (msg(1),)
    assert type(event.messages) is tuple
    assert type(event.kind) is str


def test_events_compare_by_value() -> None:
    """Two events with the same fields are equal."""
    assert ev(3, idempotency_key="k") == ev(3, idempotency_key="k")
    assert ev(3) != ev(4)


@pytest.mark.parametrize(
    ("fields", "needle"),
    [
        ({"version": 0}, "version must be an int >= 1"),
        ({"version": -1}, "version must be an int >= 1"),
        ({"version": True}, "version must be an int"),
        ({"version": 1.0}, "version must be an int"),
        ({"kind": "deleted"}, "kind must be one of"),
        ({"kind": None}, "kind must be one of"),
        ({"messages": "hi"}, "messages must be a tuple"),
        ({"messages": ("hi",)}, "must all be dicts"),
        ({"messages": ()}, "appended event needs at least one message"),
        ({"kind": "cleared", "messages": (msg(1),)}, "cleared event carries no messages"),
        ({"kind": "popped", "messages": (msg(1), msg(2))}, "at most the one message"),
        ({"timestamp": math.nan}, "timestamp must be a finite number"),
        ({"timestamp": math.inf}, "timestamp must be a finite number"),
        ({"timestamp": "now"}, "timestamp must be a finite number"),
        ({"timestamp": True}, "timestamp must be a finite number"),
        ({"idempotency_key": 5}, "idempotency_key must be a str or None"),
        ({"data": [1]}, "data must be a mapping or None"),
    ],
)
def test_event_refuses_bad_fields(fields: dict[str, Any], needle: str) -> None:
    """Each bad field raises ValueError naming it."""
    with pytest.raises(ValueError, match=needle):
        Event(**valid_event_fields(**fields))


@pytest.mark.parametrize("kind", ["popped", "forked", "compacted", "memo"])
def test_kinds_other_than_appended_may_carry_no_messages(kind: str) -> None:
    """Only appended needs messages."""
    assert ev(2, kind).messages == ()


def test_change_wraps_an_event() -> None:
    """A Change is an event plus its global position and conversation id, and back."""
    event = ev(4, idempotency_key="k", data={"a": 1}, timestamp=12.5)
    change = Change.from_event(event, position=9, conversation_id="c")
    assert (change.position, change.conversation_id) == (9, "c")
    assert (change.version, change.kind, change.messages) == (4, "appended", event.messages)
    assert (change.timestamp, change.idempotency_key, change.data) == (12.5, "k", {"a": 1})
    assert change.event == event
    with pytest.raises(dataclasses.FrozenInstanceError):
        change.position = 3  # type: ignore[misc]


def test_change_is_slotted_normalised_and_not_an_event() -> None:
    """A Change has no __dict__, stores a list as a tuple and an EventKind as plain str,
    and is not an Event (callers tell the two apart with isinstance)."""
    change = Change(
        **valid_event_fields(
            position=1, conversation_id="c", kind=EventKind.APPENDED, messages=[msg(1)]
        )
    )
    assert not hasattr(change, "__dict__")
    assert change.messages == (msg(1),) and type(change.kind) is str
    assert not isinstance(change, Event)
    assert not isinstance(change.event, Change)


@pytest.mark.parametrize(
    ("fields", "needle"),
    [
        ({"position": 0}, "position must be an int >= 1"),
        ({"position": "1"}, "position must be an int"),
        ({"conversation_id": ""}, "conversation_id must be a non-empty str"),
        ({"conversation_id": None}, "conversation_id must be a non-empty str"),
        ({"version": 0}, "version must be an int >= 1"),
        ({"kind": "nope"}, "kind must be one of"),
    ],
)
def test_change_refuses_bad_fields(fields: dict[str, Any], needle: str) -> None:
    """Change checks its own fields and the event fields."""
    with pytest.raises(ValueError, match=needle):
        Change(**valid_event_fields(**{"position": 1, "conversation_id": "c", **fields}))


# --------------------------------------------------------------------------- reducer


def test_appended_extends_the_history() -> None:
    """appended adds its messages at the end, in order."""
    assert apply([msg(1)], ev(2, msgs=(msg(2), msg(3)))) == [msg(1), msg(2), msg(3)]


def test_cleared_empties_the_history() -> None:
    """cleared leaves nothing."""
    assert apply([msg(1), msg(2)], ev(3, "cleared")) == []


def test_popped_drops_the_last_message() -> None:
    """popped removes only the last message; on an empty history it does nothing."""
    assert apply([msg(1), msg(2)], ev(3, "popped", (msg(2),))) == [msg(1)]
    assert apply([], ev(3, "popped")) == []


def test_forked_replaces_the_history() -> None:
    """forked sets the history to the event's messages."""
    assert apply([msg(1)], ev(2, "forked", (msg(7), msg(8)))) == [msg(7), msg(8)]
    assert apply([msg(1)], ev(2, "forked", ())) == []


@pytest.mark.parametrize("kind", ["compacted", "memo"])
def test_compacted_and_memo_leave_the_history_unchanged(kind: str) -> None:
    """compacted and memo record something beside the history without changing it."""
    history = [msg(1), msg(2)]
    event = ev(3, kind, (messages.system("summary"),), data={"replaces": [1, 2]})
    assert apply(history, event) == [msg(1), msg(2)]


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_apply_returns_a_new_list_and_leaves_its_inputs_alone(kind: str) -> None:
    """apply never mutates the history or the event, and never returns the same list."""
    history = [msg(1), msg(2)]
    snapshot = [dict(m) for m in history]
    event = ev(3, kind, (msg(3),) if kind != "cleared" else ())
    result = apply(history, event)
    assert history == snapshot
    assert result is not history
    result.append(msg(99))
    assert history == snapshot
    assert event.messages == ((msg(3),) if kind != "cleared" else ())


def test_replay_folds_a_log() -> None:
    """replay applies every event in order from an empty history."""
    log = [
        ev(1, msgs=(msg(1), msg(2))),
        ev(2, msgs=(msg(3),)),
        ev(3, "popped", (msg(3),)),
        ev(4, "memo", data={"memo": "likes tea"}),
        ev(5, "cleared"),
        ev(6, msgs=(msg(4),)),
    ]
    assert replay(log) == [msg(4)]
    assert replay(log[:4]) == [msg(1), msg(2)]
    assert replay([]) == []
    assert replay(iter(log[:2])) == [msg(1), msg(2), msg(3)]


def test_replay_refuses_versions_out_of_order() -> None:
    """A log whose versions do not strictly increase is a bug, and says so."""
    with pytest.raises(ValueError, match="increasing version order"):
        replay([ev(2), ev(1)])
    with pytest.raises(ValueError, match="increasing version order"):
        replay([ev(1), ev(1)])


# A model of the reducer: operations on a plain list.
operations = st.lists(
    st.one_of(
        st.tuples(st.just("appended"), st.integers(1, 3)),
        st.tuples(st.just("cleared"), st.just(0)),
        st.tuples(st.just("popped"), st.just(0)),
        st.tuples(st.just("forked"), st.integers(0, 3)),
        st.tuples(st.just("compacted"), st.just(0)),
        st.tuples(st.just("memo"), st.just(0)),
    ),
    max_size=30,
)


def _modelled(
    ops: list[tuple[str, int]], *, drop_empty_pops: bool
) -> tuple[list[dict[str, Any]], list[Event]]:
    """The history as a plain list after ``ops``, and the event log of the same ops.

    A pop on an empty history changes nothing; with ``drop_empty_pops`` it is left out
    of the log too, as a store writes a pop only when there is a message to pop.
    """
    model: list[dict[str, Any]] = []
    log: list[Event] = []
    counter = 0
    for kind, count in ops:
        if kind == "popped" and not model and drop_empty_pops:
            continue
        new = []
        for _ in range(count):
            counter += 1
            new.append(msg(counter))
        if kind == "appended":
            model.extend(new)
        elif kind == "cleared":
            model.clear()
        elif kind == "popped" and model:
            model.pop()
        elif kind == "forked":
            model = list(new)
        log.append(ev(len(log) + 1, kind, tuple(new)))
    return model, log


@given(operations)
def test_replay_matches_a_list_model(ops: list[tuple[str, int]]) -> None:
    """For any log, replay equals doing the same operations on a list, and apply agrees."""
    model, log = _modelled(ops, drop_empty_pops=False)
    assert replay(log) == model
    stepwise: list[dict[str, Any]] = []
    for event in log:
        stepwise = apply(stepwise, event)
    assert stepwise == model


# pops weigh more here: a walk back must carry pops across events
pop_heavy = st.lists(
    st.one_of(
        st.tuples(st.just("appended"), st.integers(1, 3)),
        st.tuples(st.just("popped"), st.just(0)),
        st.tuples(st.just("popped"), st.just(0)),
        st.tuples(st.sampled_from(["cleared", "compacted", "memo"]), st.just(0)),
        st.tuples(st.just("forked"), st.integers(0, 3)),
    ),
    max_size=20,
)


@settings(max_examples=400)
@given(pop_heavy, st.one_of(st.none(), st.integers(0, 8)))
def test_walk_back_equals_the_tail_of_replay(ops: list[tuple[str, int]], limit: int | None) -> None:
    """Walking any log backwards gives the last ``limit`` messages replay gives."""
    model, log = _modelled(ops, drop_empty_pops=True)
    assert replay(log) == model
    newest_first = [(e.kind, list(e.messages)) for e in reversed(log)]
    expected = model if limit is None else model[max(0, len(model) - limit) :] if limit else []
    assert walk_back(iter(newest_first), limit) == expected


def test_walk_back_reads_only_what_the_limit_needs() -> None:
    """walk_back stops pulling events once it has `limit` messages (lazy walk)."""

    pulled: list[int] = []

    def events() -> Iterator[tuple[str, list[dict[str, Any]]]]:
        for i in range(100, 0, -1):
            pulled.append(i)
            yield "appended", [messages.user(f"m{i}")]

    assert walk_back(events(), 3) == [messages.user(f"m{i}") for i in (98, 99, 100)]
    assert pulled == [100, 99, 98]
