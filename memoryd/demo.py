"""``make demo``: a short in-process tour of the library on an embedded LMDB directory.

It runs the library against a durable store in ``--data`` and prints what a
conversation looks like before and after a crash of the store's actor. The
daemon is ``memoryd serve`` (``make run``).
"""

from __future__ import annotations

import argparse
import json
import time
import uuid

import memoryd
from memoryd import messages
from memoryd.logging import configure
from supervisors import kill


def main(argv: list[str] | None = None) -> int:
    """Run the demo; returns the process exit code."""
    parser = argparse.ArgumentParser(prog="python -m memoryd.demo", description=__doc__)
    parser.add_argument("--data", default="data", help="data directory (default: ./data)")
    parser.add_argument("--log", choices=["console", "json"], default="console")
    args = parser.parse_args(argv)
    configure(fmt=args.log, level="warning")

    store = memoryd.LmdbStore.start(args.data, name="demo")
    cid = f"demo-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
    print(f"memoryd {memoryd.__version__}: durable store in {store.path}")
    store.add(cid, [messages.system("You are terse."), messages.user("My name is Alice.")])
    store.add(cid, [messages.assistant("Noted, Alice.")], idempotency_key="turn-1")
    store.add(cid, [messages.assistant("Noted, Alice.")], idempotency_key="turn-1")  # a retry
    print(f"conversation {cid!r}, version {store.version(cid)}:")
    for message in store.get(cid):
        print("  ", json.dumps(message, ensure_ascii=False))

    kill("demo")  # the store actor crashes; its supervisor restarts it
    store.add(cid, [messages.user("What is my name?")])
    print(f"after a crash of the store actor: {len(store.get(cid))} messages, nothing lost")
    stats = store.stats()
    print(
        f"store: {stats['conversations']} conversations, {stats['events']} events, "
        f"{stats['used_bytes']} bytes used"
    )
    print(f"conversations on disk: {', '.join(store.conversations()[-5:])}")
    print("this was the in-process library; `make run` serves the same stores over HTTP.")
    memoryd.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
