"""Redis kill -9 under unkeyed writers: each acknowledged add and pop is applied once.

Writer threads, each on a conversation of its own, add messages without an
idempotency key (every message carries a unique id) and pop, through one
`memoryd.RedisStore`, while redis-server (``appendonly yes``, ``appendfsync always``)
is SIGKILLed at random moments and restarted on the same port and data directory.
A write in flight at a kill is resent by the store once Redis is back (the script
cache is empty then, so it is planned again); its caller gets an answer, or
`memoryd.StoreUnavailable` (outcome unknown) if Redis stayed away too long.

On a Redis Cluster (``cluster=True``, the servers its masters) each kill picks one
master at random; it is restarted with its ``nodes.conf`` and rejoins, and the next
kill waits until it serves its slots again (a restarted master refuses writes for two
seconds). The writes of the conversations on the other masters go on meanwhile, in
the same batches.

`audit` then reads each conversation's event log and counts, with the writers' own
record of what they sent and what was acknowledged:

* **lost**: an acknowledged add whose message is in no ``appended`` event, or an
  acknowledged pop whose message is in no ``popped`` event;
* **duplicated**: a message stored by more than one ``appended`` event, plus the
  ``popped`` events no pop call accounts for (each acknowledged pop accounts for the
  event holding the message it returned, each failed pop for at most one more);
* **problems**: anything else (a message no writer sent, a pop that returned a
  message it did not remove, a call that failed with anything but
  `memoryd.StoreUnavailable`: its writer stops there).
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import memoryd

__all__ = ["Audit", "Server", "WriterLog", "audit", "run"]


class Server(Protocol):
    """A redis-server the run may kill and start again (``tests.redis_servers.RedisServer``)."""

    @property
    def url(self) -> str: ...

    def kill(self) -> None: ...

    def start(self) -> Any: ...


@dataclass(slots=True)
class WriterLog:
    """What one writer sent and what was acknowledged, on its conversation."""

    cid: str
    tried: set[str] = field(default_factory=set)
    """Ids of every message an add carried (acknowledged or not)."""
    added: list[str] = field(default_factory=list)
    """Ids of the acknowledged adds."""
    popped: list[str | None] = field(default_factory=list)
    """What each acknowledged pop returned (the message's id, None when empty)."""
    failed_adds: int = 0
    failed_pops: int = 0
    error: str | None = None
    """The error that stopped the writer: a call failed with anything but
    `memoryd.StoreUnavailable` (the store crashed, or refused the write)."""


@dataclass(slots=True)
class Audit:
    """The run's figures."""

    kills: int = 0
    operations: int = 0
    acknowledged: int = 0
    lost: int = 0
    duplicated: int = 0
    reconnects: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No loss, no duplicate, no other problem."""
        return not (self.lost or self.duplicated or self.problems)


def audit(logs: Sequence[WriterLog], events: Mapping[str, Sequence[Any]]) -> Audit:
    """Check each writer's conversation log (``events[cid]``: `memoryd.Event` s) against
    what the writer sent. Pure."""
    out = Audit()
    for log in logs:
        appended: Counter[str] = Counter()
        popped: Counter[str] = Counter()
        for event in events.get(log.cid, ()):
            ids = [str(m.get("content")) for m in event.messages]
            if event.kind == "appended":
                appended.update(ids)
            elif event.kind == "popped":
                popped.update(ids)
        out.operations += len(log.tried) + len(log.popped) + log.failed_pops
        out.acknowledged += len(log.added) + len(log.popped)
        if log.error is not None:
            out.problems.append(f"{log.cid}: a call failed: {log.error}")
        out.duplicated += sum(n - 1 for n in appended.values() if n > 1)
        out.lost += sum(1 for key in log.added if key not in appended)
        strangers = set(appended) - log.tried
        if strangers:
            out.problems.append(
                f"{log.cid}: stored messages no writer sent: {sorted(strangers)[:3]}"
            )
        returned = Counter(key for key in log.popped if key is not None)
        out.lost += sum(1 for key in returned if key not in popped)
        if any(n > 1 for n in returned.values()):
            out.problems.append(f"{log.cid}: one message returned by two pops")
        unaccounted = sum(n for key, n in popped.items() if key not in returned)
        unaccounted += sum(n - 1 for key, n in popped.items() if key in returned and n > 1)
        out.duplicated += max(0, unaccounted - log.failed_pops)
    return out


def _writer(store: Any, log: WriterLog, stop: threading.Event, seed: int) -> None:
    try:
        _write(store, log, stop, seed)
    except Exception as exc:  # reported by the audit as a problem
        log.error = repr(exc)


def _write(store: Any, log: WriterLog, stop: threading.Event, seed: int) -> None:
    rng = random.Random(seed)
    serial = 0
    while not stop.is_set():
        if rng.random() < 0.7:
            key = f"{log.cid}-{serial}"
            serial += 1
            log.tried.add(key)
            try:
                store.add(log.cid, [{"role": "user", "content": key}])
            except memoryd.StoreUnavailable:
                log.failed_adds += 1
                continue
            log.added.append(key)
        else:
            try:
                message = store.pop(log.cid)
            except memoryd.StoreUnavailable:
                log.failed_pops += 1
                continue
            log.popped.append(None if message is None else str(message["content"]))


def run(
    servers: Sequence[Server],
    *,
    kills: int,
    cluster: bool = False,
    writers: int = 4,
    seed: int = 0,
    call_timeout_s: float = 5.0,
    prefix: str = "kill9",
) -> Audit:
    """Run ``writers`` unkeyed writers through ``kills`` SIGKILLs of ``servers`` (running),
    then audit every conversation.

    Args:
        servers: the one redis-server, or a Cluster's masters; the store connects to
            the first (a Cluster client finds the others), each kill picks one.
        kills: how many SIGKILLs (each followed by a restart on the same data).
        cluster: the servers are a Redis Cluster's masters.
        writers: writer threads, each on a conversation of its own.
        seed: seeds the kills' timing and choice, and the writers' choices.
        call_timeout_s: the store's call timeout.
        prefix: the store's key prefix.

    Between kills a server runs 20 to 300 ms (after it started, or on a Cluster after
    it reported the cluster ok); it is down 0 to 200 ms.
    """
    if not servers:
        raise ValueError("run needs at least one redis-server to kill")
    rng = random.Random(seed)
    store = memoryd.RedisStore.start(
        servers[0].url,
        name=f"{prefix}-{seed}",
        prefix=prefix,
        cluster=cluster,
        call_timeout_s=call_timeout_s,
    )
    logs = [WriterLog(cid=f"w{i}") for i in range(writers)]
    stop = threading.Event()
    threads = [
        threading.Thread(target=_writer, args=(store, log, stop, seed * 1000 + i), daemon=True)
        for i, log in enumerate(logs)
    ]
    for thread in threads:
        thread.start()
    try:
        for _ in range(kills):
            time.sleep(rng.uniform(0.02, 0.3))  # let the writers run
            server = rng.choice(servers)
            server.kill()
            time.sleep(rng.uniform(0.0, 0.2))  # down for a moment
            server.start()
        time.sleep(0.2)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=4 * call_timeout_s)
    events = {log.cid: store.events(log.cid) for log in logs}
    result = audit(logs, events)
    result.kills = kills
    result.reconnects = int(store.stats()["reconnects"])
    store.stop()
    return result
