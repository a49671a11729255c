"""Turn the figures of one run into the printed table and the PASS/MISS targets.

Pure: takes the results mapping built by ``tools/bench.py`` and returns text and values.
Results layout (also what ``--json`` writes)::

    peers:     {name: {"status": "ok" | "not installed" | "error", "reason", "notes"}}
    append_counts: {"<writers>": timed appends}
    appends:   {"<writers>": {name: {"per_second", "p50_us", "p99_us", "fsyncs_per_append",
                                     "batch", ...} | {"error": str}}}
    syncs:     {name: {"per_kind": {kind: per append}, "total"} | {"error": str}}
    reads:     {name: {"last_p50_us", "all_p50_us"} | {"error": str}}
    reads_big: {name: {"last_p50_us", "conversations"} | {"error": str}}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

OURS = "ours"
#: memoryd's framework adapters: their store's group-commit figures are printed too.
ADAPTERS = ("memoryd-session", "memoryd-langchain")
#: The column of writes through a descriptor opened O_DSYNC (`benchlib.syscalls`).
SYNC_WRITES = "O_DSYNC writes"
#: Slack allowed on "no slower" targets, for timer and cache noise.
NOISE_ALLOWANCE = 1.25


@dataclass(frozen=True, kw_only=True, slots=True)
class Target:
    """One goal, its verdict ("PASS", "MISS" or "n/a") and the figures behind it."""

    goal: str
    verdict: str
    detail: str


def fmt(value: float | None) -> str:
    """Format a figure with about three significant digits and thousands separators."""
    if value is None:
        return "n/a"
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def ratio(value: float | None, ours: float | None) -> str:
    """Return ``value / ours`` as ``"1.23x"``, or ``"n/a"``."""
    if value is None or not ours:
        return "n/a"
    return f"{value / ours:.2f}x"


def _cell(section: Mapping[str, Any], name: str, key: str) -> float | None:
    row = section.get(name)
    if not isinstance(row, Mapping) or "error" in row:
        return None
    value = row.get(key)
    return None if value is None else float(value)


def _absent(peers: Mapping[str, Any], section: Mapping[str, Any], name: str) -> str | None:
    """Return the text shown instead of figures for ``name``, or None if it has figures."""
    info = peers.get(name, {})
    if info.get("status") == "not installed":
        return f"not installed ({info.get('reason', '')})"
    row = section.get(name)
    if row is None:
        return "not run"
    if "error" in row:
        return f"error: {row['error']}"
    return None


def _table(
    title: str,
    peers: Mapping[str, Any],
    section: Mapping[str, Any],
    order: Sequence[str],
    columns: Sequence[tuple[str, str]],
) -> list[str]:
    """Render rows of ``section`` with each column followed by its ratio to ours."""
    head = f"{'peer':<16}" + "".join(f"{label:>14}{'xours':>9}" for label, _ in columns)
    lines = [title, head, "-" * len(head)]
    for name in order:
        missing = _absent(peers, section, name)
        if missing is not None:
            lines.append(f"{name:<16}  {missing}")
            continue
        cells = []
        for _, key in columns:
            value = _cell(section, name, key)
            cells.append(f"{fmt(value):>14}{ratio(value, _cell(section, OURS, key)):>9}")
        lines.append(f"{name:<16}" + "".join(cells))
    return lines


ONE_MESSAGE_EVENTS = "ours-1msg"
"""The reads row of ours over conversations written one message per add."""


def _with_one_message_row(names: list[str], results: Mapping[str, Any]) -> list[str]:
    """``names`` with the one-message-events row of ours right after ours, if measured."""
    if ONE_MESSAGE_EVENTS not in results["reads"] or OURS not in names:
        return names
    at = names.index(OURS) + 1
    return [*names[:at], ONE_MESSAGE_EVENTS, *names[at:]]


def render(results: Mapping[str, Any], order: Sequence[str]) -> str:
    """Return the whole printed report for ``results``, peers in ``order``."""
    peers = results["peers"]
    settings = results["settings"]
    lines: list[str] = []
    for writers, section in results["appends"].items():
        count = results["append_counts"].get(writers, 0)
        title = (
            f"\nDurable appends, {writers} writer thread(s), {count:,} "
            f"timed appends of one ~{settings['text_chars']}-char user message "
            f"(appends/s: higher is better; latency: lower is better)"
        )
        lines += _table(
            title,
            peers,
            section,
            order,
            [("appends/s", "per_second"), ("p50 µs", "p50_us"), ("p99 µs", "p99_us")],
        )
        for name in (OURS, *ADAPTERS):
            row = section.get(name)
            if isinstance(row, Mapping) and "error" not in row and row.get("batch") is not None:
                note = f"  ({row['stats_note']})" if row.get("stats_note") else ""
                lines.append(
                    f"{name} stats(): fsyncs per append {fmt(row.get('fsyncs_per_append'))}, "
                    f"mean group-commit batch {fmt(row.get('batch'))} appends/fsync{note}"
                )
                cycle = batch_cycle(row)
                if cycle is not None:
                    lines.append(f"  {name}: {cycle}")
        trip = results["environment"].get("thread_round_trip_us")
        if writers == "1" and trip is not None:
            lines.append(
                f"a bare round trip between two Python threads here: p50 {trip:,.0f} µs "
                "(a single writer pays one to the store actor per append)"
            )
    lines += _syncs_table(results, order)
    if results.get("reads"):
        title = (
            f"\nRead latency p50, store of {settings['read_convs']:,} conversations x "
            f"{settings['read_msgs']} messages (lower is better)"
        )
        lines += _table(
            title,
            peers,
            results["reads"],
            _with_one_message_row(
                [n for n in order if n in results["reads"] or n == OURS], results
            ),
            [
                (f"last {settings['last_n']} µs", "last_p50_us"),
                (f"all {settings['read_msgs']} µs", "all_p50_us"),
            ],
        )
    if results.get("reads_big"):
        filler = settings["big_convs"] - settings["sample"]
        title = (
            f"\nLast-{settings['last_n']} read p50 on {settings['big_convs']:,} conversations "
            f"(lower is better; the {settings['sample']} measured conversations hold "
            f"{settings['read_msgs']} messages, the other {filler:,} hold "
            f"{settings['big_filler_msgs']} each, to keep populating short)"
        )
        lines += _table(
            title,
            peers,
            results["reads_big"],
            [n for n in order if n in results["reads_big"] or n == OURS],
            [(f"last {settings['last_n']} µs", "last_p50_us")],
        )
    lines.append("\nTargets")
    for target in results.get("targets", []):
        lines.append(f"  {target['verdict']:<5} {target['goal']}  [{target['detail']}]")
    bound_lines = bounds(results)
    if bound_lines:
        lines.append("\nWhat bounds the append targets (reference rows of this run)")
        lines += [f"  {line}" for line in bound_lines]
    lines.append("\nPeer configurations")
    for name in order:
        info = peers.get(name, {})
        text = info.get("notes") or f"not installed ({info.get('reason', '')})"
        lines.append(f"  {name:<15} {text}")
    return "\n".join(lines)


def _syncs_table(results: Mapping[str, Any], order: Sequence[str]) -> list[str]:
    """The disk waits behind one append of each peer, as strace counted them."""
    syncs = results.get("syncs") or {}
    unavailable = results.get("syncs_unavailable")
    if not syncs and not unavailable:
        return []
    lines = [
        "\nDisk waits per durable append, 1 writer (strace -f: the difference of a 20- and a "
        "120-append run; an O_DSYNC write waits for the disk as an fdatasync does)"
    ]
    if unavailable:
        return [*lines, f"  not measured: {unavailable}"]
    head = (
        f"{'peer':<16}{'fdatasync':>11}{'fsync':>8}{SYNC_WRITES:>16}{'other':>8}{'disk waits':>12}"
    )
    lines += [head, "-" * len(head)]
    shown = ("fdatasync", "fsync", SYNC_WRITES)
    for name in order:
        row = syncs.get(name)
        if row is None:
            continue
        if "error" in row:
            lines.append(f"{name:<16}  error: {row['error']}")
            continue
        kinds = row["per_kind"]
        other = sum(v for k, v in kinds.items() if k not in shown)
        lines.append(
            f"{name:<16}{kinds.get('fdatasync', 0.0):>11.2f}{kinds.get('fsync', 0.0):>8.2f}"
            f"{kinds.get(SYNC_WRITES, 0.0):>16.2f}{other:>8.2f}{row['total']:>12.2f}"
        )
    return lines


def _at_least(goal: str, ours: float | None, peer: float | None, factor: float) -> Target:
    """Target: ``ours >= factor * peer`` (both higher-is-better)."""
    if ours is None or peer is None or not peer:
        return Target(goal=goal, verdict="n/a", detail=f"ours {fmt(ours)}, peer {fmt(peer)}")
    got = ours / peer
    verdict = "PASS" if got >= factor else "MISS"
    return Target(goal=goal, verdict=verdict, detail=f"{fmt(ours)} vs {fmt(peer)}: {got:.2f}x")


def _at_most(goal: str, ours: float | None, other: float | None, factor: float) -> Target:
    """Target: ``ours <= factor * other`` (both lower-is-better)."""
    if ours is None or other is None or not other:
        return Target(goal=goal, verdict="n/a", detail=f"ours {fmt(ours)}, other {fmt(other)}")
    got = ours / other
    verdict = "PASS" if got <= factor else "MISS"
    return Target(
        goal=goal, verdict=verdict, detail=f"{fmt(ours)} µs vs {fmt(other)} µs: {got:.2f}x"
    )


def _faster(goal: str, ours: float | None, peer: float | None, factor: float) -> Target:
    """Target: ``peer >= factor * ours`` (latencies, lower-is-better)."""
    if ours is None or peer is None or not ours:
        return Target(goal=goal, verdict="n/a", detail=f"ours {fmt(ours)}, peer {fmt(peer)}")
    got = peer / ours
    verdict = "PASS" if got >= factor else "MISS"
    return Target(
        goal=goal, verdict=verdict, detail=f"{fmt(ours)} µs vs {fmt(peer)} µs: {got:.2f}x faster"
    )


def targets(results: Mapping[str, Any]) -> list[Target]:
    """Check ours against the goals it is built to meet."""
    eight = results["appends"].get("8", {})
    one = results["appends"].get("1", {})
    reads = results.get("reads", {})
    big = results.get("reads_big", {})
    n = results["settings"]["last_n"]
    session_last = _cell(reads, "sqlite-session", "last_p50_us")
    ours_last = _cell(reads, OURS, "last_p50_us")
    return [
        _at_least(
            "8 writers: ours appends/s >= 2.5x sqlite-wal (WAL, synchronous=FULL)",
            _cell(eight, OURS, "per_second"),
            _cell(eight, "sqlite-wal", "per_second"),
            2.5,
        ),
        _at_least(
            "8 writers: ours appends/s >= 5x sqlite-session (Agents SDK SQLiteSession)",
            _cell(eight, OURS, "per_second"),
            _cell(eight, "sqlite-session", "per_second"),
            5.0,
        ),
        _at_least(
            "1 writer: ours appends/s >= 0.8x raw-lmdb (one synced txn per append)",
            _cell(one, OURS, "per_second"),
            _cell(one, "raw-lmdb", "per_second"),
            0.8,
        ),
        _at_least(
            "1 writer: memoryd-session appends/s >= 2x sqlite-session (Agents SDK SQLiteSession)",
            _cell(one, "memoryd-session", "per_second"),
            _cell(one, "sqlite-session", "per_second"),
            2.0,
        ),
        _at_most(
            f"last-{n} read: ours p50 <= 2x raw-lmdb cursor read",
            ours_last,
            _cell(reads, "raw-lmdb", "last_p50_us"),
            2.0,
        ),
        _faster(
            f"last-{n} read: ours >= 4x faster than SQLiteSession.get_items(limit={n})",
            ours_last,
            session_last,
            4.0,
        ),
        _at_most(
            f"last-{n} read on {results['settings']['big_convs']:,} conversations no slower "
            f"than on {results['settings']['read_convs']:,} "
            f"(allowing {NOISE_ALLOWANCE}x for noise)",
            _cell(big, OURS, "last_p50_us"),
            ours_last,
            NOISE_ALLOWANCE,
        ),
    ]


def batch_cycle(row: Mapping[str, Any]) -> str | None:
    """Where one batch's time goes, from the store's own transaction timers: building
    the transaction, committing it (page writes and flushes), and the rest (the hand-off
    to the store actor, the answers, and the writers' own code until the next batch).
    None when the store does not report its timers."""
    batch, build, commit = row.get("batch"), row.get("build_us"), row.get("commit_us")
    rate = row.get("per_second")
    if not batch or build is None or commit is None or not rate:
        return None
    cycle = batch * 1e6 / rate
    rest = cycle - build - commit
    return (
        f"one batch every {cycle:,.0f} µs: building its transaction {build:,.0f} µs, "
        f"committing it (page writes and flushes) {commit:,.0f} µs, the rest "
        f"(hand-off, answers, writers' own code) {rest:,.0f} µs"
    )


def _cycle_bound(goal: str, target_rate: float, row: Mapping[str, Any]) -> str | None:
    """A group-commit target as a batch cycle: the cycle it needs against the commit time
    measured inside ours' own run."""
    batch, commit, rate = row.get("batch"), row.get("commit_us"), row.get("per_second")
    if not batch or commit is None or not rate:
        return None
    needed = batch * 1e6 / target_rate
    now = batch * 1e6 / rate
    return (
        f"{goal}: {fmt(target_rate)} appends/s in batches of {batch:.1f} is one batch every "
        f"{needed:,.0f} µs; ours takes {now:,.0f} µs, of which the commit (measured in "
        f"this run) {commit:,.0f} µs, leaving {needed - commit:,.0f} µs for what now "
        f"takes {now - commit:,.0f} µs"
    )


def _budget(goal: str, target_rate: float, path_us: float, commit_us: float, batch: int) -> str:
    """One target as a time budget: what an append may cost, what the disk is left."""
    per_append = 1e6 / target_rate
    left = per_append - path_us
    return (
        f"{goal}: {fmt(target_rate)} appends/s is {per_append:,.0f} µs an append; ours' "
        f"path without fsync takes {path_us:,.0f} µs of it (ours-nosync), leaving "
        f"{left:,.0f} µs an append, {left * batch:,.0f} µs a commit of {batch}, for the disk; "
        f"one synced commit of ours' records takes {commit_us:,.0f} µs (raw-lmdb-layout)"
    )


def bounds(results: Mapping[str, Any]) -> list[str]:
    """The append targets as time budgets, from the reference rows (``peers.ceilings``).

    Each target rate is a time per append. ``ours-nosync`` measures ours' whole path
    without the disk; what is left of the budget is all the disk may take, against
    ``raw-lmdb-layout``'s time for one synced commit of the same records on the calling
    thread. With every writer inside each commit (8 closed-loop writers, batches of 8;
    one writer), nothing else runs while the disk syncs, so a target whose disk budget is
    below one commit's time cannot be met (the commit's page writes, a few µs, count on
    both sides). Only lines whose figures were measured are returned.
    """
    lines: list[str] = []
    one = results["appends"].get("1", {})
    eight = results["appends"].get("8", {})
    layout = _cell(one, "raw-lmdb-layout", "per_second")
    nosync8 = _cell(eight, "ours-nosync", "per_second")
    nosync1 = _cell(one, "ours-nosync", "per_second")
    goals = [
        ("8 writers, 2.5x sqlite-wal", eight, "sqlite-wal", 2.5, nosync8, 8),
        ("8 writers, 5x sqlite-session", eight, "sqlite-session", 5.0, nosync8, 8),
        ("1 writer, 0.8x raw-lmdb", one, "raw-lmdb", 0.8, nosync1, 1),
    ]
    for goal, section, peer, factor, nosync, batch in goals:
        rate = _cell(section, peer, "per_second")
        if layout and rate and nosync:
            lines.append(_budget(goal, factor * rate, 1e6 / nosync, 1e6 / layout, batch))
        ours = section.get(OURS)
        if batch > 1 and rate and isinstance(ours, Mapping) and "error" not in ours:
            cycle = _cycle_bound(goal, factor * rate, ours)
            if cycle is not None:
                lines.append(cycle)
    lines += _session_bounds(results)
    trip = results["environment"].get("thread_round_trip_us")
    if trip is not None:
        lines.append(
            f"a bare thread round trip here takes {trip:,.0f} µs; one writer pays it per "
            "append on top of the commit"
        )
    return lines


def _waits(results: Mapping[str, Any], name: str) -> float | None:
    row = (results.get("syncs") or {}).get(name)
    if not isinstance(row, Mapping) or "error" in row:
        return None
    return float(row["total"])


def _session_bounds(results: Mapping[str, Any]) -> list[str]:
    """The one-writer session target as a time budget, against one synced LMDB commit.

    ``memoryd-session`` with one writer makes one store commit per ``add_items``, so no
    append can take less than one synced commit of LMDB; ``raw-lmdb`` (one put per
    synced transaction, on the calling thread) measures that commit, and the disk-wait
    table says why it costs more than a ``SQLiteSession`` commit. The adapter's own
    cost is measured without the disk, where nothing else hides it:
    ``session-nosync`` against ``ours-nosync`` (the store's ``add``). Only lines
    whose figures were measured are returned.
    """
    one = results["appends"].get("1", {})
    session = _cell(one, "sqlite-session", "per_second")
    raw = _cell(one, "raw-lmdb", "per_second")
    lines: list[str] = []
    if session and raw:
        budget = 1e6 / (2.0 * session)
        waits = [
            f"{label} {fmt(value)}"
            for label, value in (
                ("raw-lmdb", _waits(results, "raw-lmdb")),
                ("sqlite-session", _waits(results, "sqlite-session")),
            )
            if value is not None
        ]
        per_commit = f" (disk waits per append: {', '.join(waits)})" if waits else ""
        lines.append(
            f"1 writer, memoryd-session 2x sqlite-session: {fmt(2.0 * session)} appends/s is "
            f"{budget:,.0f} µs an append; one synced py-lmdb commit of one put takes "
            f"{1e6 / raw:,.0f} µs (raw-lmdb, {raw / session:.2f}x sqlite-session){per_commit}"
        )
    bare_session = _cell(one, "session-nosync", "per_second")
    bare_ours = _cell(one, "ours-nosync", "per_second")
    if bare_session and bare_ours:
        lines.append(
            f"1 writer without the disk: memoryd-session takes {1e6 / bare_session:,.0f} µs "
            f"an append (session-nosync), ours' add() {1e6 / bare_ours:,.0f} µs "
            f"(ours-nosync): the adapter and its event loop add "
            f"{1e6 / bare_session - 1e6 / bare_ours:,.0f} µs to one store append"
        )
    return lines
