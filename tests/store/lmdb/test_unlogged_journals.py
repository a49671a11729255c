"""Run journals on LMDB leave nothing in the file once cleared.

memoryd's own hidden conversations (`HIDDEN_PREFIX`, the run journals) numbered from the
store's ``unlogged_from`` counter on take no change-feed position, and a clear erases
them: events, index, idempotency keys, metadata and name. The tests count the raw
entries of every sub-database of a real data file, check the file with `check_store`,
reopen it (its identity file must still agree), and keep the hidden conversations an
older memoryd wrote (numbered below the counter) cleared the old way.
"""

from __future__ import annotations

from pathlib import Path

import lmdb
import pytest

import memoryd
from memoryd import messages
from memoryd.llm import ScriptedModel
from memoryd.store.lmdb import keys, layout
from memoryd.store.lmdb.check import check_store
from memoryd.store.requests import HIDDEN_PREFIX
from memoryd.testing._messages import texts, user

JOURNAL = f"{HIDDEN_PREFIX}run-1"
_DBS = (
    keys.NAMES_DB,
    keys.EVENTS_DB,
    keys.POSITIONS_DB,
    keys.META_DB,
    keys.IDEMPOTENCY_DB,
    layout.SYSTEM_DB,
)


def entries(data: Path) -> dict[str, int]:
    """Entries of each sub-database of the stopped store in ``data``."""
    env = lmdb.open(str(data), max_dbs=8, readonly=True, lock=False)
    try:
        with env.begin() as txn:
            return {
                name.decode(): txn.stat(env.open_db(name, txn=txn, create=False))["entries"]
                for name in _DBS
            }
    finally:
        env.close()


def sound(data: Path) -> None:
    report = check_store(data)
    assert report.problems == [], report.problems


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return tmp_path / "data"


def test_a_cleared_journal_leaves_no_entry_behind(data: Path) -> None:
    """A journal of three writes (one with an idempotency key, one a system message),
    cleared by the commit's add: the file holds exactly what the commit alone adds."""
    store = memoryd.LmdbStore.start(str(data))
    store.add("chat", [user("hello")])
    store.stop()
    before = entries(data)
    store = memoryd.LmdbStore.start(str(data))
    store.add(JOURNAL, [messages.system("run journal")], expected_version=0)
    store.add(JOURNAL, [user("step 1")], expected_version=1, idempotency_key="k1")
    store.record(JOURNAL, "memo", data={"owner": "me"}, expected_version=2)
    assert store.version(JOURNAL) == 3
    store.add("chat", [user("done")], then_clear=JOURNAL)
    assert store.version(JOURNAL) == 0  # erased: as never written
    assert store.events(JOURNAL) == []
    assert store.conversations(prefix=HIDDEN_PREFIX) == []
    assert texts(store.get("chat")) == ["hello", "done"]
    store.stop()
    after = entries(data)
    assert after == {**before, "events": before["events"] + 1, "positions": before["positions"] + 1}
    sound(data)


def test_journal_writes_take_no_change_feed_position(data: Path) -> None:
    """Positions of the change feed stay contiguous across hidden writes."""
    store = memoryd.LmdbStore.start(str(data))
    store.add("a", [user("1")])
    for n in range(5):
        store.add(JOURNAL, [user(f"step {n}")])
    store.add("a", [user("2")])
    assert [c.position for c in store.tail()] == [1, 2]
    assert store.stats()["last_position"] == 2
    store.stop()
    sound(data)  # the journal's five events are named by no position, as it should be


def test_pending_and_erased_journals_pass_the_check_and_the_store_reopens(data: Path) -> None:
    """Forty journals erased and one left pending: the check finds nothing wrong, the
    identity file still agrees at each reopen (erased journals were never counted as
    kept), and the pending one is intact."""
    store = memoryd.LmdbStore.start(str(data))
    store.add("chat", [user("x")])
    for n in range(40):
        store.add(f"{HIDDEN_PREFIX}r{n}", [user("step")])
        store.add("chat", [user(f"turn {n}")], then_clear=f"{HIDDEN_PREFIX}r{n}")
    store.add(f"{HIDDEN_PREFIX}pending", [user("step")])
    store.stop()
    sound(data)
    for _ in range(2):  # the newest conversation numbers were erased: reopen twice
        store = memoryd.LmdbStore.start(str(data))
        assert texts(store.get(f"{HIDDEN_PREFIX}pending")) == ["step"]
        assert len(store.get("chat")) == 41
        store.add(f"{HIDDEN_PREFIX}again", [user("step")])
        store.clear(f"{HIDDEN_PREFIX}again")
        store.add("other", [user("y")])
        store.stop()
        sound(data)
    assert entries(data)["names"] == 3  # chat, other and the pending journal


