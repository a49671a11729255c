"""Restart latency: from ``supervisors.kill`` to the new incarnation answering a call.

Measured against the floor of doing it by hand in the same run: stopping a plain
Pykka actor and starting a new one (no supervision, no name registry).

    python tools/bench_restart.py [--cycles N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pykka
from pykka.messages import ProxyCall

from supervisors import ChildSpec, Exit, SupervisedActor, Supervisor, kill, whereis

PING = ProxyCall(attr_path=("ping",), args=(), kwargs={})


class Probe(SupervisedActor):
    """Signals when a new incarnation has finished init()."""

    ready = threading.Event()

    def __init__(self) -> None:
        super().__init__(name="bench.probe")

    def init(self) -> None:
        Probe.ready.set()

    def terminate(self, exit: Exit) -> None:
        pass

    def ping(self) -> str:
        return "pong"


class Plain(pykka.ThreadingActor):
    def ping(self) -> str:
        return "pong"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def supervised(cycles: int) -> list[float]:
    sup = Supervisor.start(max_restarts=10**9, children=[ChildSpec(id="probe", start=Probe.start)])
    out = []
    for _ in range(cycles):
        old = whereis("bench.probe")
        Probe.ready.clear()
        t0 = time.perf_counter()
        kill("bench.probe")
        Probe.ready.wait(5)
        ref = whereis("bench.probe")
        while ref is None or ref is old:  # init is done; registration precedes it
            ref = whereis("bench.probe")
        ref.ask(PING, timeout=5)
        out.append(time.perf_counter() - t0)
    sup.stop()
    return out


def by_hand(cycles: int) -> list[float]:
    ref = Plain.start()
    out = []
    for _ in range(cycles):
        t0 = time.perf_counter()
        ref.stop(timeout=5)
        ref = Plain.start()
        ref.ask(PING, timeout=5)
        out.append(time.perf_counter() - t0)
    ref.stop()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=2000)
    args = parser.parse_args()
    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(50))
    logging_off()
    supervised(100)  # warm up
    by_hand(100)
    sup = supervised(args.cycles)
    raw = by_hand(args.cycles)
    rows = [
        ("supervised kill -> restarted -> answering", sup),
        ("by hand: stop + start + ask", raw),
    ]
    print(f"restart latency over {args.cycles} cycles (lower is better)")
    print(f"{'':44} {'p50 µs':>9} {'p99 µs':>9} {'p50 ratio':>10}")
    base = statistics.median(sup)
    for label, values in rows:
        p50 = statistics.median(values)
        print(
            f"{label:44} {p50 * 1e6:9.0f} {percentile(values, 0.99) * 1e6:9.0f} {p50 / base:9.2f}x"
        )


def logging_off() -> None:
    import logging

    logging.getLogger("pykka").setLevel(logging.CRITICAL)


if __name__ == "__main__":
    main()
