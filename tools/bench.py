#!/usr/bin/env python3
"""Storage benchmark: memoryd's LmdbStore against its peers, in one run, as ratios.

Measures durable appends (1 and 8 writer threads: appends/s, p50/p99 latency), the disk
waits behind one append of each peer (traced with strace, where installed), read latency
of the last 50 and of all messages of a conversation, and ours' last-50 read on a much
larger store; prints each figure with its ratio to ours and checks the targets.

    python tools/bench.py                       # the full run (`make bench`)
    python tools/bench.py --quick               # a smoke run, well under a minute
    python tools/bench.py --only raw-lmdb,sqlite-wal --json figures.json

Peers: ours (memoryd.LmdbStore), raw-lmdb, sqlite-wal, sqlite-session (OpenAI Agents SDK
SQLiteSession), langchain-sql (LangChain SQLChatMessageHistory). Each is configured for
its durable mode; the configurations are printed under the table.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import shutil
import sys
import tempfile
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchlib.environment import (
    MEMORY_FILESYSTEMS,
    default_base_dir,
    filesystem_of,
    thread_round_trip_us,
)
from benchlib.peers import PEERS, OursPeer, Peer
from benchlib.report import ONE_MESSAGE_EVENTS, render, targets
from benchlib.runner import (
    AppendRun,
    ReadJob,
    log,
    measure_appends,
    prepare_reads,
    summarize,
    time_reads,
)
from benchlib.syscalls import strace, waits_per_append
from benchlib.workload import QUICK, Settings, make_texts, sample_indices

REPO_ROOT = Path(__file__).resolve().parent.parent
PHASES = ("appends", "syncs", "reads", "big")
#: Peers whose last-N read is also measured on the large store.
BIG_STORE_PEERS = ("ours", "raw-lmdb")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse the command line."""
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="small counts, for a smoke run")
    parser.add_argument("--appends", type=int, help="timed appends per peer and writer count")
    parser.add_argument(
        "--only", help=f"comma-separated peers to run (default all: {', '.join(PEERS)})"
    )
    parser.add_argument(
        "--phases", default=",".join(PHASES), help="subset of: appends,syncs,reads,big"
    )
    parser.add_argument("--writers", help="comma-separated writer-thread counts (default 1,8)")
    parser.add_argument("--big-convs", type=int, help="conversations in ours' large store")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument(
        "--dir", type=Path, help="scratch base directory (default: a temp dir on /work's disk)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the data directories")
    parser.add_argument("--strict", action="store_true", help="exit 1 if a target is missed")
    args = parser.parse_args(argv)
    names = [n.strip() for n in (args.only or ",".join(PEERS)).split(",") if n.strip()]
    unknown = [n for n in names if n not in PEERS]
    if unknown:
        parser.error(f"unknown peer(s) {', '.join(unknown)}; choose from {', '.join(PEERS)}")
    args.names = [n for n in PEERS if n in names]
    phases = [p.strip() for p in args.phases.split(",") if p.strip()]
    if set(phases) - set(PHASES):
        parser.error(f"--phases takes a subset of {','.join(PHASES)}")
    args.phase_set = set(phases)
    return args


def build_settings(args: argparse.Namespace) -> Settings:
    """Return the run's sizes from ``--quick`` and the overriding flags."""
    settings = QUICK if args.quick else Settings()
    changes: dict[str, Any] = {}
    if args.appends is not None:
        changes["appends"] = args.appends
    if args.writers:
        changes["writers"] = tuple(int(w) for w in args.writers.split(","))
    if args.big_convs is not None:
        changes["big_convs"] = args.big_convs
    return dataclasses.replace(settings, **changes)


