"""Power loss, by syscall trace: nothing is acknowledged before it is on stable storage.

kill -9 leaves the page cache intact, so it cannot prove fsync. These tests run an
append in a child under strace and check, from the trace, that every write to the
data file (LMDB's data pages and its meta page) was fdatasync'ed (or written through
an O_DSYNC descriptor) BEFORE the child wrote its ``ACK`` to fd 1, and that a new data
directory and its parents were fsynced before the first ACK. The negative control runs
the same child on the same engine with ``durable=False``; the checker must flag it,
or it is blind.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tools.reliability import syscalls

ROOT = Path(__file__).resolve().parents[2]


def _trace_append(tmp_path: Path, mode: str) -> tuple[syscalls.TraceReport, Path]:
    data = tmp_path / "fresh" / "nested" / "data"
    trace = tmp_path / f"{mode}.trace"
    cmd = [
        *syscalls.strace_command(trace),
        sys.executable,
        "-m",
        "tools.reliability.append_child",
        str(data),
        mode,
        "3",
    ]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return syscalls.check_trace(trace.read_text(), data), data


def test_every_acknowledgement_follows_fdatasync_of_data_and_meta(tmp_path: Path) -> None:
    """Durable store: data pages and the meta page are synced before each ACK is written."""
    report, _ = _trace_append(tmp_path, "durable")
    assert report.acks == 3
    assert report.data_syncs >= 3
    assert report.meta_writes >= 3
    assert report.problems == []


def test_a_new_data_directory_and_its_parents_are_fsynced_before_the_first_ack(
    tmp_path: Path,
) -> None:
    """The trace shows fsync of every created directory and parent before ACK 1."""
    report, data = _trace_append(tmp_path, "durable")
    assert not [p for p in report.problems if "first ACK" in p]
    trace = (tmp_path / "durable.trace").read_text()
    for directory in (data, data.parent, data.parent.parent, tmp_path):
        assert f'"{directory}", O_RDONLY' in trace, f"{directory} never opened for fsync"


def test_negative_control_a_store_without_fsync_is_reported(tmp_path: Path) -> None:
    """durable=False: the same checker reports unsynced writes before the ACKs."""
    report, data = _trace_append(tmp_path, "nosync")
    assert report.acks == 3
    assert not report.ok
    assert any("not fsynced before it" in p for p in report.problems), report.problems
    assert any("meta page" in p for p in report.problems), report.problems
    assert any(f"new directory {data} not fsynced" in p for p in report.problems)


def test_checker_parses_unfinished_and_resumed_calls() -> None:
    """A sync split across threads still counts once it completes, and only then."""
    text = "\n".join(
        [
            '10 1.0 openat(AT_FDCWD, "/d/data.mdb", O_RDWR|O_CREAT, 0600) = 5',
            '10 1.1 pwrite64(5, "x", 4096, 8192) = 4096',
            "11 1.2 fdatasync(5 <unfinished ...>",
            '10 1.3 pwrite64(5, "m", 120, 32) = 120',
            '12 1.4 write(1, "ACK 1\\n", 6) = 6',
            "11 1.5 <... fdatasync resumed>) = 0",
        ]
    )
    report = syscalls.check_trace(text, Path("/d"))
    assert report.acks == 1
    assert any("not fsynced before it" in p for p in report.problems)
