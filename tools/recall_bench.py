#!/usr/bin/env python3
"""Benchmark: recall@5 and latency of long-term memory retrieval: BM25, dense, hybrid.

A seeded synthetic set: 40 people x 5 attributes = 200 facts, told across 50 sessions
(4 facts each) and stored as global memory records in an EphemeralStore through
`LongTermMemory.remember`; 100 questions, each about one known fact, phrased with other
words than the fact where the language allows (``"Where does Mira Okafor live?"`` for
``"Mira Okafor lives in Lisbon"``). Each retrieval mode of `LongTermMemory` runs on the
same set in the same run (``bm25``: bm25s; ``dense``: all-MiniLM-L6-v2 from the ``dense``
extra; ``hybrid``: both fused by reciprocal rank). For each question:

* recall@5: the fact's record is among the 5 records returned;
* rank latency: `Searcher.search` over the 200 records in memory (what ``prepare``
  does; for dense, embedding the query plus a matrix product, the records' embeddings
  being cached);
* recall latency: `LongTermMemory.recall` (reads and folds the records from the store,
  then ranks), what a caller pays per request.

Ratios are against BM25 measured in the same run. The dense model is loaded once before
the timings (its load time and the cold embedding of the 200 records are printed apart).
Torch runs on ``--threads`` CPU threads (default 1: on a small shared machine more
threads mostly wait on each other). Without the ``dense`` extra only BM25 is measured.

    python tools/recall_bench.py
    python tools/recall_bench.py --seed 7 --threads 2
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import memoryd
from memoryd.llm import ScriptedModel
from memoryd.logging import configure
from memoryd.memory import RETRIEVALS, DenseUnavailable, Fact, LongTermMemory, MemoryRecord
from memoryd.memory.dense import load_model
from memoryd.memory.search import Searcher

FIRST = [
    "Mira",
    "Tomas",
    "Aiko",
    "Lena",
    "Ravi",
    "Sofia",
    "Jonas",
    "Amara",
    "Felix",
    "Noor",
    "Pavel",
    "Ines",
    "Kenji",
    "Zara",
    "Oskar",
    "Leila",
    "Mateo",
    "Hana",
    "Emil",
    "Yara",
]
LAST = ["Okafor", "Lindqvist"]
ATTRIBUTES: dict[str, tuple[str, str, list[str]]] = {
    # attribute: (fact template, question template, values)
    "city": (
        "{p} lives in {v}",
        "Where does {p} live?",
        ["Lisbon", "Osaka", "Nairobi", "Toronto", "Krakow", "Quito", "Hanoi", "Dublin"],
    ),
    "pet": (
        "{p} has a pet {v}",
        "What pet does {p} have?",
        ["parrot", "tortoise", "beagle", "ferret", "goldfish", "tabby cat", "rabbit"],
    ),
    "drink": (
        "{p} prefers {v} over other drinks",
        "Which drink does {p} prefer?",
        ["matcha", "espresso", "rooibos", "kombucha", "oolong", "cold brew"],
    ),
    "employer": (
        "{p} works at {v}",
        "Where does {p} work?",
        ["Acme Robotics", "Blue Harbor Bank", "Nordlicht Labs", "Sunpeak Foods"],
    ),
    "language": (
        "{p} is learning {v}",
        "Which language is {p} learning?",
        ["Portuguese", "Korean", "Swahili", "Finnish", "Tagalog", "Greek"],
    ),
}


@dataclass(frozen=True, slots=True)
class Case:
    """A fact, the session it was told in, and a question it answers."""

    session: str
    text: str
    question: str


def build(seed: int) -> tuple[list[Case], list[Case]]:
    """The 200 facts (in 50 sessions) and the 100 questions, deterministically.

    Args:
        seed: The random seed.

    Returns:
        ``(facts, questions)``; each question is one of the facts.
    """
    rng = random.Random(seed)
    people = [f"{first} {last}" for last in LAST for first in FIRST]
    cases = []
    for person in people:
        for fact_template, question_template, values in ATTRIBUTES.values():
            value = rng.choice(values)
            cases.append(
                Case(
                    "", fact_template.format(p=person, v=value), question_template.format(p=person)
                )
            )
    rng.shuffle(cases)
    facts = [Case(f"session-{i // 4}", c.text, c.question) for i, c in enumerate(cases)]
    return facts, rng.sample(facts, 100)


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values``, nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


@dataclass(frozen=True, slots=True)
class Row:
    """One retrieval mode's figures."""

    method: str
    recall_at_k: float
    rank_ms: list[float]
    recall_ms: list[float]


