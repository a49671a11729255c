"""Offline audit of an LMDB data directory (the installed py-lmdb has no ``lmdb.verify``).

Opens the data file read-only without the lock file, walks every record of the
main database and of every named sub-database (LMDB checks each page it visits
and raises on a bad page number, a bad page type or a short file), and checks
that the sub-databases memoryd needs are present.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lmdb

REQUIRED = (b"names", b"events", b"positions", b"meta", b"idempotency", b"sys")


def named_dbs(env: lmdb.Environment, txn: lmdb.Transaction) -> list[tuple[bytes, Any]]:
    """``(name, handle)`` of every named database of ``env`` (the main database's records
    that are not one are skipped)."""
    dbs = []
    for name in [bytes(key) for key, _ in txn.cursor()]:
        try:
            dbs.append((name, env.open_db(name, txn=txn, create=False)))
        except lmdb.Error:
            continue  # a plain record of the main database
    return dbs


def verify(directory: Path) -> list[str]:
    """Audit ``directory/data.mdb``; returns the problems found (empty when sound)."""
    data = directory / "data.mdb"
    if not data.exists():
        return [f"{data} is missing"]
    if data.stat().st_size == 0:
        return []  # created, never initialised: LMDB starts it afresh
    problems: list[str] = []
    try:
        env = lmdb.open(str(data), subdir=False, readonly=True, lock=False, max_dbs=64)
    except lmdb.Error as exc:
        return [f"{data}: cannot open: {exc}"]
    try:
        with env.begin(buffers=False) as txn:
            dbs = named_dbs(env, txn)
            names = [name for name, _ in dbs]
            for name, db in dbs:
                previous = None
                for key, value in txn.cursor(db=db):
                    if not isinstance(value, bytes):
                        problems.append(f"{name!r}: a value is not bytes")
                    if previous is not None and key <= previous:
                        problems.append(f"{name!r}: keys out of order at {key!r}")
                    previous = key
        present = set(names)
        if names:
            problems += [f"sub-database {n!r} missing" for n in REQUIRED if n not in present]
    except lmdb.Error as exc:
        problems.append(f"{data}: {type(exc).__name__}: {exc}")
    finally:
        env.close()
    return problems
