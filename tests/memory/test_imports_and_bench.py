"""Optional extras stay optional at import time; the recall bench data set is as claimed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import memoryd
from memoryd.memory import LongTermMemory

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import recall_bench  # noqa: E402


def test_importing_memoryd_imports_neither_bm25s_nor_the_dense_stack() -> None:
    """memoryd.LongTermMemory is exported; bm25s, jieba, PyStemmer, numpy, torch and
    sentence-transformers load only on the first retrieval that needs them (checking the
    dense extra does not)."""
    code = (
        "import sys, memoryd, memoryd.memory; "
        "assert memoryd.LongTermMemory is memoryd.memory.LongTermMemory; "
        "from memoryd.memory.dense import require_dense; require_dense(); "
        "heavy = ('bm25s', 'jieba', 'Stemmer', 'numpy', 'torch', 'sentence_transformers'); "
        "print(any(m in sys.modules for m in heavy))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert out.stdout.strip() == "False"
    assert memoryd.LongTermMemory is LongTermMemory


def test_recall_bench_builds_two_slices_of_200_facts_in_50_sessions_and_100_questions() -> None:
    """Per slice (English, Chinese): 200 distinct facts, 4 per session, 100 questions
    drawn from them; the sessions of the two slices are distinct."""
    facts, questions = recall_bench.build(seed=1)
    assert [s.name for s in recall_bench.SLICES] == ["en", "zh"]
    for name in ("en", "zh"):
        told = [f for f in facts if f.language == name]
        asked = [q for q in questions if q.language == name]
        assert len(told) == 200 and len({f.text for f in told}) == 200
        sessions = {f.session for f in told}
        assert len(sessions) == 50
        assert all(sum(f.session == s for f in told) == 4 for s in sessions)
        assert len(asked) == 100 and set(asked) <= set(told)
    assert all(any("\u4e00" <= ch <= "\u9fff" for ch in q.question) for q in questions[100:])
    assert len({f.session for f in facts}) == 100
    assert recall_bench.build(seed=1) == (facts, questions)


def test_recall_bench_measures_a_mode_on_the_stored_set() -> None:
    """measure() runs recall and the in-memory search for each question and agrees."""
    facts, questions = recall_bench.build(seed=1)
    store = memoryd.EphemeralStore.start()
    writer = LongTermMemory(store, llm=recall_bench.ScriptedModel([]))
    for case in facts[:40]:
        writer.remember(
            case.session, recall_bench.Fact(scope="global", kind="fact", body={"text": case.text})
        )
    asked = [q for q in questions if q in facts[:40]][:5]
    row = recall_bench.measure("bm25", store, writer.records("bench"), asked, 5)
    assert row.method == "bm25" and 0.0 <= row.recall_at_k <= 1.0
    assert row.slice_recall("en") == row.recall_at_k and row.slice_recall("zh") == 0.0
    assert len(row.rank_ms) == len(row.recall_ms) == len(asked) > 0
    both = row + row
    assert both.recall_at_k == row.recall_at_k and len(both.rank_ms) == 2 * len(asked)
