"""Child process for the syscall-trace check: start a store, append, write ACK to fd 1.

Usage: python -m tools.reliability.append_child DATA_DIR durable|nosync COUNT

``durable`` uses ``LmdbStore.start``; ``nosync`` starts the same engine with
``durable=False`` (the negative control). Each acknowledged add is followed by
one ``write(1, "ACK <version>\\n")`` so the trace shows when it was acknowledged.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import memoryd
from memoryd.store.config import StoreConfig


def main(path: str, mode: str, count: int) -> None:
    """Append ``count`` messages and acknowledge each on fd 1."""
    if mode == "durable":
        store = memoryd.LmdbStore.start(path, name="trace")
    else:
        config = StoreConfig(name="trace", kind="lmdb", path=Path(path), durable=False)
        store = memoryd.LmdbStore._start(config)
    for i in range(count):
        version = store.add("c", [memoryd.messages.user(f"m{i}")])
        os.write(1, f"ACK {version}\n".encode())
    memoryd.shutdown()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
