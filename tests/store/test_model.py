"""Model-based test: random operation sequences against a plain-Python model and a real store.

Every step runs the same operation on the store and on :class:`Model`; after every step the
two must agree on each conversation's messages and version, on the listing, and on the new
entries of the global change feed.
"""

from __future__ import annotations

import copy
import itertools
import shutil
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

import memoryd

Message = dict[str, Any]

CONVERSATION_IDS = ("a", "ab", "a/b\u00e9")
KEYS = ("k1", "k2")
CALL_IDS = ("call_1", "call_2")

_text = st.text(min_size=1, max_size=8)
_plain = st.builds(
    lambda role, text: {"role": role, "content": text},
    st.sampled_from(["system", "user", "assistant"]),
    _text,
)
_tool_result = st.builds(
    lambda call_id, text: {"role": "tool", "tool_call_id": call_id, "content": text},
    st.sampled_from(CALL_IDS),
    _text,
)
_tool_calls = st.builds(
    lambda ids: {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}} for i in ids
        ],
    },
    st.lists(st.sampled_from(CALL_IDS), min_size=1, max_size=2, unique=True),
)
batches = st.lists(st.one_of(_plain, _plain, _tool_result, _tool_calls), min_size=1, max_size=3)
cids = st.sampled_from(CONVERSATION_IDS)
versions = st.none() | st.integers(min_value=1, max_value=10)


@dataclass
class ModelEvent:
    version: int
    kind: str
    messages: list[Message] | None  # compared only for 'appended' and 'forked'
    idempotency_key: str | None = None


@dataclass
class Conversation:
    """One conversation in the model: the plain-Python meaning of the contract."""

    version: int = 0
    messages: list[Message] = field(default_factory=list)
    history_at: dict[int, list[Message]] = field(default_factory=dict)
    events: list[ModelEvent] = field(default_factory=list)  # since the last clear
    keys: dict[str, int] = field(default_factory=dict)
    cleared_at: int = 0

    def record(self, kind: str, event_messages: list[Message] | None, key: str | None) -> int:
        self.version += 1
        if kind == "cleared":
            self.events = []
            self.cleared_at = self.version
        self.events.append(ModelEvent(self.version, kind, event_messages, key))
        self.history_at[self.version] = copy.deepcopy(self.messages)
        return self.version

    def history(self, at_version: int | None) -> list[Message]:
        return self.messages if at_version is None else self.history_at[at_version]

    def valid_version(self, at_version: int | None) -> bool:
        return at_version is None or self.cleared_at <= at_version <= self.version


def last(messages: list[Message], limit: int | None) -> list[Message]:
    if limit is None:
        return list(messages)
    return messages[max(len(messages) - limit, 0) :] if limit else []


def last_with_system(messages: list[Message], limit: int | None) -> list[Message]:
    """``get(limit=limit, system=True)``: the system messages before the tail, then the tail."""
    tail = last(messages, limit)
    before = messages[: len(messages) - len(tail)]
    return [m for m in before if m["role"] in ("system", "developer")] + tail


