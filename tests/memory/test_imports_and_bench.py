"""bm25s stays optional at import time; the recall benchmark's data set is what it claims."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import memoryd
from memoryd.memory import LongTermMemory

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import recall_bench  # noqa: E402


def test_importing_memoryd_does_not_import_bm25s() -> None:
    """memoryd.LongTermMemory is exported, and bm25s loads only on the first retrieval."""
    code = (
        "import sys, memoryd, memoryd.memory; "
        "assert memoryd.LongTermMemory is memoryd.memory.LongTermMemory; "
        "print('bm25s' in sys.modules)"
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


def test_recall_bench_builds_200_facts_in_50_sessions_and_100_known_questions() -> None:
    """The synthetic set: 200 distinct facts, 4 per session, 100 questions drawn from them."""
    facts, questions = recall_bench.build(seed=1)
    assert len(facts) == 200 and len({f.text for f in facts}) == 200
    sessions = {f.session for f in facts}
    assert len(sessions) == 50
    assert all(sum(f.session == s for f in facts) == 4 for s in sessions)
    assert len(questions) == 100 and set(questions) <= set(facts)
    assert recall_bench.build(seed=1) == (facts, questions)
