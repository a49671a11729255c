"""Bytes damaged in a real data file: every read is right or raises `CorruptRecord`, a
damaged store is refused rather than opened empty, and a damaged page never aborts the
process (memoryd.store.lmdb: codec seals, identity file, page verification at open)."""

from __future__ import annotations

import shutil
import struct
import tempfile
from pathlib import Path

import pytest

import memoryd
from memoryd import messages
from memoryd.errors import CorruptRecord, MemorydError, StorageError
from memoryd.store.lmdb import check, identity
from memoryd.store.lmdb.backup import backup
from tests.server.daemon import Daemon
from tools.reliability.corruption import PAGE, run_trials

_TXNID = 16 + 24 + 2 * 48 + 8
_MAIN_ROOT = 16 + 24 + 48 + 40


@pytest.fixture(autouse=True)
def _fresh_tree() -> object:
    yield
    memoryd.shutdown()


def _write(directory: Path, conversations: int = 20) -> None:
    store = memoryd.LmdbStore.start(directory, name="written")
    for n in range(conversations):
        for turn in range(3):
            store.add(f"c{n}", [messages.user(f"conversation {n} turn {turn} marker-{n}-{turn}")])
    store.stop()
    memoryd.shutdown()


def _flip(path: Path, offset: int, bit: int = 0) -> None:
    with open(path, "r+b") as file:
        file.seek(offset)
        byte = file.read(1)[0]
        file.seek(offset)
        file.write(bytes([byte ^ (1 << bit)]))


def _flip_text(path: Path, text: bytes) -> None:
    """Flip one bit of ``text`` wherever it is in the file (free pages hold stale copies)."""
    raw = path.read_bytes()
    assert text in raw
    path.write_bytes(raw.replace(text, bytes([text[0] ^ 1]) + text[1:]))


def _newest_meta(data: Path) -> int:
    raw = data.read_bytes()
    (txn0,) = struct.unpack_from("=Q", raw, _TXNID)
    (txn1,) = struct.unpack_from("=Q", raw, PAGE + _TXNID)
    return 0 if txn0 > txn1 else 1


def test_damaged_bytes_never_give_a_wrong_answer(tmp_path: Path) -> None:
    """Random bit flips, zeroed pages and meta-page flips in a store of 100 conversations:
    no wrong answer, no store opened empty, no reader aborted, and damage was seen."""
    tally = run_trials(tmp_path, flips=40, zeros=12, metas=12, seed=19)
    assert tally.ok, tally.failures
    assert tally.trials == 64
    assert tally.refused + tally.detected > 0  # the damage was noticed, not missed
    assert tally.right > 0  # and undamaged answers still came back


def test_a_flipped_bit_in_a_message_raises_corrupt_record_naming_it(tmp_path: Path) -> None:
    """A bit flipped inside a stored message makes that read raise, naming the
    conversation and version, while other conversations read normally."""
    directory = tmp_path / "s"
    _write(directory)
    data = directory / "data.mdb"
    _flip_text(data, b"marker-7-1")
    store = memoryd.LmdbStore.start(directory)
    with pytest.raises(CorruptRecord, match=r"event 2 of conversation 'c7'.*memoryd check"):
        store.get("c7")
    with pytest.raises(CorruptRecord, match="event 2 of conversation 'c7'"):
        store.events("c7")
    with pytest.raises(CorruptRecord, match="event 2 of conversation 'c7'"):
        store.tail(limit=1000)
    assert store.get("c7", limit=1) == [messages.user("conversation 7 turn 2 marker-7-2")]
    assert len(store.get("c8")) == 3


def test_a_damaged_main_root_is_refused_not_opened_empty(tmp_path: Path) -> None:
    """A flipped bit in the committed meta page's main-database root is refused at open,
    and the data file is left as it was (nothing written over it)."""
    directory = tmp_path / "s"
    _write(directory)
    data = directory / "data.mdb"
    _flip(data, _newest_meta(data) * PAGE + _MAIN_ROOT, bit=1)
    before = data.read_bytes()
    with pytest.raises(StorageError, match=r"refused.*memoryd check.*backup"):
        memoryd.LmdbStore.start(directory)
    assert data.read_bytes() == before


def test_a_data_file_of_another_or_no_store_is_refused(tmp_path: Path) -> None:
    """The identity file refuses a data file swapped for another store's, or removed."""
    first, second = tmp_path / "a", tmp_path / "b"
    _write(first)
    _write(second, conversations=1)
    shutil.copy(second / "data.mdb", first / "data.mdb")
    with pytest.raises(StorageError, match="belongs to another store"):
        memoryd.LmdbStore.start(first)
    (first / "data.mdb").unlink()
    with pytest.raises(StorageError, match=r"missing or empty.*records 20 conversations"):
        memoryd.LmdbStore.start(first)


