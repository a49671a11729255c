"""A store directory whose LMDB files are not regular files, and an identity file that
cannot be written: refused or cleaned up, never a hang or a stray file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memoryd.store.lmdb import identity

_PROBE = """
import json, sys
from pathlib import Path
import memoryd
from memoryd.store.lmdb.backup import backup
from memoryd.store.lmdb.check import check_store

directory = Path(sys.argv[1])
said = {}
try:
    memoryd.LmdbStore.start(directory, name="fifo-store").stop()
    said["start"] = None
except memoryd.StorageError as exc:
    said["start"] = str(exc)
said["check"] = check_store(directory).problems
try:
    backup(directory, directory.parent / "copy")
    said["backup"] = None
except memoryd.StorageError as exc:
    said["backup"] = str(exc)
print(json.dumps(said))
"""


@pytest.mark.parametrize("name", ["data.mdb", "lock.mdb"])
def test_a_fifo_in_place_of_an_lmdb_file_is_refused_not_waited_on(
    tmp_path: Path, name: str
) -> None:
    """A FIFO named data.mdb or lock.mdb: starting the store, checking it and backing it
    up each refuse it naming the file; nothing waits on the FIFO (every command used to
    hang on it for good: the probe runs in its own process, so a hang fails the test)
    and nothing but the owner's lock file is created beside it."""
    directory = tmp_path / "store"
    directory.mkdir()
    fifo = directory / name
    os.mkfifo(fifo)
    try:
        done = subprocess.run(
            [sys.executable, "-c", _PROBE, str(directory)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"a store with a FIFO named {name} was waited on for 60 s")
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout)
    problem = f"{fifo} is a FIFO, not a regular file"
    assert problem in said["start"]
    assert said["check"] == [problem]
    assert problem in said["backup"]
    assert not (tmp_path / "copy").exists()
    assert {p.name for p in directory.iterdir()} - {"memoryd.lock"} == {name}


def test_an_identity_file_that_cannot_be_written_leaves_no_temporary_file(
    small_disk: Path,
) -> None:
    """On a full disk, writing the identity file fails (ENOSPC) and its temporary file
    is removed (an empty ``identity.json.tmp`` used to stay in the store's directory)."""
    directory = small_disk / "store"
    directory.mkdir()
    with open(small_disk / "filler", "wb") as filler:
        try:
            while True:
                filler.write(b"\0" * 65536)
                filler.flush()
        except OSError:
            pass
    with pytest.raises(OSError):
        identity.write(directory, identity.Identity.new(1))
    assert list(directory.iterdir()) == []
