"""Child process for the syscall-trace check: start a store, append, write ACK to fd 1.

Usage: python -m tools.reliability.append_child DATA_DIR durable|nosync COUNT

``durable`` uses ``LmdbStore.start``; ``nosync`` starts the same engine with
``durable=False`` (the negative control). Each acknowledged add is followed by
one ``write(1, "ACK <version>\\n")`` so the trace shows when it was acknowledged.
"""

from __future__ import annotations

import os
import sys

import memoryd
from tools.reliability.writers import open_store


def main(path: str, mode: str, count: int) -> None:
    """Append ``count`` messages and acknowledge each on fd 1."""
    store = open_store(path, name="trace", durable=mode == "durable")
    for i in range(count):
        version = store.add("c", [memoryd.messages.user(f"m{i}")])
        os.write(1, f"ACK {version}\n".encode())
    memoryd.shutdown()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