def test_a_data_file_without_identity_is_refused_as_an_old_format(tmp_path: Path) -> None:
    """A data file with no identity file (a store from before checksums) is refused,
    saying how to move its data."""
    directory = tmp_path / "s"
    _write(directory)
    (directory / identity.FILE_NAME).unlink()
    with pytest.raises(StorageError, match=r"no identity.json.*store format 2.*export"):
        memoryd.LmdbStore.start(directory)


def test_the_identity_file_follows_the_store_as_it_grows(tmp_path: Path) -> None:
    """The identity file's counters rise with the store (a lower bound, at least half)."""
    directory = tmp_path / "s"
    store = memoryd.LmdbStore.start(directory)
    for n in range(10):
        store.add(f"c{n}", [messages.user("x")])
        known = identity.read(directory)
        assert known is not None
        assert 2 * known.conversations >= n + 1
        assert 2 * known.position >= n + 1
    store.stop()
    known = identity.read(directory)
    assert known is not None and (known.conversations, known.position) == (10, 10)


def test_a_zeroed_page_is_refused_where_lmdb_would_abort(tmp_path: Path) -> None:
    """Each page zeroed in turn: the store is refused or reads right; the process lives
    (liblmdb asserts, and aborts, on several of these pages when it walks them)."""
    directory = tmp_path / "s"
    _write(directory)
    pages = (directory / "data.mdb").stat().st_size // PAGE
    refused = 0
    for page in range(pages):
        trial = tmp_path / f"t{page}"
        shutil.copytree(directory, trial)
        with open(trial / "data.mdb", "r+b") as file:
            file.seek(page * PAGE)
            file.write(bytes(PAGE))
        try:
            store = memoryd.LmdbStore.start(trial, name=f"t{page}")
        except StorageError:
            refused += 1
            continue
        try:
            for n in range(20):
                assert len(store.get(f"c{n}")) == 3
        except CorruptRecord:
            pass
        finally:
            store.stop()
    assert refused > 0


def test_check_reports_damage_and_a_restored_backup_is_sound(tmp_path: Path) -> None:
    """`check_directory` finds a damaged record; the directory replaced by a backup
    taken before opens as the same store and checks sound."""
    data = tmp_path / "data"
    _write(data)
    saved = tmp_path / "saved"
    backup(data, saved)
    assert [r.sound for r in check.check_directory(data)] == [True]
    _flip_text(data / "data.mdb", b"marker-3-0")
    (report,) = check.check_directory(data)
    assert not report.sound
    assert any("event 1 of conversation 'c3'" in p for p in report.problems)
    shutil.rmtree(data)
    shutil.move(saved, data)
    (report,) = check.check_directory(data)
    assert report.sound, report.problems
    store = memoryd.LmdbStore.start(data)
    assert len(store.get("c3")) == 3


def _live_page_of(data: Path, tree: str, text: bytes) -> int:
    """A page of sub-database ``tree`` holding ``text`` in the last snapshot: a zeroed copy
    of it is what the verifier reports against that tree (free pages hold stale copies)."""
    raw = data.read_bytes()
    with tempfile.TemporaryDirectory() as scratch:
        for page in range(2, len(raw) // PAGE):
            if text not in raw[page * PAGE : (page + 1) * PAGE]:
                continue
            zeroed = raw[: page * PAGE] + bytes(PAGE) + raw[(page + 1) * PAGE :]
            (Path(scratch) / check.DATA_FILE).write_bytes(zeroed)
            if any(
                f"/{tree} DB: page {page} " in p for p in check.structure_problems(Path(scratch))
            ):
                return page
    raise AssertionError(f"no live page of {tree} holds {text!r}")


def test_a_daemon_answers_an_error_for_a_damaged_store_and_stays_up() -> None:
    """A real ``memoryd serve``: GET …/events on a named store whose data file has a
    zeroed page answers an error, again and again, while the daemon keeps serving."""
    root = Path(tempfile.mkdtemp(prefix="mdc-", dir="/tmp"))  # a short socket path
    try:
        named = root / "d" / "stores" / "notes"
        _write(named)
        page = _live_page_of(named / "data.mdb", "events", b"marker-1-0")
        with open(named / "data.mdb", "r+b") as file:
            file.seek(page * PAGE)  # a leaf walked by reads: liblmdb asserts on it
            file.write(bytes(PAGE))
        with Daemon(root / "d") as daemon:
            daemon.start()
            notes = memoryd.connect(daemon.address, store="notes")
            default = memoryd.connect(daemon.address)
            for _ in range(3):
                with pytest.raises(MemorydError, match=r"refused|damaged"):
                    notes.events("c1")
                assert default.add("ok", [messages.user("still here")]) >= 1
            assert daemon.proc is not None and daemon.proc.poll() is None
    finally:
        shutil.rmtree(root, ignore_errors=True)
