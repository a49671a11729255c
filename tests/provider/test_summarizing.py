"""SummarizingProvider with ScriptedModel: summaries as compacted events, and the fallback."""

from __future__ import annotations

from typing import Any

import pytest
from structlog.testing import capture_logs

import memoryd
from memoryd import SummarizingProvider, explain
from memoryd.llm import LLMError, ScriptedModel
from tests.provider.test_safe_window import a, calls, label, r, u


@pytest.fixture
def store() -> memoryd.StoreHandle:
    return memoryd.EphemeralStore.start()


def test_below_the_threshold_nothing_is_summarised(store: memoryd.StoreHandle) -> None:
    """Under max_messages the LLM is not called and history is the stored one."""
    model = ScriptedModel([])
    provider = SummarizingProvider(store, model, max_messages=5, keep_last=2)
    provider.append("c", [u("1"), a("2"), u("3")])
    assert model.calls == []
    assert [m["content"] for m in provider.history("c")] == ["1", "2", "3"]


def test_summary_is_a_compacted_event_naming_the_versions(store: memoryd.StoreHandle) -> None:
    """Past the threshold the older messages become one system message; the log is kept."""
    model = ScriptedModel(["Alice asked about orders."])
    provider = SummarizingProvider(store, model, max_messages=4, keep_last=2)
    provider.append("c", [u("I am Alice")])
    provider.append("c", [a("Hi Alice")])
    provider.append("c", [u("orders?"), a("two orders")])
    provider.append("c", [u("which?")])
    history = provider.history("c")
    assert history[0]["role"] == "system"
    assert history[0]["content"].endswith("Alice asked about orders.")
    assert [m["content"] for m in history[1:]] == ["two orders", "which?"]
    compacted = [e for e in store.events("c") if e.kind == "compacted"]
    assert len(compacted) == 1
    assert compacted[0].data == {
        "replaces": {"from_version": 1, "to_version": 3},
        "replaced_messages": 3,
        "summarised": 3,
    }
    assert len(store.get("c")) == 5
    assert "I am Alice" in model.calls[0][1]["content"]


def test_second_summary_builds_on_the_first(store: memoryd.StoreHandle) -> None:
    """A later summary includes the earlier one and replaces more messages."""
    model = ScriptedModel(["first summary", "second summary"])
    provider = SummarizingProvider(store, model, max_messages=3, keep_last=1)
    for i in range(4):
        provider.append("c", [u(f"m{i}")])
    for i in range(4, 7):
        provider.append("c", [u(f"m{i}")])
    assert "first summary" in model.calls[1][1]["content"]
    history = provider.history("c")
    assert history[0]["content"].endswith("second summary")
    assert [m["content"] for m in history[1:]] == ["m6"]
    assert provider.compaction("c")["replaced_messages"] == 6  # type: ignore[index]


def test_tool_pairs_are_never_split(store: memoryd.StoreHandle) -> None:
    """The kept part starts at the tool call, never at one of its results."""
    model = ScriptedModel(["summary"])
    provider = SummarizingProvider(store, model, max_messages=4, keep_last=2)
    provider.append("c", [u("1"), a("2"), u("look it up"), calls("x", "y"), r("x"), r("y")])
    history = provider.history("c")
    assert [label(m) for m in history[1:]] == ["c:x,y", "r:x", "r:y"]


def test_llm_failure_falls_back_to_the_safe_window_and_logs(store: memoryd.StoreHandle) -> None:
    """A failing LLM records nothing, logs why, and prepare sends the safe window."""
    model = ScriptedModel([LLMError("model down")])
    provider = SummarizingProvider(store, model, max_messages=3, keep_last=1)
    with capture_logs() as logs:
        version = provider.append("c", [u("1"), a("2"), u("3"), calls("x"), r("x"), a("5")])
    assert version == 1
    assert [e.kind for e in store.events("c")] == ["appended"]
    failures = [entry for entry in logs if entry["event"] == "summary_failed"]
    assert len(failures) == 1
    assert "model down" in failures[0]["error"]
    sent = provider.prepare("c", provider.history("c"))
    assert [label(m) for m in sent] == ["c:x", "r:x", "5"]


def test_token_threshold_summarises(store: memoryd.StoreHandle) -> None:
    """max_tokens with a counter triggers a summary as well."""
    model = ScriptedModel(["short"])
    provider = SummarizingProvider(store, model, max_tokens=3, keep_last=1, counter=lambda m: 1)
    provider.append("c", [u("1"), u("2"), u("3"), u("4")])
    assert [m["content"] for m in provider.history("c")][1:] == ["4"]


def test_explain_reports_the_summary_and_the_window(store: memoryd.StoreHandle) -> None:
    """explain names the summary in effect and what each step dropped."""
    provider = SummarizingProvider(store, ScriptedModel(["sum"]), max_messages=2, keep_last=1)
    provider.append("c", [u("1"), u("2"), u("3")])
    report = explain(provider, "c")
    assert report.summary is not None
    assert report.stored == 3
    assert report.loaded == 2
    text = str(report)
    assert "versions 1..1 (2 messages)" in text


def test_bad_arguments_raise(store: memoryd.StoreHandle) -> None:
    """Thresholds, keep_last and the llm are checked."""
    model = ScriptedModel([])
    with pytest.raises(ValueError, match="exactly one"):
        SummarizingProvider(store, model)
    with pytest.raises(ValueError, match="exactly one"):
        SummarizingProvider(store, model, max_messages=3, max_tokens=3)
    with pytest.raises(ValueError, match="keep_last"):
        SummarizingProvider(store, model, max_messages=3, keep_last=3)
    with pytest.raises(TypeError, match="ChatModel"):
        SummarizingProvider(store, object(), max_messages=3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_messages"):
        SummarizingProvider(store, model, max_messages=-1)


def test_summary_reply_without_text_is_a_failure(store: memoryd.StoreHandle) -> None:
    """A reply with no text is not recorded as a summary."""
    reply: dict[str, Any] = memoryd.messages.assistant(
        tool_calls=[memoryd.messages.tool_call("t", "f", {})]
    )
    provider = SummarizingProvider(store, ScriptedModel([reply]), max_messages=1, keep_last=0)
    provider.append("c", [u("1"), u("2")])
    assert provider.compaction("c") is None
    with pytest.raises(LLMError):
        SummarizingProvider(store, ScriptedModel([reply]), max_messages=1, keep_last=0).compact("c")
