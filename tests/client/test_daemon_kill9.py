"""Four client processes write through the daemon while it is SIGKILLed and restarted."""

from __future__ import annotations

from pathlib import Path

import memoryd
from tests.client._writer import read_acks
from tests.helpers import wait_until
from tests.server.daemon import Daemon
from tests.server.writers import assert_each_ack_stored_once, start_writers

CLIENTS = 4
PER_CLIENT = 300
KILLS = 3


def test_sigkill_loses_no_acknowledged_write_and_duplicates_none(tmp_path: Path) -> None:
    """Every acknowledged add is stored exactly once, in order, across SIGKILLs of the daemon."""
    try:
        with Daemon().start() as daemon:
            acks = [tmp_path / f"acks-{c}" for c in range(CLIENTS)]
            clients = start_writers([daemon.address], "p", PER_CLIENT, acks)
            for cycle in range(1, KILLS + 1):
                target = cycle * PER_CLIENT // (KILLS + 2)
                wait_until(
                    lambda t=target: all(len(read_acks(a)) >= t for a in acks),
                    timeout=120,
                    message=f"clients did not reach {target} acknowledged adds",
                )
                daemon.restart()
            for proc in clients:
                assert proc.wait(timeout=180) == 0
            store = daemon.connect()
            assert_each_ack_stored_once(store, "p", PER_CLIENT, acks)
            for c in range(CLIENTS):
                keys = [e.idempotency_key for e in store.events(f"p{c}")]
                assert keys == [None] * PER_CLIENT
    finally:
        memoryd.shutdown()
