"""Power-loss simulation: writers on a FUSE disk whose unsynced writes vanish on command.

Each cycle mounts ``tools/reliability/lossyfs.py`` over a backing directory,
runs a writer process on the mount (keyed two-message events, one ``ACK`` line
per acknowledged add), SIGKILLs the writer at a random moment, then SIGKILLs the
file system (the power loss: every write not fsynced is dropped), unmounts, and
audits the backing directory: offline check, then every acknowledged key must be
there once, whole, at its version. Negative controls that must report losses:
``--control nosync`` (the engine with durable=False) and ``--control eatmydata``
(the durable writer under Debian's eatmydata, which turns fsync into a no-op).

    python tools/powerloss.py [--cycles 20] [--control nosync|eatmydata] [--seed N]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


@dataclass
class Totals:
    """Figures of a run."""

    cycles: int = 0
    operations: int = 0
    acknowledged: int = 0
    lost: int = 0
    duplicated: int = 0
    torn: int = 0
    verifier_failures: int = 0


def preflight() -> str | None:
    """Why FUSE cannot be used here, or None when it can."""
    if not Path("/dev/fuse").exists():
        return "/dev/fuse does not exist (FUSE needs the fuse kernel module and the device)"
    if shutil.which("fusermount3") is None:
        return "fusermount3 is missing: apt-get install -y fuse3 libfuse3-dev"
    try:
        import mfusepy  # noqa: F401
    except (ImportError, OSError) as exc:
        return f"mfusepy cannot load libfuse: {exc} (pip install mfusepy; apt-get install fuse3)"
    return None


def writer(path: str, mode: str, first: int) -> None:
    """The writer process: append keyed events forever, one ACK line per add."""
    import memoryd
    from tools.reliability.writers import open_store

    store = open_store(path, name="pl", durable=mode == "durable")
    out = os.dup(1)
    os.dup2(2, 1)
    os.write(out, b"READY\n")
    for n in range(first, first + 10**7):
        key = f"k{n:08d}"
        batch = [memoryd.messages.user(key), memoryd.messages.assistant(key)]
        version = store.add("c", batch, idempotency_key=key)
        os.write(out, f"ACK {key} {version}\n".encode())


def _mount(backing: Path, mountpoint: Path, log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tools.reliability.lossyfs", str(backing), str(mountpoint)],
            cwd=ROOT,
            stdout=err,
            stderr=err,
        )
    deadline = time.monotonic() + 10
    while not os.path.ismount(mountpoint):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"FUSE mount failed; see {log}:\n{log.read_text()[-2000:]}")
        time.sleep(0.02)
    return proc


def _unmount(fs: subprocess.Popen[bytes], mountpoint: Path) -> None:
    fs.send_signal(signal.SIGKILL)  # the power loss: unsynced data dies with this process
    fs.wait(10)
    subprocess.run(["fusermount3", "-u", "-z", str(mountpoint)], check=False, capture_output=True)


def _audit(backing: Path, acked: dict[str, int], totals: Totals) -> int:
    import memoryd
    from tools.reliability.verify import verify

    problems = verify(backing)
    if problems:
        totals.verifier_failures += 1
        print("verifier:", problems[:3])
        return 0
    try:
        store = memoryd.LmdbStore.start(backing, name="pl-audit")
    except memoryd.MemorydError as exc:
        totals.verifier_failures += 1
        print("cannot reopen:", exc)
        return 0
    try:
        contents = [m["content"] for m in store.get("c")]
    finally:
        memoryd.shutdown()
    keys = contents[::2]
    totals.torn = sum(1 for a, b in zip(keys, contents[1::2], strict=False) if a != b)
    totals.torn += len(contents) % 2
    position = {k: i + 1 for i, k in enumerate(keys)}
    totals.duplicated = len(keys) - len(position)
    totals.lost = sum(1 for k, v in acked.items() if position.get(k) != v)
    return len(keys)


def run(cycles: int, control: str | None, seed: int, workdir: Path) -> Totals:
    """Run the cycles; returns the totals (lost > 0 expected only for a control)."""
    why = preflight()
    if why is not None:
        raise RuntimeError(f"the power-loss harness cannot run here: {why}")
    rng = random.Random(seed)
    backing, mountpoint, log = workdir / "disk", workdir / "mnt", workdir / "fs.log"
    backing.mkdir(parents=True, exist_ok=True)
    mountpoint.mkdir(exist_ok=True)
    totals = Totals()
    acked: dict[str, int] = {}
    stored = 0
    mode = "nosync" if control == "nosync" else "durable"
    prefix = ["eatmydata"] if control == "eatmydata" else []
    if prefix and shutil.which("eatmydata") is None:
        raise RuntimeError("eatmydata is missing: apt-get install -y eatmydata")
    for _ in range(cycles):
        fs = _mount(backing, mountpoint, log)
        try:
            cmd = [
                *prefix,
                sys.executable,
                str(Path(__file__)),
                "--write",
                str(mountpoint / "db"),
                mode,
                str(stored),
            ]
            proc = subprocess.Popen(
                cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
            )
            lines: list[str] = []
            reader = threading.Thread(target=lines.extend, args=(proc.stdout or [],), daemon=True)
            reader.start()
            time.sleep(rng.uniform(1.0, 2.0))  # the random moment of the power cut
            proc.kill()
            proc.wait(10)
            reader.join(10)
        finally:
            _unmount(fs, mountpoint)
        for line in lines:
            parts = line.split()
            if len(parts) == 3 and parts[0] == "ACK":
                acked[parts[1]] = int(parts[2])
                totals.operations += 1
        totals.cycles += 1
        stored = _audit(backing / "db", acked, totals)
        totals.acknowledged = len(acked)
        if control is None and (totals.lost or totals.duplicated or totals.torn):
            break
    return totals


def main() -> None:
    """Command line: run, print the table, exit 1 on a loss (or on a blind control)."""
    if len(sys.argv) > 1 and sys.argv[1] == "--write":
        writer(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=20)
    parser.add_argument("--control", choices=["nosync", "eatmydata"])
    parser.add_argument("--seed", type=int, default=int.from_bytes(os.urandom(4), "big"))
    args = parser.parse_args()
    print(f"power-loss seed {args.seed} control {args.control or 'none'}")
    with tempfile.TemporaryDirectory(prefix="memoryd-powerloss-") as tmp:
        totals = run(args.cycles, args.control, args.seed, Path(tmp))
    print(" | ".join(f"{k} {v}" for k, v in vars(totals).items()))
    if args.control:
        if totals.lost == 0:
            print("BLIND: the negative control lost nothing")
            sys.exit(1)
        print("negative control reported losses, as it must")
    elif totals.lost or totals.duplicated or totals.torn or totals.verifier_failures:
        sys.exit(1)


if __name__ == "__main__":
    main()
