"""The notes of failed runs whose journal could not be dropped (`memoryd.agent.drops`):
a noted run is dropped compare-and-set on the version noted, and one written since is
left to whoever wrote it. The full-disk path that notes them is in
``tests/reliability/test_agents_disk.py``."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

import memoryd
from memoryd.agent.drops import UNDROPPED, Undropped
from memoryd.agent.journal import RunJournal
from memoryd.agent.locks import run_active
from tests.agent.test_keep_failed import kept


@pytest.fixture
def store() -> Iterator[memoryd.StoreHandle]:
    handle = memoryd.EphemeralStore.start(name=f"drops-{uuid.uuid4().hex[:8]}")
    yield handle
    for run_id in UNDROPPED.of(handle):
        UNDROPPED.forget(handle, run_id)


def kept_run(store: memoryd.StoreHandle) -> tuple[memoryd.Agent, str, int]:
    """A failed run left pending (kept), with its id and journal version."""
    agent = kept(store, [])
    with pytest.raises(memoryd.LLMError):
        agent.run("do it", conversation_id="job")
    [pending] = agent.pending_runs()
    return agent, pending.run_id, RunJournal(store).load(pending.run_id).journal_version


def test_a_noted_run_is_dropped_by_the_next_listing(store: memoryd.StoreHandle) -> None:
    """Noted at its version, the run is claimed and cleared: nothing pending, no note."""
    agent, run_id, version = kept_run(store)
    UNDROPPED.note(store, run_id, version)
    assert RunJournal(store).pending() == []
    assert UNDROPPED.of(store) == {}
    assert agent.pending_runs() == []


def test_a_noted_run_written_since_is_left_to_its_writer(store: memoryd.StoreHandle) -> None:
    """A run claimed after it was noted (a resume, another process) is not dropped: the
    compare-and-set on the noted version fails, the note is forgotten, the run stays."""
    agent, run_id, version = kept_run(store)
    UNDROPPED.note(store, run_id, version)
    journal = RunJournal(store)
    journal.claim(journal.load(run_id))
    assert journal.drop_undropped() == []
    assert UNDROPPED.of(store) == {}
    assert [p.run_id for p in agent.pending_runs()] == [run_id]


def test_a_noted_run_busy_in_this_process_keeps_its_note(store: memoryd.StoreHandle) -> None:
    """A noted run that another thread of this process holds (its drop under way as
    runs start side by side, or a resume between its read and its claim) is not dropped
    under it, and its note stays: once that thread let go without writing (a drop the
    full disk refused), the next try drops it; had it resumed the run, the
    compare-and-set would leave the run to it."""
    agent, run_id, version = kept_run(store)
    UNDROPPED.note(store, run_id, version)
    with run_active(run_id):
        assert RunJournal(store).drop_undropped() == []
        assert UNDROPPED.of(store) == {run_id: version}
        assert [p.run_id for p in RunJournal(store).pending()] == [run_id]
    assert RunJournal(store).drop_undropped() == [run_id]
    assert UNDROPPED.of(store) == {}
    assert agent.pending_runs() == []


def test_notes_are_bounded_per_store_and_kept_apart(store: memoryd.StoreHandle) -> None:
    """Past its limit a store's oldest note is forgotten; stores do not share notes."""
    notes = Undropped(limit=2)
    other = memoryd.EphemeralStore.start(name=f"drops-{uuid.uuid4().hex[:8]}")
    for n in range(3):
        notes.note(store, f"r{n}", n)
    notes.note(other, "r0", 7)
    assert notes.of(store) == {"r1": 1, "r2": 2}
    assert notes.of(other) == {"r0": 7}
    notes.forget(store, "r1")
    notes.forget(store, "r2")
    notes.forget(other, "r0")
    assert not notes
