"""The floor of a durable journal's cost on this machine, with no memoryd at all.

`tools/bench_agents.py` compares agent runs with the journal on and off. This measures
the same shape with nothing but threads and py-lmdb: each of ``workers`` threads runs
``steps`` steps of pure-Python work (holding the interpreter lock, as an agent's step
does) and, with the journal on, hands one small record per step to a committing thread
and waits until it is durable; every run ends with one durable record either way. The
committing thread gathers the records that arrive together into one transaction (group
commit, fsynced as LMDB always does). Its ``on / off`` is the journal's shape with the
lightest step there is: a spin that touches almost no memory. A thread that blocks on
every step and runs an agent's step in between pays more than that for each block
(its caches are cold when it comes back); the bare-journal row of `bench_agents` puts
the same committer under memoryd's own runs, to measure that floor too.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass

import lmdb

__all__ = ["Committer", "Floor", "ThreadLog", "floor_on_off"]

_LINGER_S = 0.002
"""How long a batch waits for the rest of its writers after the first."""


def spin(seconds: float) -> None:
    """Pure-Python work for ``seconds`` (it holds the interpreter lock, as a step does)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


class Committer:
    """One thread owning one LMDB environment; writers wait for their record's commit.

    The least a durable journal can do: a record handed over, grouped with the records
    of the other writers that arrive within a linger (or until ``writers`` are in), one
    transaction fsynced as LMDB always does, and the writer woken. `tools/bench_agents.py`
    also puts it under memoryd's own runs with their journal off (the bare-journal row).
    """

    def __init__(self, path: str, writers: int) -> None:
        self.env = lmdb.open(path, map_size=1 << 30)
        self.expect = writers
        self.commits = 0
        """Transactions committed so far (each fsynced)."""
        self._cond = threading.Condition()
        self._queue: list[tuple[bytes, threading.Lock]] = []
        self._stopped = False
        self._next = 0
        self._thread = threading.Thread(target=self._serve, name="journal-floor", daemon=True)
        self._thread.start()

    def write(self, record: bytes) -> None:
        """Return once ``record`` is committed."""
        done = threading.Lock()
        done.acquire()
        with self._cond:
            self._queue.append((record, done))
            if len(self._queue) in (1, self.expect):  # a batch begins, or is full
                self._cond.notify()
        done.acquire()

    def _serve(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._stopped:
                    self._cond.wait()  # idle: no polling, so the runs have the CPU
                if not self._queue:
                    return
                until = time.monotonic() + _LINGER_S
                while len(self._queue) < self.expect:
                    left = until - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(left)
                batch, self._queue = self._queue, []
            with self.env.begin(write=True) as txn:
                for record, _ in batch:
                    self._next += 1
                    txn.put(self._next.to_bytes(8, "big"), record)
            self.commits += 1
            for _, done in batch:
                done.release()

    def stop(self) -> int:
        """Stop serving; returns how many records the file holds."""
        with self._cond:
            self._stopped = True
            self._cond.notify()
        self._thread.join()
        entries = int(self.env.stat()["entries"])
        self.env.close()
        return entries


class ThreadLog:
    """A journal with no hand-off at all: each writer thread appends its record to a file
    of its own and ``fdatasync``-s it before going on, in its own thread.

    No other thread is woken and none waits for one; nothing is grouped, so each record
    is one device flush (a flush of about a tenth of a millisecond here, during which the
    writer has let go of the interpreter lock). It is the cheapest shape a journal that
    makes each step durable before the next can take on callers' threads: the one to
    set against the group-committing `Committer` when asking whether a hand-off is what
    the journal's wait costs. `tools/bench_agents.py` puts it under memoryd's own runs
    (the own-thread log row).
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._mine = threading.local()
        self._lock = threading.Lock()
        self._fds: list[int] = []

    def write(self, record: bytes) -> None:
        """Return once ``record`` is on the device."""
        fd = getattr(self._mine, "fd", None)
        if fd is None:
            name = os.path.join(self.path, f"log-{threading.get_ident()}")
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            self._mine.fd = fd
            with self._lock:
                self._fds.append(fd)
        os.write(fd, record)
        os.fdatasync(fd)

    def stop(self) -> int:
        """Close the files; returns how many bytes they hold in all."""
        with self._lock:
            fds, self._fds = self._fds, []
        for fd in fds:
            os.close(fd)
        return sum(entry.stat().st_size for entry in os.scandir(self.path))


@dataclass(frozen=True)
class Floor:
    """Runs/s with the journal on and off, and what the journal-on side wrote."""

    on: float
    off: float
    records_on: int
    """Records in the file after the journal-on rounds: a run's steps and its end."""
    commits_on: int
    """Transactions (each fsynced) that the journal-on rounds took."""


def _rate(
    committer: Committer, workers: int, runs: int, steps: int, step_s: float, journal: bool
) -> float:
    def work() -> None:
        for _ in range(runs):
            for _ in range(steps):
                spin(step_s)
                if journal:
                    committer.write(b"s" * 200)
            committer.write(b"t" * 400)  # the turn's commit

    threads = [threading.Thread(target=work) for _ in range(workers)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return workers * runs / (time.perf_counter() - started)


def floor_on_off(workers: int, runs: int, steps: int, step_s: float, rounds: int) -> Floor:
    """Alternating rounds of both sides (total runs over total time), on a fresh file each.

    Args:
        workers: concurrent runs.
        runs: runs per worker and round.
        steps: steps per run.
        step_s: the Python work of one step, in seconds.
        rounds: rounds of each side.
    """
    on_s = off_s = 0.0
    records = commits = 0
    for _ in range(rounds):
        for journal in (True, False):
            path = tempfile.mkdtemp(prefix="journal-floor-")
            try:
                committer = Committer(path, workers)
                rate = _rate(committer, workers, runs, steps, step_s, journal)
                taken = committer.commits
                held = committer.stop()
            finally:
                shutil.rmtree(path, ignore_errors=True)
            if journal:
                on_s += workers * runs / rate
                records, commits = records + held, commits + taken
            else:
                off_s += workers * runs / rate
    total = rounds * workers * runs
    return Floor(on=total / on_s, off=total / off_s, records_on=records, commits_on=commits)
