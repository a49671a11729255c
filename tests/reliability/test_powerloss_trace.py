"""Power loss, by syscall trace: nothing is acknowledged before it is on stable storage.

kill -9 leaves the page cache intact, so it cannot prove fsync. These tests run an
append in a child under strace and check, from the trace, that every write to the
data file (LMDB's data pages and its meta page) was fdatasync'ed (or written through
an O_DSYNC descriptor) BEFORE the child wrote its ``ACK`` to fd 1, and that a new data
directory and its parents were fsynced before the first ACK. The negative control runs
the same child on the same engine with ``durable=False``; the checker must flag it,
or it is blind. The daemon's own directories (the data directory it creates, and
``data/stores``) are checked in a traced ``memoryd serve``, against an eatmydata
control.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import memoryd
from memoryd import messages
from tests.server.daemon import Daemon
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


def _daemon_dirs_report(tmp_path: Path, prefix: tuple[str, ...]) -> list[str]:
    """Run ``memoryd serve`` under strace on a new nested data directory, write to the
    default store and to a new named store through the client, and report every
    directory created on the way that was not fsynced, with its parent, before the
    write that needed it was acknowledged."""
    root = Path(tempfile.mkdtemp(prefix="md-", dir="/tmp"))
    data = root / "fresh" / "nested" / "data"
    trace = tmp_path / "daemon.trace"

    class Traced(Daemon):
        def command(self) -> list[str]:
            return [*prefix, *syscalls.strace_command(trace), *super().command()]

    daemon = Traced(data, extra=())
    acks: dict[str, float] = {}
    try:
        daemon.start()
        daemon.connect().add("c", [messages.user("first")])
        acks[str(data)] = time.time()
        named = memoryd.connect(daemon.address, store="named")
        named.add("c", [messages.user("named")])
        acks[str(data / "stores")] = acks[str(data / "stores" / "named")] = time.time()
        assert daemon.proc is not None
        tracer = daemon.proc.pid  # strace: SIGTERM goes to the daemon it runs
        (served,) = Path(f"/proc/{tracer}/task/{tracer}/children").read_text().split()
        os.kill(int(served), signal.SIGTERM)
        assert daemon.proc.wait(60) == 0
    finally:
        daemon.kill()
        shutil.rmtree(root, ignore_errors=True)
    return _unsynced_dirs(syscalls.parse(trace.read_text()), acks)


def _unsynced_dirs(calls: list[syscalls.Call], acks: dict[str, float]) -> list[str]:
    fds: dict[int, str] = {}
    synced: dict[str, list[float]] = {}
    created: dict[str, float] = {}
    for call in calls:
        path = call.args.split('"')[1] if '"' in call.args else ""
        if call.name == "mkdir" and call.ret == 0 and path in acks:
            created[path] = call.time
        elif call.name == "openat" and call.ret >= 0:
            fds[call.ret] = path
        elif call.name == "fsync" and call.ret == 0:
            name = fds.get(int(call.args.split(",")[0].split("<")[0]), "")
            synced.setdefault(name, []).append(call.time)
    problems = [f"{path} was never created" for path in acks if path not in created]
    for path, made in created.items():
        for directory in (path, str(Path(path).parent)):
            if not any(made < t < acks[path] for t in synced.get(directory, [])):
                problems.append(f"{directory} not fsynced after {path} was created")
    return problems


def test_the_daemon_fsyncs_every_directory_it_creates_and_its_parent(tmp_path: Path) -> None:
    """memoryd serve: the data directory (and the parents it created), ``data/stores``
    and ``data/stores/<name>`` are each fsynced, with the directory they were created
    in, before the first write that needed them is acknowledged."""
    assert _daemon_dirs_report(tmp_path, ()) == []


def test_negative_control_a_daemon_without_fsync_is_reported(tmp_path: Path) -> None:
    """The same daemon under eatmydata (fsync made a no-op): every directory reported."""
    exe = shutil.which("eatmydata")
    assert exe is not None, "install the Debian package 'eatmydata'"
    problems = _daemon_dirs_report(tmp_path, (exe,))
    assert any("/stores not fsynced after" in p for p in problems), problems
    assert any("nested not fsynced after" in p for p in problems), problems
    assert len(problems) >= 6, problems
