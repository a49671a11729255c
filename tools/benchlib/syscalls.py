"""Count the disk waits behind one durable append of each peer, with strace.

A peer's appends/s with one writer is bound by how many times each commit waits for the
disk. memoryd's store counts its own commits (``stats()``), but a commit of LMDB waits
twice: an ``fdatasync`` of the data pages, then a write of the meta page through a
descriptor opened ``O_DSYNC`` (``sync`` and ``metasync``), where SQLite's WAL commit is
one ``fdatasync``; only the system calls show it for every peer alike. Each peer is run
in a child process under ``strace -f`` twice, with a short and a longer series of
appends from one thread; the difference of the two counts, over the difference of the
appends, is what one append costs, with the setup, warm-up and shutdown of the store
(which sync too) cancelled out.

    python -m benchlib.syscalls PEER DIRECTORY APPENDS     # the child: appends, then exits
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from reliability.syscalls import parse

#: The system calls that wait for the disk by themselves.
SYNC_CALLS = ("fsync", "fdatasync", "sync_file_range", "msync")
#: Writes, which wait for the disk when their descriptor was opened O_DSYNC or O_SYNC.
WRITE_CALLS = ("write", "pwrite64", "writev", "pwritev", "pwritev2")
_TRACED = (*SYNC_CALLS, *WRITE_CALLS, "open", "openat", "close")
#: The column of synchronous writes.
SYNC_WRITES = "O_DSYNC writes"
#: Appends of the short and the long run; their difference is what is divided.
SHORT, LONG = 20, 120
_TOOLS = Path(__file__).resolve().parent.parent
_REPO = _TOOLS.parent


@dataclass(frozen=True, kw_only=True, slots=True)
class SyncCount:
    """Disk waits per append, by kind (only those seen), and their total."""

    per_kind: dict[str, float]
    total: float


def strace() -> str | None:
    """The strace executable, or None where it is not installed."""
    return shutil.which("strace")


def count_waits(text: str) -> dict[str, int]:
    """Disk waits in ``strace -f -ttt`` output: each sync call by name, and writes to a
    descriptor opened O_DSYNC or O_SYNC (the one process's descriptors, as they are
    opened and closed) as `SYNC_WRITES`.

    >>> count_waits('1 1.0 openat(AT_FDCWD, "d", O_WRONLY|O_DSYNC) = 5\\n'
    ...             '1 1.1 pwrite64(5, "x", 1, 0) = 1\\n1 1.2 fdatasync(4) = 0\\n'
    ...             '1 1.3 pwrite64(4, "x", 1, 0) = 1')
    {'O_DSYNC writes': 1, 'fdatasync': 1}
    """
    synced: set[int] = set()
    counts: dict[str, int] = {}
    for call in parse(text):
        name, args, ret = call.name, call.args, call.ret
        if name in ("open", "openat"):
            if ret >= 0 and ("O_DSYNC" in args or "O_SYNC" in args):
                synced.add(ret)
        elif name == "close":
            synced.discard(int(args.split(",")[0]))
        elif name in WRITE_CALLS:
            if ret >= 0 and int(args.split(",")[0]) in synced:
                counts[SYNC_WRITES] = counts.get(SYNC_WRITES, 0) + 1
        elif name in SYNC_CALLS:
            counts[name] = counts.get(name, 0) + 1
    return counts


def _traced_run(name: str, appends: int, base: Path, timeout_s: float) -> dict[str, int]:
    """Run ``appends`` appends of peer ``name`` in a traced child; return its disk waits."""
    tracer = strace()
    assert tracer is not None
    with tempfile.TemporaryDirectory(prefix=f"syscalls-{name}-", dir=base) as scratch:
        out = Path(scratch) / "strace.txt"
        data = Path(scratch) / "data"
        data.mkdir(mode=0o700)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(_TOOLS), str(_REPO), *filter(None, [env.get("PYTHONPATH")])]
        )
        command = [
            tracer,
            "-f",
            "-ttt",
            "-s",
            "0",
            "-e",
            "trace=" + ",".join(_TRACED),
            "-o",
            str(out),
            sys.executable,
            "-m",
            "benchlib.syscalls",
            name,
            str(data),
            str(appends),
        ]
        result = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout_s, env=env, check=False
        )
        if result.returncode != 0:
            raise RuntimeError(
                f"{name}: traced run exited {result.returncode}: {result.stderr[-500:]}"
            )
        return count_waits(out.read_text())


def waits_per_append(name: str, base: Path, timeout_s: float = 120.0) -> SyncCount:
    """Disk waits per append of peer ``name`` (one writer), from two traced runs.

    Raises:
        RuntimeError: strace is missing, or a traced run failed.
    """
    if strace() is None:
        raise RuntimeError("strace is not installed")
    short = _traced_run(name, SHORT, base, timeout_s)
    long = _traced_run(name, LONG, base, timeout_s)
    per_kind = {
        kind: (long.get(kind, 0) - short.get(kind, 0)) / (LONG - SHORT)
        for kind in sorted(set(short) | set(long))
    }
    return SyncCount(per_kind=per_kind, total=sum(per_kind.values()))


def _child(argv: Sequence[str]) -> int:
    """Set peer ``argv[0]`` up in ``argv[1]``, make ``argv[2]`` appends, close it."""
    from benchlib.peers import PEERS
    from benchlib.workload import make_texts

    name, directory, appends = argv[0], Path(argv[1]), int(argv[2])
    peer = PEERS[name]()
    peer.setup(directory)
    texts = make_texts(64, 200)
    try:
        for index in range(appends):
            text = texts[index % len(texts)]
            peer.append(0, f"syscalls-{index % 4}", {"role": "user", "content": text})
    finally:
        peer.end_thread(0)
        peer.close()
    return 0


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1:]))