class Bench:
    """One run: owns the scratch directory and collects the results mapping.

    Args:
        settings: run sizes.
        names: peers to run, in table order.
        run_dir: a fresh directory for this run's data.
        keep: keep each phase's data directory instead of deleting it.
    """

    def __init__(self, settings: Settings, names: list[str], run_dir: Path, keep: bool) -> None:
        self.settings = settings
        self.names = names
        self.run_dir = run_dir
        self.keep = keep
        self.texts = make_texts(512, settings.text_chars)
        self.results: dict[str, Any] = {
            "settings": dataclasses.asdict(settings),
            "environment": {
                "dir": str(run_dir),
                "filesystem": filesystem_of(run_dir),
                "python": platform.python_version(),
                "platform": platform.platform(),
            },
            "peers": {},
            "append_counts": {},
            "appends": {},
            "reads": {},
            "reads_big": {},
            "syncs": {},
        }
        self.usable: list[str] = []
        self._open: list[Peer] = []
        self._dirs: list[Path] = []
        self._jobs: dict[str, ReadJob] = {}
        for name in names:
            reason = PEERS[name].probe()
            if reason is None:
                self.usable.append(name)
                self.results["peers"][name] = {"status": "ok", "notes": self._notes(name)}
            else:
                self.results["peers"][name] = {"status": "not installed", "reason": reason}
                log(f"{name}: {reason}")

    def _make(self, name: str) -> Peer:
        one_message = name == ONE_MESSAGE_EVENTS
        cls = OursPeer if one_message else PEERS[name]
        if cls is OursPeer:
            return OursPeer(
                populate_batch=1 if one_message else self.settings.populate_batch,
                populate_threads=self.settings.populate_threads,
            )
        return cls()

    def _notes(self, name: str) -> str:
        try:
            return self._make(name).notes()
        except Exception as exc:
            return f"(notes unavailable: {exc!r})"

    def appends(self) -> None:
        """Time durable appends for every writer count, all peers open, taking turns."""
        s = self.settings
        for writers in s.writers:
            key = str(writers)
            rounds = max(1, s.rounds)
            per_writer = max(1, s.appends // (writers * rounds))
            self.results["append_counts"][key] = per_writer * writers * rounds
            section = self.results["appends"].setdefault(key, {})
            peers: dict[str, Peer] = {}
            runs: dict[str, list[AppendRun]] = {}
            dirs: list[Path] = []
            try:
                for name in self.usable:
                    directory = self.run_dir / f"appends{writers}-{name}"
                    directory.mkdir(mode=0o700)
                    dirs.append(directory)
                    peer = self._make(name)
                    try:
                        peer.setup(directory)
                    except Exception as exc:
                        self._failed("appends", name, exc, section)
                        continue
                    peers[name], runs[name] = peer, []
                for round_no in range(rounds):
                    order = list(peers)
                    turn = round_no % max(1, len(order))
                    for name in order[turn:] + order[:turn]:
                        log(
                            f"{name}: round {round_no + 1}/{rounds}, "
                            f"{per_writer * writers:,} appends from {writers} writer(s)"
                        )
                        try:
                            runs[name].append(
                                measure_appends(
                                    peers[name],
                                    s,
                                    writers,
                                    self.texts,
                                    per_writer=per_writer,
                                    round_no=round_no,
                                )
                            )
                        except Exception as exc:
                            self._failed("appends", name, exc, section)
                            self._close(peers.pop(name))
                for name, peer_runs in runs.items():
                    if name in peers:
                        section[name] = dataclasses.asdict(summarize(writers, peer_runs))
            finally:
                for peer in peers.values():
                    self._close(peer)
                if not self.keep:
                    for directory in dirs:
                        shutil.rmtree(directory, ignore_errors=True)

    def syncs(self) -> None:
        """Count each peer's disk waits per append (one writer) in traced child runs."""
        if strace() is None:
            log("disk waits not traced: strace is not installed")
            self.results["syncs_unavailable"] = "strace is not installed"
            return
        for name in self.usable:
            log(f"{name}: disk waits per append, traced")
            try:
                count = waits_per_append(name, self.run_dir)
            except Exception as exc:
                log(f"{name}: syncs failed: {exc!r}")
                self.results["syncs"][name] = {"error": f"{type(exc).__name__}: {exc}"[:160]}
                continue
            self.results["syncs"][name] = dataclasses.asdict(count)

    @staticmethod
    def _close(peer: Peer) -> None:
        """Close ``peer``, logging (not raising) a failure."""
        try:
            peer.close()
        except Exception as exc:
            log(f"{peer.name}: close failed: {exc!r}")

    def _open_read_store(
        self,
        section: str,
        name: str,
        *,
        row: str | None = None,
        conversations: int,
        measured: list[int],
        sizes: Callable[[int], int],
        with_all: bool,
    ) -> None:
        """Populate and check one read store; keep it open for the timed rounds."""
        row = row or name
        directory = self.run_dir / f"{section}-{row}"
        directory.mkdir(mode=0o700)
        self._dirs.append(directory)
        peer = self._make(row)
        try:
            peer.setup(directory)
        except Exception as exc:
            self._failed(section, row, exc)
            return
        self._open.append(peer)
        try:
            cids = prepare_reads(
                peer,
                self.settings,
                conversations=conversations,
                measured=measured,
                sizes=sizes,
                texts=self.texts,
                with_all=with_all,
            )
        except Exception as exc:
            self._failed(section, row, exc)
            return
        n = self.settings.last_n
        reads = min(self.settings.reads, peer.max_reads or self.settings.reads)
        self._jobs[f"{section}/{row}/last"] = (lambda cid: peer.read_last(cid, n), cids, reads)
        if with_all:
            self._jobs[f"{section}/{row}/all"] = (peer.read_all, cids, reads)
        self.results[section][row] = {"conversations": conversations}

    def _failed(
        self, phase: str, name: str, exc: Exception, rows: dict[str, Any] | None = None
    ) -> None:
        """Record ``exc`` as the row of ``name`` in ``rows`` (default: the ``phase`` section)."""
        log(f"{name}: {phase} failed: {exc!r}")
        traceback.print_exception(exc, file=sys.stderr)
        target = self.results[phase] if rows is None else rows
        target[name] = {"error": f"{type(exc).__name__}: {exc}"[:160]}

    def reads(self, phases: set[str]) -> None:
        """Build every read store, then time all their reads in interleaved rounds.

        "reads": last-N and whole-conversation reads on ``read_convs`` x ``read_msgs``
        (written ``populate_batch`` messages to an add), and ours' on ``sample``
        conversations of ``read_msgs`` written one message to an add (row "ours-1msg").
        "big": ours' (and raw-lmdb's) last-N read on ``big_convs`` conversations, where
        only the measured ones hold ``read_msgs`` messages.
        """
        s = self.settings
        try:
            if "reads" in phases:
                measured = sample_indices(s.read_convs, s.sample)
                for name in self.usable:
                    if PEERS[name].reads:
                        log(f"{name}: read store of {s.read_convs:,} x {s.read_msgs} messages")
                        self._open_read_store(
                            "reads",
                            name,
                            conversations=s.read_convs,
                            measured=measured,
                            sizes=lambda _: s.read_msgs,
                            with_all=True,
                        )
                if "ours" in self.usable:
                    # only the measured conversations: one fsync'd add per message
                    log(f"ours: {s.sample} conversations of {s.read_msgs} one-message events")
                    self._open_read_store(
                        "reads",
                        "ours",
                        row=ONE_MESSAGE_EVENTS,
                        conversations=s.sample,
                        measured=list(range(s.sample)),
                        sizes=lambda _: s.read_msgs,
                        with_all=True,
                    )
            if "big" in phases:
                big_measured = sample_indices(s.big_convs, s.sample)
                chosen = frozenset(big_measured)

                def sizes(index: int) -> int:
                    return s.read_msgs if index in chosen else s.big_filler_msgs

                for name in self.usable:
                    if name in BIG_STORE_PEERS:
                        log(f"{name}: large store of {s.big_convs:,} conversations")
                        self._open_read_store(
                            "reads_big",
                            name,
                            conversations=s.big_convs,
                            measured=big_measured,
                            sizes=sizes,
                            with_all=False,
                        )
            log(f"timing up to {s.reads:,} reads of each of {len(self._jobs)} kinds, interleaved")
            timed, errors = time_reads(self._jobs)
            for key, exc in errors.items():
                section, name, _ = key.split("/")
                self._failed(section, name, exc)
            for key, p50 in timed.items():
                section, name, kind = key.split("/")
                if "error" not in self.results[section][name]:
                    self.results[section][name][f"{kind}_p50_us"] = p50
        finally:
            for peer in self._open:
                self._close(peer)
            if not self.keep:
                for directory in self._dirs:
                    shutil.rmtree(directory, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; return the exit status."""
    args = parse_args(argv)
    settings = build_settings(args)
    base = args.dir if args.dir is not None else default_base_dir(REPO_ROOT)
    base.mkdir(parents=True, exist_ok=True)
    kind = filesystem_of(base)
    if kind in MEMORY_FILESYSTEMS:
        log(f"warning: {base} is on {kind}; fsync is free there, durable figures mean nothing")
    run_dir = Path(tempfile.mkdtemp(prefix="memoryd-bench-", dir=base))
    log(f"data under {run_dir} ({kind}); peers: {', '.join(args.names)}")
    bench = Bench(settings, args.names, run_dir, args.keep)
    try:
        if "appends" in args.phase_set:
            bench.results["environment"]["thread_round_trip_us"] = thread_round_trip_us()
            bench.appends()
        if "syncs" in args.phase_set:
            bench.syncs()
        if args.phase_set & {"reads", "big"}:
            bench.reads(args.phase_set)
    finally:
        if not args.keep:
            shutil.rmtree(run_dir, ignore_errors=True)
    found = targets(bench.results)
    bench.results["targets"] = [dataclasses.asdict(t) for t in found]
    print(render(bench.results, args.names))
    if args.json is not None:
        args.json.write_text(json.dumps(bench.results, indent=2, ensure_ascii=False) + "\n")
        log(f"figures written to {args.json}")
    missed = any(t.verdict == "MISS" for t in found)
    return 1 if args.strict and missed else 0


if __name__ == "__main__":
    sys.exit(main())