def measure(
    method: str,
    store: memoryd.StoreHandle,
    records: list[MemoryRecord],
    questions: list[Case],
    k: int,
) -> Row:
    """recall@k and the latencies of one retrieval mode on the stored set.

    Args:
        method: ``"bm25"``, ``"dense"`` or ``"hybrid"``.
        store: The store holding the records.
        records: The records, as `LongTermMemory.records` read them.
        questions: The questions.
        k: How many records are returned.

    Returns:
        The figures.
    """
    memory = LongTermMemory(store, llm=ScriptedModel([]), top_k=k, retrieval=method)
    searcher = Searcher(method, min_similarity=memory.min_similarity)
    searcher.warm(records)
    memory.records("warm-up")
    searcher.search([questions[0].question], records, k=k)  # warm up (imports, caches)
    hits = 0
    rank_ms: list[float] = []
    recall_ms: list[float] = []
    for case in questions:
        started = time.perf_counter()
        ranked = searcher.search([case.question], records, k=k)
        rank_ms.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        recalled = memory.recall(case.session, case.question).records
        recall_ms.append((time.perf_counter() - started) * 1000)
        assert [r.id for r in ranked] == [r.id for r in recalled], "prepare and recall agree"
        hits += any(r.text == case.text for r in recalled)
    return Row(method, hits / len(questions), rank_ms, recall_ms)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print a table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("-k", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (dense)")
    args = parser.parse_args(argv)
    configure(level="warning")
    facts, questions = build(args.seed)
    methods = list(RETRIEVALS)
    notes: list[str] = []
    try:
        started = time.perf_counter()
        load_model()
        loaded_s = time.perf_counter() - started
        import torch  # the `dense` extra

        torch.set_num_threads(args.threads)
    except DenseUnavailable as exc:
        methods = ["bm25"]
        notes.append(f"dense and hybrid not measured: {exc}")
    store = memoryd.EphemeralStore.start()
    rows: list[Row] = []
    try:
        writer = LongTermMemory(store, llm=ScriptedModel([]))
        for case in facts:
            writer.remember(
                case.session, Fact(scope="global", kind="fact", body={"text": case.text})
            )
        records = writer.records("bench")
        assert len(records) == len(facts), "every fact must be its own record"
        if "dense" in methods:
            started = time.perf_counter()
            Searcher("dense").warm(records)
            embed_s = time.perf_counter() - started
            notes.append(
                f"dense model load {loaded_s:.1f} s (once per process); cold embedding of "
                f"{len(records)} records {embed_s * 1000:.0f} ms; torch threads {args.threads}"
            )
        rows = [measure(method, store, records, questions, args.k) for method in methods]
    finally:
        memoryd.shutdown()
    print(
        f"{len(facts)} facts in {len({c.session for c in facts})} sessions, "
        f"{len(questions)} questions, seed {args.seed}"
    )
    base = rows[0]
    base_rank = percentile(base.rank_ms, 0.5)
    base_recall = percentile(base.recall_ms, 0.5)
    print(
        f"{'method':<8}{'recall@' + str(args.k):>10}{'x bm25':>8}"
        f"{'rank p50 ms':>13}{'x bm25':>8}{'recall p50 ms':>15}{'x bm25':>8}{'recall p95 ms':>15}"
    )
    for row in rows:
        rank_p50 = percentile(row.rank_ms, 0.5)
        recall_p50 = percentile(row.recall_ms, 0.5)
        print(
            f"{row.method:<8}{row.recall_at_k:>10.2f}{row.recall_at_k / base.recall_at_k:>8.2f}"
            f"{rank_p50:>13.2f}{rank_p50 / base_rank:>8.2f}"
            f"{recall_p50:>15.2f}{recall_p50 / base_recall:>8.2f}"
            f"{percentile(row.recall_ms, 0.95):>15.2f}"
        )
    for note in notes:
        print(note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
