"""``memoryd tail``: ``--limit N`` prints N changes; ``-f`` exits when its daemon goes away."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import memoryd
from tests.helpers import Worker
from tests.server.daemon import Daemon


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}


def _tail(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memoryd.cli", "tail", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(),
        check=False,
    )


def _five_changes(data: Path) -> None:
    store = memoryd.LmdbStore.start(data, name="tail-data")
    try:
        for i in range(5):
            store.add(f"c{i}", [{"role": "user", "content": str(i)}])
    finally:
        store.stop()


def test_limit_prints_that_many_changes(tmp_path: Path) -> None:
    """``tail --limit 2`` prints the first two changes after ``--after``, not the whole feed."""
    data = tmp_path / "d"
    _five_changes(data)
    done = _tail("--limit", "2", "--data", str(data))
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["position"] for line in done.stdout.splitlines()] == [1, 2]
    done = _tail("--after", "3", "--limit", "5", "--data", str(data))
    assert [json.loads(line)["position"] for line in done.stdout.splitlines()] == [4, 5]
    done = _tail("--data", str(data))
    assert len(done.stdout.splitlines()) == 5


def test_follow_with_a_limit_stops_after_that_many(tmp_path: Path) -> None:
    """``tail -f --limit 3`` exits 0 once it has printed three changes."""
    data = tmp_path / "d"
    _five_changes(data)
    done = _tail("-f", "--limit", "3", "--data", str(data))
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["position"] for line in done.stdout.splitlines()] == [1, 2, 3]


def test_follow_exits_with_an_error_when_the_daemon_goes_away() -> None:
    """Killing the daemon under ``tail -f`` ends it with status 1 and an error that says
    where to resume, instead of a tail that waits forever."""
    with Daemon().start() as daemon:
        daemon.connect().add("before", [{"role": "user", "content": "hi"}])
        proc = subprocess.Popen(
            [sys.executable, "-m", "memoryd.cli", "tail", "-f", "--address", daemon.address],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(),
        )
        try:
            assert proc.stdout is not None
            reader = Worker(proc.stdout.readline)
            reader.start()
            first = json.loads(reader.outcome(timeout=60))
            assert first["conversation_id"] == "before"
            daemon.kill()
            _, stderr = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(30)
    assert proc.returncode == 1
    assert "StoreUnavailable" in stderr
    assert "stopped answering" in stderr and "--after 1" in stderr
