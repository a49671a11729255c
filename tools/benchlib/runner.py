"""Drive one peer through one phase: timed appends, or populate-then-timed-reads."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from benchlib.peers import Peer
from benchlib.workload import (
    Message,
    Settings,
    conversation_messages,
    percentile,
    read_conversation_id,
    writer_conversations,
)


class BenchError(RuntimeError):
    """A peer misbehaved (wrong data returned, a writer thread failed)."""


def log(text: str) -> None:
    """Write one progress line to stderr."""
    print(f"[bench] {text}", file=sys.stderr, flush=True)


class Progress:
    """A progress callback that logs at most every ``every_s`` seconds, and at the end.

    Args:
        label: what is being counted.
        total: the count at which the work is done.
        every_s: minimum seconds between lines.
        clock: monotonic clock, injectable.
    """

    def __init__(
        self,
        label: str,
        total: int,
        every_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._label = label
        self._total = total
        self._every = every_s
        self._clock = clock
        self._start = clock()
        self._last = self._start

    def __call__(self, done: int) -> None:
        """Record that ``done`` items are finished."""
        now = self._clock()
        if done >= self._total or now - self._last >= self._every:
            self._last = now
            log(f"{self._label}: {done:,}/{self._total:,} ({now - self._start:.1f} s)")


@dataclass(frozen=True, kw_only=True, slots=True)
class AppendRun:
    """Raw figures of one timed round of appends (stats deltas are None if unknown)."""

    appends: int
    seconds: float
    latencies_us: list[float]
    fsyncs: int | None
    appended: int | None
    commits: int | None = None
    build_s: float | None = None
    commit_s: float | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class AppendResult:
    """Figures of one timed append run."""

    writers: int
    appends: int
    seconds: float
    per_second: float
    p50_us: float
    p99_us: float
    fsyncs_per_append: float | None
    batch: float | None
    stats_note: str | None
    build_us: float | None = None
    """Mean time the store took to build one write transaction (its ``txn_build_s``)."""
    commit_us: float | None = None
    """Mean time it took to commit one (``txn_commit_s``): page writes and flushes."""


def _delta(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None, key: str) -> Any:
    if before is None or after is None or key not in before or key not in after:
        return None
    return after[key] - before[key]


def measure_appends(
    peer: Peer,
    settings: Settings,
    writers: int,
    texts: Sequence[str],
    *,
    per_writer: int,
    round_no: int = 0,
) -> AppendRun:
    """Time ``per_writer`` appends on each of ``writers`` new threads.

    Each thread first makes ``settings.warmup`` untimed appends (opening its
    per-thread resources), then all start together on a barrier; the run's time is
    from the barrier to the last thread's finish. ``peer.stats()`` is read at the
    barrier and after the run, so its deltas cover exactly the timed appends.

    Args:
        peer: a set-up peer.
        settings: run sizes.
        writers: number of writer threads.
        texts: message contents to cycle through.
        per_writer: timed appends per thread.
        round_no: which round this is (varies the texts).

    Returns:
        The run's raw figures.

    Raises:
        BenchError: if a writer thread failed.
    """
    latencies: list[list[int]] = [[] for _ in range(writers)]
    ends = [0] * writers
    marks: dict[str, Any] = {}
    errors: list[BaseException] = []

    def at_start() -> None:
        marks["before"] = peer.stats()
        marks["t0"] = time.perf_counter_ns()

    barrier = threading.Barrier(writers, action=at_start)

    def work(w: int) -> None:
        mine = writer_conversations(w, settings.convs_per_writer)
        offset = (round_no * writers + w) * (per_writer + settings.warmup)
        try:
            for i in range(settings.warmup):
                text = texts[(offset + i) % len(texts)]
                peer.append(w, mine[i % len(mine)], {"role": "user", "content": text})
            barrier.wait()
            record = latencies[w].append
            clock = time.perf_counter_ns
            for i in range(per_writer):
                text = texts[(offset + settings.warmup + i) % len(texts)]
                message: Message = {"role": "user", "content": text}
                cid = mine[i % len(mine)]
                started = clock()
                peer.append(w, cid, message)
                record(clock() - started)
            ends[w] = clock()
        except BaseException as exc:
            errors.append(exc)
            barrier.abort()
        finally:
            try:
                peer.end_thread(w)
            except BaseException as exc:
                errors.append(exc)

    threads = [
        threading.Thread(target=work, args=(w,), name=f"bench-writer-{w}", daemon=True)
        for w in range(writers)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    failures = [e for e in errors if not isinstance(e, threading.BrokenBarrierError)] or errors
    if failures:
        raise BenchError(f"{peer.name}: a writer thread failed: {failures[0]!r}") from failures[0]
    after = peer.stats()
    return AppendRun(
        appends=per_writer * writers,
        seconds=(max(ends) - marks["t0"]) / 1e9,
        latencies_us=[ns / 1000 for lat in latencies for ns in lat],
        fsyncs=_delta(marks["before"], after, "fsyncs"),
        appended=_delta(marks["before"], after, "appends"),
        commits=_delta(marks["before"], after, "commits"),
        build_s=_delta(marks["before"], after, "txn_build_s"),
        commit_s=_delta(marks["before"], after, "txn_commit_s"),
    )


def summarize(writers: int, runs: Sequence[AppendRun]) -> AppendResult:
    """Pool the rounds of one (peer, writer count): total appends over total time."""
    total = sum(run.appends for run in runs)
    seconds = sum(run.seconds for run in runs)
    ordered = sorted(x for run in runs for x in run.latencies_us)
    fsyncs = None if any(r.fsyncs is None for r in runs) else sum(r.fsyncs or 0 for r in runs)
    appended = None if any(r.appended is None for r in runs) else sum(r.appended or 0 for r in runs)
    note = None
    if appended is not None and appended != total:
        note = f"stats() counted {appended} appends for {total} timed"
    build_us = _per_commit_us(runs, "build_s")
    commit_us = _per_commit_us(runs, "commit_s")
    return AppendResult(
        writers=writers,
        appends=total,
        seconds=seconds,
        per_second=total / seconds,
        p50_us=percentile(ordered, 0.50),
        p99_us=percentile(ordered, 0.99),
        fsyncs_per_append=None if fsyncs is None else fsyncs / total,
        batch=None if not fsyncs or appended is None else appended / fsyncs,
        stats_note=note,
        build_us=build_us,
        commit_us=commit_us,
    )


def _per_commit_us(runs: Sequence[AppendRun], field: str) -> float | None:
    """Mean µs per commit of a store's transaction timer, over the rounds (None when
    the store does not report it)."""
    commits = [r.commits for r in runs]
    seconds = [getattr(r, field) for r in runs]
    if any(c is None for c in commits) or any(s is None for s in seconds):
        return None
    total = sum(c or 0 for c in commits)
    return sum(s or 0.0 for s in seconds) / total * 1e6 if total else None


def _conversations(
    total: int, sizes: Callable[[int], int], texts: Sequence[str]
) -> Iterator[tuple[str, list[Message]]]:
    for index in range(total):
        yield read_conversation_id(index), conversation_messages(index, sizes(index), texts)


def _check(peer: Peer, what: str, got: list[Any], expected: list[Message]) -> None:
    contents = [peer.content(item) for item in got]
    wanted = [str(m["content"]) for m in expected]
    if contents != wanted:
        pairs = zip(contents, wanted, strict=False)
        shorter = min(len(contents), len(wanted))
        first = next((i for i, (a, b) in enumerate(pairs) if a != b), shorter)
        raise BenchError(
            f"{peer.name}: {what} returned {len(contents)} messages, expected {len(wanted)}; "
            f"first difference at {first}"
        )


def prepare_reads(
    peer: Peer,
    settings: Settings,
    *,
    conversations: int,
    measured: Sequence[int],
    sizes: Callable[[int], int],
    texts: Sequence[str],
    with_all: bool,
) -> list[str]:
    """Populate ``conversations`` conversations, then check what the measured ones return.

    Args:
        peer: a set-up, empty peer.
        settings: run sizes (``last_n``).
        conversations: how many conversations to store.
        measured: indices of the conversations whose reads will be timed.
        sizes: messages stored for conversation ``index``.
        texts: the text pool.
        with_all: also check reading whole conversations.

    Returns:
        The ids of the measured conversations.

    Raises:
        BenchError: if a read returned the wrong messages.
    """
    progress = Progress(f"{peer.name}: populating conversations", conversations)
    peer.populate(_conversations(conversations, sizes, texts), progress)
    cids = [read_conversation_id(i) for i in measured]
    n = settings.last_n
    for index, cid in zip(measured, cids, strict=True):
        stored = conversation_messages(index, sizes(index), texts)
        _check(peer, f"read_last({cid!r}, {n})", peer.read_last(cid, n), stored[-n:])
        if with_all:
            _check(peer, f"read_all({cid!r})", peer.read_all(cid), stored)
    return cids


#: A timed read: the call, the conversation ids it cycles through, and how many calls.
ReadJob = tuple[Callable[[str], object], Sequence[str], int]


def time_reads(
    jobs: Mapping[str, ReadJob], rounds: int = 20
) -> tuple[dict[str, float], dict[str, Exception]]:
    """Time the calls of every job, interleaved, and return each job's p50 in µs.

    The jobs take turns in ``rounds`` blocks (the starting job rotating each round), so
    a slow patch of the machine is shared by every job instead of landing on one.

    Args:
        jobs: name -> (read call, conversation ids to cycle through, timed calls).
        rounds: number of blocks each job's calls are split into.

    Returns:
        (name -> median latency in microseconds, name -> the exception that stopped it).
    """
    clock = time.perf_counter_ns
    names = list(jobs)
    samples: dict[str, list[float]] = {name: [] for name in names}
    errors: dict[str, Exception] = {}
    for round_no in range(rounds):
        turn = round_no % max(1, len(names))
        for name in names[turn:] + names[:turn]:
            if name in errors:
                continue
            read, cids, reads = jobs[name]
            done = len(samples[name])
            per_round = max(1, -(-reads // rounds))
            try:
                for step in range(done, min(reads, done + per_round)):
                    cid = cids[step % len(cids)]
                    started = clock()
                    read(cid)
                    samples[name].append((clock() - started) / 1000)
            except Exception as exc:
                errors[name] = exc
    result: dict[str, float] = {}
    for name, values in samples.items():
        if name not in errors:
            values.sort()
            result[name] = percentile(values, 0.50)
    return result, errors
