"""A client process for the SIGKILL test: appends COUNT messages, logging each acknowledgement."""

from __future__ import annotations

import sys

import memoryd


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
