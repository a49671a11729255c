#!/usr/bin/env python3
"""Benchmark: recall@5 and latency of long-term memory retrieval: BM25, dense, hybrid.

A seeded synthetic set in two slices, English and Chinese, each 40 people x 5 attributes
= 200 facts, told across 50 sessions (4 facts each); each slice is stored as global
memory records in an EphemeralStore of its own through `LongTermMemory.remember`. Each slice
has 100 questions, each about one known fact, phrased with other words or word forms
than the fact where the language allows (``"Where does Mira Okafor live?"`` for
``"Mira Okafor lives in Lisbon"``, ``"王伟在学习哪种语言"`` for ``"王伟正在学习韩语。"``).
Each retrieval mode of `LongTermMemory` runs on the same set in the same run (``bm25``:
bm25s; ``dense``: all-MiniLM-L6-v2 from the ``dense`` extra; ``hybrid``: both fused by
reciprocal rank). For each question:

* recall@5: the fact's record is among the 5 records returned (printed overall and per
  slice);
* rank latency: `Searcher.search` over a slice's 200 records in memory (what ``prepare``
  does; for dense, embedding the query plus a matrix product, the records' embeddings
  being cached);
* recall latency: `LongTermMemory.recall` (reads and folds the records from the store,
  then ranks), what a caller pays per request.

Ratios are against BM25 measured in the same run. The dense model is loaded once before
the timings (its load time and the cold embedding of the records are printed apart).
Torch runs on ``--threads`` CPU threads (default 1: on a small shared machine more
threads mostly wait on each other). Without the ``dense`` extra only BM25 is measured;
``--methods bm25`` measures only BM25.

    python tools/recall_bench.py
    python tools/recall_bench.py --seed 7 --threads 2
    python tools/recall_bench.py --methods bm25
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
# The Chinese slice: the same attributes and values, names surname first, and questions
# that, like the English ones, share the attribute's word with the fact but not its form
# (no inflection in Chinese: a question word or a measure word differs instead).
FIRST_ZH = [
    "伟",
    "芳",
    "娜",
    "敏",
    "静",
    "磊",
    "洋",
    "艳",
    "勇",
    "军",
    "杰",
    "娟",
    "涛",
    "明",
    "超",
    "秀英",
    "霞",
    "平",
    "刚",
    "桂英",
]
LAST_ZH = ["王", "李"]
ATTRIBUTES_ZH: dict[str, tuple[str, str, list[str]]] = {
    "city": (
        "{p}住在{v}。",
        "{p}住在哪里？",  # noqa: RUF001 (Chinese punctuation)
        ["里斯本", "大阪", "内罗毕", "多伦多", "克拉科夫", "基多", "河内", "都柏林"],
    ),
    "pet": (
        "{p}养了一只{v}。",
        "{p}养的是什么宠物？",  # noqa: RUF001 (Chinese punctuation)
        ["鹦鹉", "乌龟", "比格犬", "雪貂", "金鱼", "虎斑猫", "兔子"],
    ),
    "drink": (
        "{p}最喜欢喝{v}。",
        "{p}喜欢喝什么饮料？",  # noqa: RUF001 (Chinese punctuation)
        ["抹茶", "浓缩咖啡", "路易波士茶", "康普茶", "乌龙茶", "冷萃咖啡"],
    ),
    "employer": (
        "{p}在{v}工作。",
        "{p}在哪家公司工作？",  # noqa: RUF001 (Chinese punctuation)
        ["顶点机器人", "蓝港银行", "北光实验室", "阳峰食品"],
    ),
    "language": (
        "{p}正在学习{v}。",
        "{p}在学习哪种语言？",  # noqa: RUF001 (Chinese punctuation)
        ["葡萄牙语", "韩语", "斯瓦希里语", "芬兰语", "他加禄语", "希腊语"],
    ),
}


@dataclass(frozen=True, slots=True)
class Slice:
    """One language's people and attributes."""

    name: str
    people: list[str]
    attributes: dict[str, tuple[str, str, list[str]]]


SLICES = [
    Slice("en", [f"{first} {last}" for last in LAST for first in FIRST], ATTRIBUTES),
    Slice("zh", [f"{last}{first}" for last in LAST_ZH for first in FIRST_ZH], ATTRIBUTES_ZH),
]
FACTS_PER_SLICE = 200
QUESTIONS_PER_SLICE = 100
FACTS_PER_SESSION = 4


@dataclass(frozen=True, slots=True)
class Case:
    """A fact, the session it was told in, a question it answers, and its slice."""

    session: str
    text: str
    question: str
    language: str = "en"


def build(seed: int) -> tuple[list[Case], list[Case]]:
    """Each slice's 200 facts (in 50 sessions) and 100 questions, deterministically.

    Args:
        seed: The random seed.

    Returns:
        ``(facts, questions)``, slice after slice; each question is one of the facts.
    """
    rng = random.Random(seed)
    facts: list[Case] = []
    questions: list[Case] = []
    for part in SLICES:
        cases = []
        for person in part.people:
            for fact_template, question_template, values in part.attributes.values():
                value = rng.choice(values)
                cases.append(
                    Case(
                        "",
                        fact_template.format(p=person, v=value),
                        question_template.format(p=person),
                        part.name,
                    )
                )
        rng.shuffle(cases)
        first = len(facts) // FACTS_PER_SESSION
        told = [
            Case(f"session-{first + i // FACTS_PER_SESSION}", c.text, c.question, part.name)
            for i, c in enumerate(cases)
        ]
        facts.extend(told)
        questions.extend(rng.sample(told, QUESTIONS_PER_SLICE))
    return facts, questions


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values``, nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


