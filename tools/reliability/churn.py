"""A writer process that runs append/clear cycles on an LMDB store, on command.

``python -m tools.reliability.churn DIR [--durable] [--conversations K]`` opens
``DIR`` with memoryd's ``LmdbEngine`` (the engine a store actor owns, with its
stale-reader check) and reads commands from stdin, one a line:

- ``cycles N``: N cycles, each an ``add`` of one message and a ``clear`` of the same
  conversation (round-robin over K conversations), every write its own commit;
- ``quit``: close the environment and exit.

After ``ready`` and after each command it prints one JSON line: cycles so far, the
data file's size, the live data (pages of every database), commits and stale
reader slots cleared so far, and the seconds the command took. Without
``--durable`` the environment does not fsync (LMDB reuses pages the same way
either way; the durable path costs a disk flush per commit).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from memoryd import logging as memoryd_logging
from memoryd import messages
from memoryd.events import EventKind
from memoryd.store.lmdb import writes as lmdb_ops
from memoryd.store.lmdb.engine import LmdbEngine
from memoryd.store.lmdb.layout import Counters, Dbs
from tools.reliability.space import live_bytes

_MESSAGE = messages.user("x" * 200)


def _report(engine: LmdbEngine, cycles: int, seconds: float) -> dict[str, Any]:
    live = engine.read(lambda txn, dbs: live_bytes(engine.env, txn))
    return {
        "cycles": cycles,
        "file_bytes": os.stat(engine.path / "data.mdb").st_size,
        "live_bytes": live,
        "commits": engine.commits,
        "stale_readers_cleared": engine.stale_readers_cleared,
        "seconds": round(seconds, 3),
    }


def _cycle(engine: LmdbEngine, cid: str) -> None:
    def add(txn: Any, dbs: Dbs, ctr: Counters) -> Any:
        return lmdb_ops.append(
            txn,
            dbs,
            ctr,
            cid,
            kind=EventKind.APPENDED.value,
            messages=[_MESSAGE],
            data=None,
            idempotency_key=None,
            expected_version=None,
            now=time.time(),
        )

    def clear(txn: Any, dbs: Dbs, ctr: Counters) -> Any:
        return lmdb_ops.clear(txn, dbs, ctr, cid, now=time.time())

    for op in (add, clear):
        ((ok, value),) = engine.write_batch([op])
        if not ok:
            raise value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path)
    parser.add_argument("--durable", action="store_true")
    parser.add_argument("--conversations", type=int, default=10)
    args = parser.parse_args(argv)
    memoryd_logging.configure(fmt="json", level="warning")  # stdout is for reports
    engine = LmdbEngine(args.data, durable=args.durable, map_size=1 << 20)
    done = 0
    try:
        print(json.dumps({"ready": True, **_report(engine, done, 0.0)}), flush=True)
        for line in sys.stdin:
            words = line.split()
            if not words:
                continue
            if words[0] == "quit":
                break
            if words[0] != "cycles" or len(words) != 2 or not words[1].isdigit():
                print(json.dumps({"error": f"unknown command {line.strip()!r}"}), flush=True)
                continue
            started = time.monotonic()
            for _ in range(int(words[1])):
                _cycle(engine, f"churn-{done % args.conversations}")
                done += 1
            print(json.dumps(_report(engine, done, time.monotonic() - started)), flush=True)
    finally:
        engine.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
