"""``memoryd runs``: the unfinished agent runs of a store, listed and discarded, on a data
directory and through a daemon, with the runs of a real process that is then SIGKILLed."""

from __future__ import annotations

import io
import json
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from memoryd.cli.runs import _show
from tests.agents._spawn import crashing
from tests.cli._run import run
from tests.server.daemon import Daemon


@pytest.fixture
def daemon() -> Iterator[Daemon]:
    root = Path(tempfile.mkdtemp(prefix="md-runs-", dir="/tmp"))
    running = Daemon(root / "data").start()
    yield running
    running.kill()


def listed(*where: str) -> list[dict[str, object]]:
    done = run("runs", *where)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def killed(process: subprocess.Popen[str]) -> None:
    process.kill()
    process.wait()


def test_a_killed_processs_runs_are_listed_orphaned_and_discarded_on_a_data_directory(
    tmp_path: Path,
) -> None:
    """Two runs blocked at their third step, their process SIGKILLed: both listed with
    their agent type and two tool results; one discarded, then refused as unknown."""
    data = tmp_path / "data"
    killed(crashing(f"lmdb:{data}", tmp_path / "effects"))
    runs = listed("--data", str(data))
    assert sorted(r["conversation_id"] for r in runs) == ["w/k0", "w/k1"]
    assert all((r["agent"], r["tool_results"], r["orphaned"]) == ("w", 2, True) for r in runs)
    gone = str(runs[0]["run_id"])
    done = run("runs", "--data", str(data), "--discard", gone)
    assert (done.returncode, json.loads(done.stdout)) == (0, {"discarded": gone})
    assert [r["run_id"] for r in listed("--data", str(data))] == [runs[1]["run_id"]]
    again = run("runs", "--data", str(data), "--discard", gone)
    assert again.returncode == 1 and "no unfinished run" in again.stderr


def test_a_live_processs_runs_are_listed_live_and_not_discarded_through_the_daemon(
    daemon: Daemon, tmp_path: Path
) -> None:
    """While the process runs them its runs are live and a discard is refused (exit 1,
    naming the owner); once it is killed the same discard drops the run."""
    name = f"runs-{uuid.uuid4().hex[:8]}"
    where = ("--address", daemon.address, "--store", name)
    process = crashing(f"remote:{daemon.address}/{name}", tmp_path / "effects")
    try:
        runs = listed(*where)
        assert len(runs) == 2 and not any(r["orphaned"] for r in runs)
        refused = run("runs", *where, "--discard", str(runs[0]["run_id"]))
        assert refused.returncode == 1
        assert "held by the live process" in refused.stderr
    finally:
        killed(process)
    assert all(r["orphaned"] for r in listed(*where))
    assert run("runs", *where, "--discard", str(runs[0]["run_id"])).returncode == 0
    assert len(listed(*where)) == 1


def test_people_get_a_table_and_an_empty_store_says_so() -> None:
    """The text for a terminal: one aligned line a run under a header."""
    out = io.StringIO()
    _show([], out)
    assert out.getvalue() == "no unfinished runs\n"
    row = {
        "run_id": "r1",
        "conversation_id": "w/k0",
        "agent": None,
        "tool_results": 3,
        "owner": "host/1/ab",
        "heartbeat": 0.0,
        "orphaned": True,
    }
    out = io.StringIO()
    _show([row], out)
    header, line = out.getvalue().splitlines()
    assert header.split() == [
        "RUN",
        "CONVERSATION",
        "AGENT",
        "TOOL",
        "RESULTS",
        "OWNER",
        "LAST",
        "WRITE",
        "STATE",
    ]
    assert line.split()[:5] == ["r1", "w/k0", "-", "3", "host/1/ab"]
    assert line.endswith("orphaned") and header.index("STATE") == line.index("orphaned")
