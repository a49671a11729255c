#!/usr/bin/env python3
"""Benchmark: recall@5 and latency of long-term memory retrieval (BM25 via bm25s).

A seeded synthetic set: 40 people x 5 attributes = 200 facts, told across 50 sessions
(4 facts each) and stored as global memory records in an EphemeralStore through
`LongTermMemory.remember`; 100 questions, each about one known fact, phrased with other
words than the fact where the language allows (``"Where does Mira Okafor live?"`` for
``"Mira Okafor lives in Lisbon"``). For each question:

* recall@5: the fact's record is among the 5 records returned;
* rank latency: `memoryd.memory.retrieve.rank` over the 200 records in memory (what
  ``prepare`` does);
* recall latency: `LongTermMemory.recall` (reads and folds the records from the store,
  then ranks), what a caller pays per request.

Dense retrieval (the ``dense`` extra) is not measured: its package is not installed here.

    python tools/recall_bench.py
    python tools/recall_bench.py --seed 7
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import memoryd
from memoryd.llm import ScriptedModel
from memoryd.memory import Fact, LongTermMemory
from memoryd.memory.retrieve import rank

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


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print a table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("-k", type=int, default=5)
    args = parser.parse_args(argv)
    facts, questions = build(args.seed)
    store = memoryd.EphemeralStore.start()
    try:
        memory = LongTermMemory(store, llm=ScriptedModel([]), top_k=args.k)
        for case in facts:
            memory.remember(
                case.session, Fact(scope="global", kind="fact", body={"text": case.text})
            )
        records = memory.records("bench")
        assert len(records) == len(facts), "every fact must be its own record"
        rank(questions[0].question, records, k=args.k)  # warm up (imports bm25s)
        hits_rank = hits_recall = 0
        rank_ms: list[float] = []
        recall_ms: list[float] = []
        for case in questions:
            started = time.perf_counter()
            ranked = rank(case.question, records, k=args.k)
            rank_ms.append((time.perf_counter() - started) * 1000)
            hits_rank += any(r.text == case.text for r in ranked)
            started = time.perf_counter()
            recalled = memory.recall(case.session, case.question).records
            recall_ms.append((time.perf_counter() - started) * 1000)
            hits_recall += any(r.text == case.text for r in recalled)
    finally:
        memoryd.shutdown()
    n = len(questions)
    print(
        f"{len(facts)} facts in {len({c.session for c in facts})} sessions, {n} questions, "
        f"seed {args.seed}"
    )
    print(f"{'method':<32}{'recall@' + str(args.k):>10}{'p50 ms':>10}{'p95 ms':>10}{'mean ms':>10}")
    for name, hits, times in (
        ("BM25 rank (in memory)", hits_rank, rank_ms),
        ("BM25 recall (store read+rank)", hits_recall, recall_ms),
    ):
        print(
            f"{name:<32}{hits / n:>10.2f}{percentile(times, 0.5):>10.2f}"
            f"{percentile(times, 0.95):>10.2f}{statistics.fmean(times):>10.2f}"
        )
    print("dense (all-MiniLM-L6-v2): not measured, the `dense` extra is not installed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
