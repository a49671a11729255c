"""A small consistency checker for append/read histories (pure Python, no memoryd import).

Every client operation is recorded with its start and end time (one monotonic
clock). Appends carry a unique key; reads return the list of keys they saw.
Given the final log of every conversation, ``check`` verifies:

* **exactly once**: every acknowledged append is in the final log once; no key
  is there twice; nothing is there that no client tried to append;
* **prefix reads**: every read returned a prefix of the final log;
* **read-your-writes / real time**: a read that started after an append was
  acknowledged (by any client) contains it;
* **monotonic reads**: a read that started after another read ended (same client
  or not) saw at least as much;
* **real-time order**: an append acknowledged before another started precedes it.

    python tools/history_check.py HISTORY.json   # {"ops": [...], "final": {cid: [keys]}}
"""

from __future__ import annotations

import bisect
import json
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["Op", "Report", "check"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Op:
    """One client operation.

    Attributes:
        kind: ``"append"`` or ``"read"``.
        client: who issued it.
        cid: the conversation.
        start: when the call began.
        end: when it returned (acknowledged or failed).
        ok: True if acknowledged (append) or answered (read).
        key: the appended key (appends).
        seen: the keys a read returned, in order (reads).
    """

    kind: str
    client: str
    cid: str
    start: float
    end: float
    ok: bool
    key: str = ""
    seen: tuple[str, ...] = ()


@dataclass(slots=True)
class Report:
    """What ``check`` found; ``ok`` when every list of problems is empty."""

    operations: int = 0
    acknowledged: int = 0
    reads: int = 0
    lost: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    phantom: list[str] = field(default_factory=list)
    not_prefix: list[str] = field(default_factory=list)
    stale_reads: list[str] = field(default_factory=list)
    non_monotonic: list[str] = field(default_factory=list)
    out_of_order: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when no property was violated."""
        return not self.problems()

    def problems(self) -> list[str]:
        """Every violation, one line each (at most 5 shown per property)."""
        out = []
        for name in (
            "lost",
            "duplicated",
            "phantom",
            "not_prefix",
            "stale_reads",
            "non_monotonic",
            "out_of_order",
        ):
            found: list[str] = getattr(self, name)
            if found:
                more = f" (+{len(found) - 5} more)" if len(found) > 5 else ""
                out.append(f"{name}: {len(found)}: {'; '.join(found[:5])}{more}")
        return out


def check(ops: Iterable[Op], final: Mapping[str, Sequence[str]]) -> Report:
    """Check a history against the final logs.

    Args:
        ops: every recorded operation, in any order.
        final: conversation id -> the keys of its final log, in order.

    Returns:
        A report; ``report.ok`` is True when all properties hold.
    """
    report = Report()
    by_cid: dict[str, list[Op]] = defaultdict(list)
    for op in ops:
        by_cid[op.cid].append(op)
        report.operations += 1
        if op.kind == "append" and op.ok:
            report.acknowledged += 1
        elif op.kind == "read" and op.ok:
            report.reads += 1
    for cid in sorted(set(by_cid) | set(final)):
        _check_one(cid, by_cid.get(cid, []), list(final.get(cid, ())), report)
    return report


def _check_one(cid: str, ops: list[Op], log: list[str], report: Report) -> None:
    counts = Counter(log)
    index = {key: i for i, key in enumerate(log)}
    tried = {op.key for op in ops if op.kind == "append"}
    report.duplicated += [f"{cid}/{k} x{n}" for k, n in counts.items() if n > 1]
    report.phantom += [f"{cid}/{k}" for k in counts if k not in tried]
    acked = [op for op in ops if op.kind == "append" and op.ok]
    report.lost += [f"{cid}/{op.key}" for op in acked if op.key not in index]
    reads = [op for op in ops if op.kind == "read" and op.ok]
    for op in reads:
        if list(op.seen) != log[: len(op.seen)]:
            report.not_prefix.append(f"{cid}: {op.client} read {len(op.seen)} keys at {op.start}")

    # appends acknowledged before time t: the highest final index among them
    done = sorted((op.end, index.get(op.key, -1)) for op in acked)
    ends = [end for end, _ in done]
    highest: list[int] = []
    for _, i in done:
        highest.append(max(i, highest[-1] if highest else -1))

    def acked_before(t: float) -> int:
        n = bisect.bisect_left(ends, t)
        return highest[n - 1] if n else -1

    for op in acked:
        i = index.get(op.key)
        if i is not None and acked_before(op.start) > i:
            report.out_of_order.append(f"{cid}/{op.key} precedes a write acknowledged before it")
    for op in reads:
        if acked_before(op.start) >= len(op.seen):
            report.stale_reads.append(
                f"{cid}: {op.client} read {len(op.seen)} keys after write "
                f"#{acked_before(op.start) + 1} was acknowledged"
            )
    finished = sorted((op.end, len(op.seen)) for op in reads)
    read_ends = [end for end, _ in finished]
    longest: list[int] = []
    for _, n in finished:
        longest.append(max(n, longest[-1] if longest else 0))
    for op in reads:
        k = bisect.bisect_left(read_ends, op.start)
        if k and longest[k - 1] > len(op.seen):
            report.non_monotonic.append(
                f"{cid}: {op.client} read {len(op.seen)} keys after a read of {longest[k - 1]}"
            )


def main(argv: list[str]) -> int:
    """Check a history file; exit 1 if any property is violated."""
    with open(argv[1], encoding="utf-8") as f:
        data = json.load(f)
    ops = [Op(**{**raw, "seen": tuple(raw.get("seen", ()))}) for raw in data["ops"]]
    report = check(ops, data["final"])
    print(f"operations {report.operations} acknowledged {report.acknowledged} reads {report.reads}")
    for line in report.problems():
        print(line)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
