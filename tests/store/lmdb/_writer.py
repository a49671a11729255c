"""Writer process for test_kill9.py: appends to an LmdbStore until it is killed.

Usage: python _writer.py DATA_DIR FIRST_SEQUENCE

Prints "READY" once the store is open, then for each acknowledged add one line
"ACK <key> <version>", flushed before the next add starts. Every add is one event of three
messages carrying the same marker (the idempotency key), so a torn write would show.
"""

from __future__ import annotations

import sys

import memoryd

CONVERSATION = "kill9"
MAX_ADDS = 1_000_000


def batch(key: str) -> list[dict[str, str]]:
    return [
        {"role": "user", "content": f"{key}#0"},
        {"role": "assistant", "content": f"{key}#1"},
        {"role": "user", "content": f"{key}#2"},
    ]


def main(path: str, first: int) -> None:
    store = memoryd.LmdbStore.start(path)
    print("READY", flush=True)
    for sequence in range(first, first + MAX_ADDS):
        key = f"m{sequence:07d}"
        version = store.add(CONVERSATION, batch(key), idempotency_key=key)
        print(f"ACK {key} {version}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
