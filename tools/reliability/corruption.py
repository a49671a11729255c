"""Corruption trials: bytes damaged in a real store's data file, every answer checked.

A store of many conversations is written once and its answers recorded. Each trial
copies it, damages the copy's ``data.mdb`` (one bit flipped at a random offset, a whole
page zeroed, or one bit flipped in a meta page's record), and has a reader process open
it and read everything: each conversation's history and event log, the listing, and
the change feed. An answer is right, or an error (the store refused to open, or a read
raised); a wrong answer, a store that opened empty, or a reader that died (an abort in
liblmdb) is a failure. The reader is one long-lived process fed trial after trial, and
started again when it dies.

    python -m tools.reliability.corruption [--flips 80 --zeros 20 --metas 20 --seed N]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import memoryd
from memoryd import messages
from memoryd.errors import MemorydError
from memoryd.protocol import event_to_wire

PAGE = 4096
_META_RECORD = (16, 16 + 136)  # where a meta page's MDB_meta record lies in its page


@dataclass
class Tally:
    """What the trials found."""

    trials: int = 0
    reads: int = 0
    right: int = 0
    detected: int = 0
    wrong: int = 0
    refused: int = 0
    opened_empty: int = 0
    aborts: int = 0
    failures: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No wrong answer, no store opened empty, no abort."""
        return self.wrong == 0 and self.opened_empty == 0 and self.aborts == 0


def build(directory: Path, *, conversations: int = 100, seed: int = 0) -> Path:
    """Write a store of ``conversations`` conversations; record its answers beside it.

    Returns:
        The file of expected answers (JSON).
    """

    rng = random.Random(seed)
    store = memoryd.LmdbStore.start(directory, name=f"corruption-build-{os.getpid()}")
    try:
        for n in range(conversations):
            cid = f"conversation-{n:03d}"
            for turn in range(rng.randint(2, 6)):
                text = f"{cid} turn {turn} " + "".join(rng.choices("abcdefgh ", k=60))
                store.add(cid, [messages.user(text), messages.assistant(f"reply {turn}")])
            if n % 10 == 3:
                store.pop(cid)
            if n % 17 == 5:
                store.clear(cid)
                store.add(cid, [messages.user(f"{cid} after the clear")])
        expected = _answers(store, [f"conversation-{n:03d}" for n in range(conversations)])
    finally:
        store.stop()
        memoryd.shutdown()
    path = directory.parent / (directory.name + ".expected.json")
    path.write_text(json.dumps(expected))
    return path


def _answers(store: Any, cids: list[str]) -> dict[str, Any]:

    return {
        "cids": cids,
        "history": {cid: store.get(cid) for cid in cids},
        "events": {cid: [event_to_wire(e) for e in store.events(cid)] for cid in cids},
        "conversations": store.conversations(),
        "tail": [[c.position, c.conversation_id, c.version] for c in store.tail(limit=100000)],
    }