@dataclass(frozen=True, slots=True)
class Row:
    """One retrieval mode's figures: whether each question's fact was recalled, by slice."""

    method: str
    hits: dict[str, list[bool]]
    rank_ms: list[float]
    recall_ms: list[float]

    @property
    def recall_at_k(self) -> float:
        """The share of all questions whose fact was recalled."""
        found = [hit for slice_hits in self.hits.values() for hit in slice_hits]
        return sum(found) / len(found)

    def slice_recall(self, name: str) -> float:
        """The share of one slice's questions whose fact was recalled."""
        found = self.hits.get(name, [])
        return sum(found) / len(found) if found else 0.0

    def __add__(self, other: Row) -> Row:
        """The figures of one mode over two sets of questions."""
        hits = {name: list(found) for name, found in self.hits.items()}
        for name, found in other.hits.items():
            hits.setdefault(name, []).extend(found)
        return Row(
            self.method, hits, self.rank_ms + other.rank_ms, self.recall_ms + other.recall_ms
        )


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
    hits: dict[str, list[bool]] = {}
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
        hits.setdefault(case.language, []).append(any(r.text == case.text for r in recalled))
    return Row(method, hits, rank_ms, recall_ms)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print a table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("-k", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (dense)")
    parser.add_argument(
        "--methods",
        default=",".join(RETRIEVALS),
        help=f"comma-separated retrieval modes to measure, among {', '.join(RETRIEVALS)}",
    )
    args = parser.parse_args(argv)
    configure(level="warning")
    facts, questions = build(args.seed)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = [m for m in methods if m not in RETRIEVALS]
    if not methods or unknown or methods[0] != "bm25":
        parser.error(f"--methods must start with bm25 and name only {', '.join(RETRIEVALS)}")
    notes: list[str] = []
    loaded_s = 0.0
    if methods != ["bm25"]:
        try:
            started = time.perf_counter()
            load_model()
            loaded_s = time.perf_counter() - started
            import torch  # the `dense` extra

            torch.set_num_threads(args.threads)
        except DenseUnavailable as exc:
            notes.append(f"dense and hybrid not measured: {exc}")
            methods = ["bm25"]
    rows: dict[str, Row] = {}
    try:
        for part in SLICES:
            told = [c for c in facts if c.language == part.name]
            asked = [c for c in questions if c.language == part.name]
            store = memoryd.EphemeralStore.start()
            writer = LongTermMemory(store, llm=ScriptedModel([]))
            for case in told:
                writer.remember(
                    case.session, Fact(scope="global", kind="fact", body={"text": case.text})
                )
            records = writer.records("bench")
            assert len(records) == len(told), "every fact must be its own record"
            if "dense" in methods:
                started = time.perf_counter()
                Searcher("dense").warm(records)
                embed_s = time.perf_counter() - started
                notes.append(
                    f"{part.name}: cold embedding of {len(records)} records {embed_s * 1000:.0f} ms"
                )
            for method in methods:
                row = measure(method, store, records, asked, args.k)
                rows[method] = rows[method] + row if method in rows else row
            store.stop()
    finally:
        memoryd.shutdown()
    if "dense" in methods:
        notes.append(
            f"dense model load {loaded_s:.1f} s (once per process); torch threads {args.threads}"
        )
    names = [part.name for part in SLICES]
    print(
        f"{len(facts)} facts in {len({c.session for c in facts})} sessions, "
        f"{len(questions)} questions, seed {args.seed}; slices: "
        + ", ".join(
            f"{name} {sum(c.language == name for c in facts)} facts / "
            f"{sum(c.language == name for c in questions)} questions"
            for name in names
        )
    )
    base = rows["bm25"]
    base_rank = percentile(base.rank_ms, 0.5)
    base_recall = percentile(base.recall_ms, 0.5)
    print(
        f"{'method':<8}{'recall@' + str(args.k):>10}"
        + "".join(f"{name:>6}" for name in names)
        + f"{'x bm25':>8}"
        f"{'rank p50 ms':>13}{'x bm25':>8}{'recall p50 ms':>15}{'x bm25':>8}{'recall p95 ms':>15}"
    )
    for row in rows.values():
        rank_p50 = percentile(row.rank_ms, 0.5)
        recall_p50 = percentile(row.recall_ms, 0.5)
        print(
            f"{row.method:<8}{row.recall_at_k:>10.2f}"
            + "".join(f"{row.slice_recall(name):>6.2f}" for name in names)
            + f"{row.recall_at_k / base.recall_at_k:>8.2f}"
            f"{rank_p50:>13.2f}{rank_p50 / base_rank:>8.2f}"
            f"{recall_p50:>15.2f}{recall_p50 / base_recall:>8.2f}"
            f"{percentile(row.recall_ms, 0.95):>15.2f}"
        )
    for note in notes:
        print(note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