class StoreMachine(RuleBasedStateMachine):
    """Runs the same operations on a real store and on the model; subclasses start the store."""

    def __init__(self) -> None:
        super().__init__()
        self.store = self.start_store()
        self.model: dict[str, Conversation] = {cid: Conversation() for cid in CONVERSATION_IDS}
        self.unseen_changes: list[tuple[str, int, str]] = []
        self.position = 0

    start_store: Callable[[], Any]
    """Starts the real store under test; each concrete machine defines it."""

    def teardown(self) -> None:
        self.store.stop()

    def _changed(self, cid: str, version: int, kind: str) -> None:
        self.unseen_changes.append((cid, version, kind))

    # --- writes ------------------------------------------------------------------------------

    @initialize(
        writes=st.lists(st.tuples(cids, batches, st.none() | st.sampled_from(KEYS)), max_size=4)
    )
    def seed(self, writes: list[tuple[str, list[Message], str | None]]) -> None:
        """Start most runs with some history, so the other rules have something to act on."""
        for cid, batch, key in writes:
            self._add(cid, batch, key, "unset")

    @rule(cid=cids, batch=batches)
    def add(self, cid: str, batch: list[Message]) -> None:
        self._add(cid, batch, None, "unset")

    @rule(cid=cids, batch=batches, key=st.sampled_from(KEYS))
    def add_with_key(self, cid: str, batch: list[Message], key: str) -> None:
        self._add(cid, batch, key, "unset")

    @rule(
        cid=cids,
        batch=batches,
        key=st.none() | st.sampled_from(KEYS),
        expect=st.sampled_from(["right", "wrong"]),
    )
    def add_expecting(self, cid: str, batch: list[Message], key: str | None, expect: str) -> None:
        self._add(cid, batch, key, expect)

    def _add(self, cid: str, batch: list[Message], key: str | None, expect: str) -> None:
        conv = self.model[cid]
        batch = copy.deepcopy(batch)
        repeat = key is not None and key in conv.keys
        expected_version = {"unset": None, "right": conv.version, "wrong": conv.version + 1}[expect]
        if repeat and expect == "wrong":
            expected_version = None  # which check wins is tested on its own in the contract
        call = {"idempotency_key": key, "expected_version": expected_version}
        if repeat:
            assert key is not None
            assert self.store.add(cid, batch, **call) == conv.keys[key]
            return
        if expect == "wrong":
            with pytest.raises(memoryd.ConflictError):
                self.store.add(cid, batch, **call)
            return
        version = self.store.add(cid, batch, **call)
        conv.messages.extend(copy.deepcopy(batch))
        assert version == conv.record("appended", copy.deepcopy(batch), key)
        if key is not None:
            conv.keys[key] = version
        self._changed(cid, version, "appended")

    @rule(cid=cids)
    def clear(self, cid: str) -> None:
        conv = self.model[cid]
        assert self.store.clear(cid) is None
        if conv.messages:
            conv.messages.clear()
            self._changed(cid, conv.record("cleared", None, None), "cleared")

    @rule(cid=cids)
    def pop(self, cid: str) -> None:
        conv = self.model[cid]
        popped = self.store.pop(cid)
        if not conv.messages:
            assert popped is None
            return
        assert popped == conv.messages.pop()
        self._changed(cid, conv.record("popped", None, None), "popped")

    @rule(source=cids, destination=cids, at_version=versions)
    def fork(self, source: str, destination: str, at_version: int | None) -> None:
        target = destination  # ("target" is a reserved argument name of @rule)
        if source == target:
            with pytest.raises(ValueError):
                self.store.fork(source, target, at_version=at_version)
            return
        src, dst = self.model[source], self.model[target]
        if src.version == 0:
            with pytest.raises(memoryd.UnknownConversation):
                self.store.fork(source, target, at_version=at_version)
            return
        if not src.valid_version(at_version):
            if not dst.messages:  # with a full target too, which error wins is not specified
                with pytest.raises(ValueError):
                    self.store.fork(source, target, at_version=at_version)
            return
        copied = copy.deepcopy(src.history(at_version))
        if not copied:
            return  # forking an empty history is not part of the contract
        if dst.messages:
            with pytest.raises(memoryd.ConflictError):
                self.store.fork(source, target, at_version=at_version)
            return
        version = self.store.fork(source, target, at_version=at_version)
        dst.messages = copied
        assert version == dst.record("forked", copy.deepcopy(copied), None)
        self._changed(target, version, "forked")

    # --- reads -------------------------------------------------------------------------------

    @rule(
        cid=cids,
        limit=st.none() | st.integers(min_value=0, max_value=6),
        at_version=versions,
        system=st.booleans(),
    )
    def get(self, cid: str, limit: int | None, at_version: int | None, system: bool) -> None:
        conv = self.model[cid]
        if not conv.valid_version(at_version):
            with pytest.raises(ValueError):
                self.store.get(cid, limit=limit, at_version=at_version, system=system)
            return
        cut = last_with_system if system else last
        expected = cut(conv.history(at_version), limit)
        assert self.store.get(cid, limit=limit, at_version=at_version, system=system) == expected

    @rule(cid=cids, after=st.integers(min_value=0, max_value=10))
    def events(self, cid: str, after: int) -> None:
        expected = [e for e in self.model[cid].events if e.version > after]
        got = self.store.events(cid, after=after)
        assert [(e.version, e.kind) for e in got] == [(e.version, e.kind) for e in expected]
        for real, model in zip(got, expected, strict=True):
            if model.kind in ("appended", "forked"):
                assert list(real.messages) == model.messages
            if model.kind == "appended":
                assert real.idempotency_key == model.idempotency_key

    @rule(cid=cids)
    def version(self, cid: str) -> None:
        assert self.store.version(cid) == self.model[cid].version

    # --- after every step -----------------------------------------------------------------------

    @invariant()
    def conversations_match(self) -> None:
        for cid, conv in self.model.items():
            assert self.store.version(cid) == conv.version, cid
            assert self.store.get(cid) == conv.messages, cid
            for limit in (0, 1, 3):
                got = self.store.get(cid, limit=limit, system=True)
                assert got == last_with_system(conv.messages, limit), (cid, limit)
        holding = sorted(cid for cid, conv in self.model.items() if conv.messages)
        assert self.store.conversations() == holding

    @invariant()
    def feed_matches(self) -> None:
        changes = self.store.tail(after=self.position)
        assert [(c.conversation_id, c.version, c.kind) for c in changes] == self.unseen_changes
        positions = [self.position] + [c.position for c in changes]
        assert positions == sorted(set(positions))
        self.position = positions[-1]
        self.unseen_changes = []


_names = itertools.count()


class EphemeralMachine(StoreMachine):
    def start_store(self) -> Any:
        return memoryd.EphemeralStore.start(name=f"model-{uuid.uuid4().hex[:6]}-{next(_names)}")


class LmdbMachine(StoreMachine):
    def start_store(self) -> Any:
        self.directory = tempfile.mkdtemp(prefix="memoryd-model-")
        return memoryd.LmdbStore.start(f"{self.directory}/data")

    def teardown(self) -> None:
        try:
            super().teardown()
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)


@pytest.mark.parametrize(
    ("machine", "examples"),
    [pytest.param(EphemeralMachine, 50, id="ephemeral"), pytest.param(LmdbMachine, 15, id="lmdb")],
)
def test_the_store_matches_the_model(machine: type[StoreMachine], examples: int) -> None:
    """Random add/get/clear/pop/fork/events sequences: the store agrees with the model,
    the windowed read with system messages (``get(limit, system=True)``) included.

    The durable LmdbStore runs fewer sequences (each step fsyncs).
    """
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=examples,
            stateful_step_count=30,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