def damage(data: Path, kind: str, rng: random.Random) -> str:
    """Damage ``data`` (a data.mdb) in place; returns what was done."""
    size = data.stat().st_size
    with open(data, "r+b") as file:
        if kind == "zero":
            page = rng.randrange(size // PAGE)
            file.seek(page * PAGE)
            file.write(bytes(PAGE))
            return f"page {page} zeroed"
        if kind == "meta":
            offset = rng.randrange(2) * PAGE + rng.randrange(*_META_RECORD)
        else:
            offset = rng.randrange(size)
        bit = rng.randrange(8)
        file.seek(offset)
        byte = file.read(1)[0]
        file.seek(offset)
        file.write(bytes([byte ^ (1 << bit)]))
        return f"bit {bit} of byte {offset} flipped"


def read_one(directory: Path, expected: dict[str, Any], name: str) -> dict[str, Any]:
    """Open the store in ``directory`` and compare every answer with ``expected``."""

    out: dict[str, Any] = {"refused": None, "right": 0, "detected": 0, "wrong": [], "reads": 0}
    try:
        store = memoryd.LmdbStore.start(directory, name=name)
    except MemorydError as exc:
        out["refused"] = f"{type(exc).__name__}: {exc}"
        return out
    try:
        actual = {}
        for what, read in _reads(store, expected):
            out["reads"] += 1
            try:
                actual[what] = read()
            except MemorydError:
                out["detected"] += 1
                continue
            except Exception as exc:  # any other error breaks the promise too
                out["wrong"].append(f"{what} raised {type(exc).__name__}: {exc}")
                continue
            if actual[what] == _want(expected, what):
                out["right"] += 1
            else:
                out["wrong"].append(what)
        nonempty = [cid for cid in expected["cids"] if expected["history"][cid]]
        out["empty"] = bool(nonempty) and all(
            actual.get(f"history {cid}") == [] for cid in nonempty
        )
    finally:
        store.stop()
        memoryd.shutdown()
    return out


def _reads(store: Any, expected: dict[str, Any]) -> list[tuple[str, Any]]:

    reads: list[tuple[str, Any]] = []
    for cid in expected["cids"]:
        reads.append((f"history {cid}", lambda cid=cid: store.get(cid)))
        reads.append(
            (f"events {cid}", lambda cid=cid: [event_to_wire(e) for e in store.events(cid)])
        )
    reads.append(("conversations", store.conversations))
    reads.append(
        (
            "tail",
            lambda: [[c.position, c.conversation_id, c.version] for c in store.tail(limit=100000)],
        )
    )
    return reads


def _want(expected: dict[str, Any], what: str) -> Any:
    kind, _, cid = what.partition(" ")
    if not cid:
        return json.loads(json.dumps(expected[kind]))
    return expected[kind][cid]


class Reader:
    """A reader process fed one trial directory per line; restarted when it dies."""

    def __init__(self, expected: Path) -> None:
        self.expected = expected
        self.proc: subprocess.Popen[str] | None = None

    def _start(self) -> subprocess.Popen[str]:
        root = Path(__file__).resolve().parents[2]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
        return subprocess.Popen(
            [sys.executable, "-m", "tools.reliability.corruption", "--serve", str(self.expected)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
        )

    def read(self, directory: Path) -> dict[str, Any] | None:
        """The reader's findings, or None when it died (an abort)."""
        if self.proc is None or self.proc.poll() is not None:
            self.proc = self._start()
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{directory}\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait()
            self.proc = None
            return None
        result: dict[str, Any] = json.loads(line)
        return result

    def close(self) -> None:
        """Stop the reader process."""
        if self.proc is not None and self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            self.proc.wait(timeout=60)


def _serve(expected_path: Path) -> None:

    logging.disable(logging.CRITICAL)
    expected = json.loads(expected_path.read_text())
    for n, line in enumerate(sys.stdin):
        result = read_one(Path(line.strip()), expected, name=f"corruption-trial-{n}")
        print(json.dumps(result), flush=True)


def run_trials(
    work: Path, *, flips: int, zeros: int, metas: int, seed: int, conversations: int = 100
) -> Tally:
    """Build a store in ``work`` and run every trial on a damaged copy of it."""
    pristine = work / "pristine"
    expected = build(pristine, conversations=conversations, seed=seed)
    rng = random.Random(seed)
    kinds = ["flip"] * flips + ["zero"] * zeros + ["meta"] * metas
    tally = Tally()
    reader = Reader(expected)
    try:
        for n, kind in enumerate(kinds):
            trial = work / f"trial-{n}"
            shutil.copytree(pristine, trial)
            (trial / "memoryd.lock").unlink(missing_ok=True)
            what = damage(trial / "data.mdb", kind, rng)
            result = reader.read(trial)
            tally.trials += 1
            if result is None:
                tally.aborts += 1
                tally.failures.append(f"{kind}: {what}: the reader aborted")
            elif result["refused"] is not None:
                tally.refused += 1
            else:
                tally.reads += result["reads"]
                tally.right += result["right"]
                tally.detected += result["detected"]
                tally.wrong += len(result["wrong"])
                if result["wrong"]:
                    tally.failures.append(f"{kind}: {what}: wrong {result['wrong'][:3]}")
                if result["empty"]:
                    tally.opened_empty += 1
                    tally.failures.append(f"{kind}: {what}: the store opened empty")
            shutil.rmtree(trial, ignore_errors=True)
    finally:
        reader.close()
    return tally


def main() -> None:
    """Run the trials and print the tally."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serve", metavar="EXPECTED", help=argparse.SUPPRESS)
    parser.add_argument("--flips", type=int, default=80)
    parser.add_argument("--zeros", type=int, default=20)
    parser.add_argument("--metas", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.serve:
        _serve(Path(args.serve))
        return

    with tempfile.TemporaryDirectory(prefix="memoryd-corruption-") as tmp:
        tally = run_trials(
            Path(tmp), flips=args.flips, zeros=args.zeros, metas=args.metas, seed=args.seed
        )
    print(json.dumps(tally.__dict__ | {"ok": tally.ok}, indent=1))
    sys.exit(0 if tally.ok else 1)


if __name__ == "__main__":
    main()
