"""Writer child for a full copy-on-write disk, started under ``fiu-run -x``.

Usage: python -m tools.reliability.fiu_full_meta DATA_DIR COUNT

On a full copy-on-write file system (btrfs, ZFS) no block is rewritten in place, so the
write of a commit's meta page fails with ENOSPC after its data pages went out, and LMDB
marks the environment unusable. This child stages that on a real, nearly full file
system: it writes 20 events to ``DATA_DIR``, fills the file system below the store's low
water mark, then fails with ENOSPC every ``pwrite`` that follows an ``fdatasync`` (the
meta page: LMDB flushes the data pages before it writes the meta page) and adds COUNT
events, reading after each. Then it frees the space, disarms and adds one more. It prints:

    ENGINE <n>              the store's engine is a new incarnation (n counts them)
    ERR <i> <error type>    add i raised
    ACK <i> <version>       add i returned
    READERR <i> <type>      the read right after add i raised
    META <n>                meta page writes failed in all
"""

from __future__ import annotations

import errno
import os
import sys
import time
from pathlib import Path
from typing import Any

import memoryd
from memoryd.store import lookup
from memoryd.store.lmdb.engine import free_space, low_water
from tools.reliability.fiu_writer import arm, say

_PWRITE = b"posix/io/rw/pwrite"
_SYNC = b"posix/io/sync/fdatasync"
_POINTS = "posix/io/rw/pwrite,posix/io/rw/pwritev,posix/io/rw/writev,posix/io/sync/fdatasync"


def main(path: Path, count: int) -> None:
    """Run the child (see the module docstring)."""
    state: dict[str, Any] = {"armed": False, "last": b"", "metas": 0}

    def decide(name: bytes, failnum: Any, failinfo: Any, flags: Any) -> int:
        last, state["last"] = state["last"], name
        if not state["armed"] or name != _PWRITE or last != _SYNC:
            return 0
        state["metas"] += 1
        failinfo[0] = errno.ENOSPC
        return 1

    callback = arm(_POINTS, decide)  # noqa: F841 (kept alive while armed)
    store = memoryd.LmdbStore.start(path, name="cow-full", call_timeout_s=10.0)
    for i in range(20):
        store.add("c", [memoryd.messages.user(f"before{i}")])
    free, size = free_space(path)
    filler = path.parent / "filler"
    filler.write_bytes(b"\0" * (free - low_water(size) // 2))
    seen: list[object] = []

    def note_engine() -> None:
        deadline = time.monotonic() + 10
        engine = lookup.engine("cow-full")
        while engine is None and time.monotonic() < deadline:  # a restart under way
            time.sleep(0.01)
            engine = lookup.engine("cow-full")
        if engine is not None and not any(engine is e for e in seen):
            seen.append(engine)
            say(f"ENGINE {len(seen)}")

    note_engine()
    state["armed"] = True
    for i in range(count):
        try:
            say(f"ACK {i} {store.add('c', [memoryd.messages.user(f'full{i}')])}")
        except memoryd.StorageError as exc:
            say(f"ERR {i} {type(exc).__name__}")
        try:
            store.get("c", limit=1)
        except Exception as exc:  # any type: the parent names it
            say(f"READERR {i} {type(exc).__name__}")
        note_engine()
    state["armed"] = False
    say(f"META {state['metas']}")
    filler.unlink()
    try:
        say(f"ACK {count} {store.add('c', [memoryd.messages.user('after')])}")
    except memoryd.StorageError as exc:
        say(f"ERR {count} {type(exc).__name__}")
    note_engine()
    store.stop()
    os._exit(0)


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]))
