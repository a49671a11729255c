"""Check from an ``strace -f -ttt`` trace that acknowledgements follow durability.

The traced child writes ``ACK ...`` to fd 1 after each acknowledged append.
``check_trace`` replays the trace in time order and reports, for every ACK:

* a write to the data file that was not made durable before the ACK (no
  ``fdatasync``/``fsync`` of the file after it, and not written through an
  ``O_DSYNC``/``O_SYNC`` descriptor);
* no LMDB meta-page write (offset below two pages) since the previous ACK, or one
  not durable before the ACK;
* before the first ACK: a directory created by the child (``mkdir``) that was not
  fsynced after it got its last entry, or whose parent was not fsynced after the
  ``mkdir``; the data directory not fsynced after its data file was created.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

STRACE_CALLS = "fdatasync,fsync,msync,pwrite64,pwritev,write,writev,openat,mkdir"
META_LIMIT = 2 * 65536  # meta pages are pages 0 and 1; a page is at most 64 KiB

_LINE = re.compile(r"^(\d+)\s+(\d+\.\d+)\s+(.*)$")
_CALL = re.compile(r"^(\w+)\((.*)\)\s+=\s+(-?\d+|\?)")
_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')
_RESUMED = re.compile(r"^<\.\.\. (\w+) resumed>(.*)$")


def strace_command(trace: Path) -> list[str]:
    """The strace prefix for a traced child; fails clearly when strace is missing."""
    exe = shutil.which("strace")
    if exe is None:
        raise RuntimeError(
            "strace is not installed: install the Debian package 'strace' "
            "(apt-get install -y strace); the power-loss trace check needs it"
        )
    return [exe, "-f", "-ttt", "-qq", "-s", "4096", "-e", f"trace={STRACE_CALLS}", "-o", str(trace)]


@dataclass(frozen=True, slots=True)
class Call:
    """One completed system call."""

    pid: int
    time: float
    name: str
    args: str
    ret: int


@dataclass
class TraceReport:
    """The check's findings; ``ok`` when there are none."""

    acks: int = 0
    data_syncs: int = 0
    meta_writes: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when every acknowledgement followed durability."""
        return self.acks > 0 and not self.problems


def parse(text: str) -> list[Call]:
    """Completed calls of a ``strace -f -ttt`` trace, joining unfinished/resumed pairs."""
    calls: list[Call] = []
    pending: dict[tuple[int, str], tuple[float, str]] = {}
    for line in text.splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        pid, stamp, rest = int(m[1]), float(m[2]), m[3]
        if rest.endswith("<unfinished ...>"):
            name = rest.split("(", 1)[0]
            pending[(pid, name)] = (stamp, rest[: -len("<unfinished ...>")].rstrip())
            continue
        r = _RESUMED.match(rest)
        if r:
            began = pending.pop((pid, r[1]), None)
            if began is None:
                continue
            rest = began[1] + r[2]
        c = _CALL.match(rest)
        if c is None:
            continue
        ret = int(c[3]) if c[3] != "?" else -1
        calls.append(Call(pid, stamp, c[1], c[2], ret))
    calls.sort(key=lambda call: call.time)
    return calls


def _path_arg(args: str) -> str:
    m = _QUOTED.search(args)
    return m[1] if m else ""


def check_trace(text: str, data_dir: Path) -> TraceReport:
    """Check a trace of a child that appended to a store in ``data_dir``."""
    report = TraceReport()
    data_file = str(data_dir / "data.mdb")
    fds: dict[tuple[int, int], tuple[str, bool]] = {}  # (pid-group, fd) -> (path, dsync)
    unsynced: list[str] = []  # data writes not yet durable
    meta_since_ack = False
    meta_pending = False  # a meta write not yet durable
    created: dict[str, float] = {}  # directory -> mkdir time
    last_entry: dict[str, float] = {}  # directory -> when an entry was last created in it
    dir_synced: dict[str, float] = {}
    calls = parse(text)
    for call in calls:
        if call.name == "mkdir" and call.ret == 0:
            path = _path_arg(call.args)
            if not (data_file.startswith(path + "/") or path == str(data_dir)):
                continue  # not on the way to the data directory (e.g. __pycache__)
            created[path] = call.time
            last_entry[str(Path(path).parent)] = call.time
        elif call.name == "openat" and call.ret >= 0:
            path = _path_arg(call.args)
            dsync = "O_DSYNC" in call.args or "O_SYNC" in call.args
            fds[(0, call.ret)] = (path, dsync)
            if "O_CREAT" in call.args and path == data_file:
                last_entry[str(data_dir)] = call.time
        elif call.name in ("fsync", "fdatasync") and call.ret == 0:
            path, _ = fds.get((0, int(call.args.split(",")[0])), ("", False))
            if path == data_file:
                report.data_syncs += 1
                unsynced.clear()
                meta_pending = False
            elif path:
                dir_synced[path] = call.time
        elif call.name in ("pwrite64", "pwritev", "writev", "write") and call.ret >= 0:
            fd = int(call.args.split(",")[0])
            if call.name == "write" and fd == 1 and '"ACK' in call.args:
                report.acks += 1
                _check_ack(report, unsynced, meta_since_ack, meta_pending, call)
                if report.acks == 1:
                    _check_dirs(report, created, last_entry, dir_synced)
                meta_since_ack = False
                continue
            path, dsync = fds.get((0, fd), ("", False))
            if path != data_file:
                continue
            offset = int(call.args.rsplit(",", 1)[1]) if call.name == "pwrite64" else None
            is_meta = offset is not None and offset < META_LIMIT and call.ret <= 4096
            if is_meta:
                report.meta_writes += 1
                meta_since_ack = True
                meta_pending = not dsync
            if not dsync:
                unsynced.append(f"{call.name}@{offset}")
    if report.acks == 0:
        report.problems.append("no ACK was written: the child never acknowledged an append")
    return report


def _check_ack(
    report: TraceReport, unsynced: list[str], meta: bool, meta_pending: bool, call: Call
) -> None:
    n = report.acks
    if unsynced:
        report.problems.append(
            f"ACK {n}: {len(unsynced)} write(s) to the data file not fsynced before it "
            f"({', '.join(unsynced[:3])})"
        )
    if not meta:
        report.problems.append(f"ACK {n}: no meta page was written since the previous ACK")
    elif meta_pending:
        report.problems.append(f"ACK {n}: the meta page written for it was not synced")


def _check_dirs(
    report: TraceReport,
    created: dict[str, float],
    last_entry: dict[str, float],
    synced: dict[str, float],
) -> None:
    for directory, when in sorted(last_entry.items()):
        if synced.get(directory, 0.0) < when:
            what = "new directory" if directory in created else "directory"
            report.problems.append(
                f"first ACK: {what} {directory} not fsynced after an entry was created in it"
            )