def test_agent_runs_with_tools_leave_what_runs_without_a_journal_leave(tmp_path: Path) -> None:
    """Ten tool-calling agent runs on a durable store with the journal on leave the same
    entries as the same runs with it off."""

    @memoryd.tool
    def step(n: int) -> int:
        """A step.

        Args:
            n: The step.
        """
        return n

    def run(data: Path, journal: bool) -> dict[str, int]:
        store = memoryd.LmdbStore.start(str(data))
        for r in range(10):
            replies = [
                messages.assistant(tool_calls=[messages.tool_call(f"c{s}", "step", {"n": s})])
                for s in range(3)
            ]
            agent = memoryd.Agent(
                llm=ScriptedModel([*replies, "done"]),
                memory=store,
                tools=[step],
                journal=None if journal else False,
            )
            agent.run(f"run {r}", conversation_id="chat")
        assert store.stats()["conversations_ever"] == 1
        store.stop()
        sound(data)
        return entries(data)

    assert run(tmp_path / "on", True) == run(tmp_path / "off", False)


def test_hidden_conversations_an_older_memoryd_wrote_keep_their_positions(data: Path) -> None:
    """A hidden conversation numbered below ``unlogged_from`` (an older memoryd wrote it,
    with positions) is cleared the old way: a cleared marker, its name and metadata
    kept, its positions still naming its events; the check and the feed agree."""
    store = memoryd.LmdbStore.start(str(data))
    store.add("a", [user("1")])
    store.stop()
    env = lmdb.open(str(data), max_dbs=8)
    try:
        sys_db = env.open_db(layout.SYS_DB, create=False)
        with env.begin(write=True) as txn:
            layout.put(txn, sys_db, layout.UNLOGGED_FROM, (1000).to_bytes(8, "big"))
    finally:
        env.close()
    store = memoryd.LmdbStore.start(str(data))
    store.add(JOURNAL, [user("old step")])
    assert [c.conversation_id for c in store.tail()] == ["a"]  # hidden, though positioned
    store.add("a", [user("2")], then_clear=JOURNAL)
    assert store.version(JOURNAL) == 2  # the cleared marker
    assert [e.kind for e in store.events(JOURNAL)] == ["cleared"]
    # the journal's step took position 2, its cleared marker 4 (after the add it rode on)
    assert [c.position for c in store.tail()] == [1, 3]
    assert store.stats()["last_position"] == 4
    store.stop()
    assert entries(data)["names"] == 2
    sound(data)
    store = memoryd.LmdbStore.start(str(data))
    assert texts(store.get("a")) == ["1", "2"]
    store.stop()


def test_a_damaged_unlogged_from_counter_is_refused_at_open(data: Path) -> None:
    """A flipped bit in the counter is a refusal naming it, never a misread boundary (which
    would erase journals that have positions, or keep ones that have none)."""
    store = memoryd.LmdbStore.start(str(data))
    store.add(JOURNAL, [user("step")])
    store.stop()
    env = lmdb.open(str(data), max_dbs=8)
    try:
        sys_db = env.open_db(layout.SYS_DB, create=False)
        with env.begin(write=True) as txn:
            raw = bytearray(txn.get(layout.UNLOGGED_FROM, db=sys_db))
            raw[-1] ^= 0x01
            txn.put(layout.UNLOGGED_FROM, bytes(raw), db=sys_db)
    finally:
        env.close()
    with pytest.raises(memoryd.StorageError, match=r"unlogged_from.*damaged"):
        memoryd.LmdbStore.start(str(data))
    assert any("unlogged_from" in p for p in check_store(data).problems)
