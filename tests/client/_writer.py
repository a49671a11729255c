"""A client process for the SIGKILL test: appends COUNT messages, logging each acknowledgement."""

from __future__ import annotations

import sys
from pathlib import Path

import memoryd


def read_acks(path: Path) -> list[tuple[int, int]]:
    """The ``(index, version)`` pairs a writer logged so far (complete lines only)."""
    if not path.exists():
        return []
    lines = path.read_text().splitlines()
    return [(int(a), int(b)) for a, b in (line.split() for line in lines if line.count(" ") == 1)]


def main() -> None:
    address, cid, count, ack_path = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    store = memoryd.connect(address, timeout=120.0)
    with open(ack_path, "a", encoding="utf-8") as acks:
        for i in range(count):
            version = store.add(cid, [{"role": "user", "content": f"{cid}-{i}"}])
            acks.write(f"{i} {version}\n")
            acks.flush()


if __name__ == "__main__":
    main()
