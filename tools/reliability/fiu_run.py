"""Run ``fiu_writer`` under ``fiu-run -x`` and check the outcome against the reopened store."""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import memoryd
from tools.reliability.verify import verify

ROOT = Path(__file__).resolve().parents[2]


def fiu_run() -> str:
    """Path of fiu-run; fails clearly when libfiu's tools are missing."""
    exe = shutil.which("fiu-run")
    if exe is None or not Path("/usr/lib/fiu/fiu_posix_preload.so").exists():
        raise RuntimeError(
            "fiu-run is not installed: install the Debian packages 'fiu-utils' and "
            "'libfiu-dev' (apt-get install -y fiu-utils libfiu-dev)"
        )
    return exe


@dataclass
class FaultRun:
    """What one faulted writer did and what the reopened store holds."""

    faults: list[tuple[str, str]] = field(default_factory=list)
    acked: dict[str, int] = field(default_factory=dict)
    errors: list[tuple[str, str]] = field(default_factory=list)
    read_errors: list[tuple[str, str]] = field(default_factory=list)
    """(key, error type) of each read, made right after a failed add of key, that raised."""
    problems: list[str] = field(default_factory=list)
    stored: int = 0
    torn: int = 0


def run(
    path: Path, points: str, mode: str, value: float, err: int, count: int, seed: int = 0
) -> FaultRun:
    """Run one faulted writer on ``path``, then audit: offline verify and reopen the store."""
    cmd = [
        fiu_run(),
        "-x",
        "-f",
        "",
        sys.executable,
        "-m",
        "tools.reliability.fiu_writer",
        str(path),
        points,
        mode,
        str(value),
        str(err),
        str(count),
        str(seed),
    ]
    proc = subprocess.run(
        cmd,
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    out = FaultRun()
    lines = proc.stdout.splitlines()
    if proc.returncode != 0 or "READY" not in lines:
        out.problems.append(f"writer failed ({proc.returncode}): {proc.stderr[-2000:]}")
        return out
    first_outcome: dict[str, str] = {}
    faulted: set[str] = set()
    for line in lines:
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "FAULT" and len(parts) == 3:
            out.faults.append((parts[1], parts[2]))
            faulted.add(parts[2])
        elif parts[0] == "ACK":
            out.acked[parts[1]] = int(parts[2])
            first_outcome.setdefault(parts[1], "ACK")
        elif parts[0] == "ERR":
            out.errors.append((parts[1], parts[2]))
            first_outcome.setdefault(parts[1], "ERR")
        elif parts[0] == "READERR":
            out.read_errors.append((parts[1], parts[2]))
    for key in faulted:
        if first_outcome.get(key) == "ACK" and key not in {k for k, _ in out.errors}:
            out.problems.append(f"{key}: a call failed during its commit, yet it was acknowledged")
    out.problems += verify(path)
    store = memoryd.LmdbStore.start(path, name="fiu-audit")
    try:
        contents = [m["content"] for m in store.get("c")]
    finally:
        store.stop()
    keys = contents[::2]
    out.torn = sum(1 for a, b in zip(contents[::2], contents[1::2], strict=False) if a != b)
    out.torn += len(contents) % 2
    if out.torn:
        out.problems.append(f"{out.torn} torn event(s): a message of an event is missing")
    out.stored = len(keys)
    if len(keys) != len(set(keys)):
        out.problems.append("a key is stored twice")
    position = {key: i + 1 for i, key in enumerate(keys)}
    for key, version in out.acked.items():
        if key not in position:
            out.problems.append(f"acknowledged {key} lost")
        elif position[key] != version:
            out.problems.append(f"{key} acknowledged at {version}, stored at {position[key]}")
    return out
