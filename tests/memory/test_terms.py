"""BM25 terms: English word forms meet, Chinese is segmented, and recall finds both."""

# ruff: noqa: RUF001, RUF002 (full-width Chinese punctuation and Latin letters are meant)

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import memoryd
from memoryd import messages as m
from memoryd.llm import ScriptedModel
from memoryd.memory import Fact, LongTermMemory, MemoryRecord
from memoryd.memory.retrieve import rank
from memoryd.memory.terms import terms

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import recall_bench  # noqa: E402


def rec(rid: str, text: str) -> MemoryRecord:
    return MemoryRecord(id=rid, scope="global", kind="fact", body={"text": text})


def test_word_forms_of_a_question_and_a_fact_give_the_same_terms() -> None:
    """Snowball stems: prefers/prefer, lives/live, drinks/drink meet; stopwords go."""
    question, fact = terms(
        [
            "Which drinks does she prefer, and where does she live?",
            "She prefers drinking tea and lives in Lisbon.",
        ]
    )
    assert {"prefer", "live", "drink"} <= set(question) & set(fact)
    assert "and" not in fact and "in" not in fact


def test_chinese_is_cut_into_words_and_single_characters_count() -> None:
    """A run of Chinese becomes jieba's words (search mode adds the inner words)."""
    [question] = terms(["我的订单号是什么？"])
    assert {"订单", "订单号", "我"} <= set(question)
    [mixed] = terms(["王芳 prefers 乌龙茶 over coffee"])
    assert {"乌龙茶", "prefer", "coffe"} <= set(mixed)


def test_terms_are_deterministic_and_full_width_latin_is_folded() -> None:
    """The same texts give the same terms; ＡＢＣ is abc."""
    texts = ["用户喜欢用中文回答", "The user prefers ＡＢＣ"]
    assert terms(texts) == terms(list(texts))
    assert terms(["ＡＢＣ tests"]) == terms(["abc tests"])


def test_rank_finds_a_preference_asked_about_in_another_word_form() -> None:
    """'What language do I prefer?' finds 'The user prefers answers in Chinese.'."""
    records = [
        rec("lang", "The user prefers answers in Chinese."),
        rec("tz", "The user works in the Berlin time zone."),
        rec("pet", "The user has a beagle named Rex."),
    ]
    assert [r.id for r in rank("What language do I prefer?", records, k=5)][:1] == ["lang"]


def reply(*texts: str) -> str:
    return json.dumps({"facts": [{"scope": "global", "body": {"text": t}} for t in texts]})


def test_the_agently_seeds_chinese_question_recalls_the_stored_order_number() -> None:
    """Told '请记住：我的订单号是 A-100。', the question '我的订单号是什么？' later (in another
    conversation) gets the order number injected, by BM25."""
    store = memoryd.EphemeralStore.start()
    model = ScriptedModel(
        [reply("用户的订单号是 A-100。", "用户喜欢简短的回答。", "用户住在上海。")]
    )
    memory = LongTermMemory(store, llm=model)
    memory.append("support-demo", [m.user("请记住：我的订单号是 A-100。")])
    history = memory.history("later")
    sent = memory.prepare("later", [*history, m.user("我的订单号是什么？")])
    [block] = [x["content"] for x in sent if x["role"] == "system"]
    assert block.splitlines()[1] == "- (fact) 用户的订单号是 A-100。"


def test_a_preference_is_recalled_for_a_question_in_another_word_form() -> None:
    """Through LongTermMemory.recall: the stemmed question finds the preference first."""
    store = memoryd.EphemeralStore.start()
    memory = LongTermMemory(store, llm=ScriptedModel([]))
    for text in (
        "The user prefers answers in Chinese.",
        "The user is called Alice.",
        "The project deploys on Fridays.",
    ):
        memory.remember("s1", Fact(scope="global", kind="preference", body={"text": text}))
    recalled = memory.recall("s2", "What language do I prefer?").records
    assert recalled[0].text == "The user prefers answers in Chinese."


@pytest.mark.parametrize("name", ["en", "zh"])
def test_bm25_recalls_at_least_95_percent_of_each_bench_slice(name: str) -> None:
    """The recall bench's target for BM25: recall@5 >= 0.95 on the English and Chinese
    slices (200 facts, 100 questions each, stored as records of a real store)."""
    facts, questions = recall_bench.build(seed=1)
    told = [f for f in facts if f.language == name]
    asked = [q for q in questions if q.language == name]
    store = memoryd.EphemeralStore.start()
    writer = LongTermMemory(store, llm=ScriptedModel([]))
    for case in told:
        writer.remember(case.session, Fact(scope="global", kind="fact", body={"text": case.text}))
    row = recall_bench.measure("bm25", store, writer.records("bench"), asked, 5)
    assert row.slice_recall(name) >= 0.95


def test_loading_the_chinese_segmenter_writes_nothing_to_stdout_or_stderr() -> None:
    """jieba logs its dictionary loading at DEBUG on stderr by itself; memoryd keeps it quiet,
    and English-only text never loads it."""
    code = (
        "import sys; from memoryd.memory.terms import terms; "
        "terms(['only English here']); loaded = 'jieba' in sys.modules; "
        "terms(['我的订单号是什么']); "
        "assert not loaded and 'jieba' in sys.modules"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert (out.stdout, out.stderr) == ("", "")


@pytest.mark.parametrize("missing", ["Stemmer", "jieba", "bm25s"])
def test_without_the_memory_extra_bm25_says_which_pip_install_to_run(
    monkeypatch: pytest.MonkeyPatch, missing: str
) -> None:
    """A module of the memory extra missing: ImportError naming it and the extra."""
    import memoryd.memory.terms as terms_module

    monkeypatch.setitem(sys.modules, missing, None)
    monkeypatch.setattr(terms_module, "_local", threading.local())
    terms_module._jieba.cache_clear()
    try:
        with pytest.raises(ImportError, match=rf"'{missing}'.*pip install 'memoryd\[memory\]'"):
            terms(["我的订单号是什么"])
    finally:
        terms_module._jieba.cache_clear()
