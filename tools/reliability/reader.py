"""A separate reader process on an LMDB data directory, as another tool or daemon would be.

``python -m tools.reliability.reader DIR --hold`` opens ``DIR`` read-only (taking a
slot in the reader table), begins ONE read transaction, prints ``holding``, and
keeps it open until it reads ``end`` on stdin (then prints ``ended``) or is killed.

``python -m tools.reliability.reader DIR --poll-ms 1`` runs short read
transactions (read the conversation list) one after another, sleeping between them,
until it reads ``end`` on stdin or is killed: a long-running reader such as a tail
client. On ``end`` it prints ``{"transactions": N, "longest_window": W}``: W is the
most commits the writer made while one of its transactions was open (the pages those
commits copied could not be reused until it ended).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from pathlib import Path

import lmdb


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--hold", action="store_true")
    mode.add_argument("--poll-ms", type=float)
    args = parser.parse_args(argv)
    env = lmdb.open(str(args.data), readonly=True, lock=True, max_dbs=8, create=False)
    if args.hold:
        txn = env.begin()
        txn.stat()
        print("holding", flush=True)
        for line in sys.stdin:
            if line.strip() == "end":
                break
        txn.abort()
        print("ended", flush=True)
        env.close()
        return 0
    names = env.open_db(b"names", create=False)
    ended = threading.Event()

    def wait_for_end() -> None:
        for line in sys.stdin:
            if line.strip() == "end":
                break
        ended.set()

    threading.Thread(target=wait_for_end, daemon=True).start()
    print("polling", flush=True)
    transactions = longest = 0
    while not ended.is_set():
        try:
            with env.begin() as txn:
                snapshot = txn.id()
                sum(1 for _ in txn.cursor(db=names))
            longest = max(longest, env.info()["last_txnid"] - snapshot)
            transactions += 1
        except lmdb.MapResizedError:
            env.set_mapsize(0)  # the writer grew the map: adopt its size
        ended.wait(args.poll_ms / 1000)
    print(json.dumps({"transactions": transactions, "longest_window": longest}), flush=True)
    env.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
