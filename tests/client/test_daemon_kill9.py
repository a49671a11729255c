"""Four client processes write through the daemon while it is SIGKILLed and restarted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import memoryd
from tests.client._writer import read_acks
from tests.helpers import wait_until
from tests.server.daemon import Daemon

CLIENTS = 4
PER_CLIENT = 300
KILLS = 3


def test_sigkill_loses_no_acknowledged_write_and_duplicates_none(tmp_path: Path) -> None:
    """Every acknowledged add is stored exactly once, in order, across SIGKILLs of the daemon."""
    daemon = Daemon().start()
    try:
        acks = [tmp_path / f"acks-{c}" for c in range(CLIENTS)]
        clients = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tests.client._writer",
                    daemon.address,
                    f"p{c}",
                    str(PER_CLIENT),
                    str(acks[c]),
                ]
            )
            for c in range(CLIENTS)
        ]
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
        for c, path in enumerate(acks):
            acked = read_acks(path)
            assert [i for i, _ in acked] == list(range(PER_CLIENT))
            assert [v for _, v in acked] == list(range(1, PER_CLIENT + 1))
            texts = [m["content"] for m in store.get(f"p{c}")]
            assert texts == [f"p{c}-{i}" for i in range(PER_CLIENT)]
            assert [e.idempotency_key for e in store.events(f"p{c}")] == [None] * PER_CLIENT
    finally:
        daemon.close()
        memoryd.shutdown()
