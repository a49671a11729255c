"""LLM query planning (plan_queries=True) with ScriptedModel: queries, fallbacks, purity."""

from __future__ import annotations

import json
from typing import Any

import pytest
from structlog.testing import capture_logs

import memoryd
from memoryd import messages as m
from memoryd.llm import LLMError, ScriptedModel
from memoryd.memory import LongTermMemory
from tests.memory.test_long_term import fact, facts, memory_of

NOTES = ["Alice drinks green tea", "The deploy runs on Fridays", "Bob's dog is called Rex"]


@pytest.fixture
def store() -> memoryd.StoreHandle:
    return memoryd.EphemeralStore.start()


def planned(
    store: memoryd.StoreHandle, replies: list[Any], **options: Any
) -> tuple[LongTermMemory, ScriptedModel]:
    """A planning memory holding NOTES as global records; ``replies`` follow extraction."""
    model = ScriptedModel([facts(*map(fact, NOTES)), *replies])
    memory = LongTermMemory(store, llm=model, plan_queries=True, **options)
    memory.append("notes", [m.user("notes")])
    return memory, model


def test_planned_queries_replace_the_raw_turn(store: memoryd.StoreHandle) -> None:
    """The LLM's queries are searched: records the turn's own words would miss are found."""
    memory, model = planned(store, ['{"queries": ["deploy day", "dog name"]}'])
    with capture_logs() as logs:
        recall = memory.recall("s", "What should I remember about this week?")
    assert {r.text for r in recall.records} == {NOTES[1], NOTES[2]}
    assert recall.diagnostics == () and logs == []
    request = model.calls[1]
    assert request[0]["role"] == "system" and '"queries"' in request[0]["content"]
    assert request[1]["content"] == "User message: What should I remember about this week?"
    assert model.remaining == 0


@pytest.mark.parametrize(
    "reply",
    [
        "deploy day, dog name",
        '{"queries": []}',
        '{"queries": "deploy"}',
        m.assistant(tool_calls=[m.tool_call("c", "f", {})]),
        LLMError("rate limited"),
    ],
    ids=["not-json", "empty-list", "not-a-list", "no-text", "llm-error"],
)
def test_a_failed_plan_falls_back_to_the_raw_turn_with_a_diagnostic(
    store: memoryd.StoreHandle, reply: Any
) -> None:
    """Bad planning output or an LLM error: never raised, the turn is searched as is."""
    memory, _ = planned(store, [reply])
    with capture_logs() as logs:
        recall = memory.recall("s", "does Alice drink tea?")
    assert [r.text for r in recall.records] == [NOTES[0]]
    [diagnostic] = recall.diagnostics
    assert diagnostic.event == "memory_plan_failed"
    assert diagnostic.fields["fallback"] == "raw_query" and diagnostic.fields["error"]
    [event] = [x for x in logs if x["event"] == "memory_plan_failed"]
    assert event["conversation"] == "s" and event["log_level"] == "warning"


@pytest.mark.parametrize("query", ["", "   \n"])
def test_an_empty_query_recalls_nothing_and_calls_no_llm(
    store: memoryd.StoreHandle, query: str
) -> None:
    """A blank turn: no planning call, no records, no error."""
    memory, model = planned(store, [], rerank=True)
    recall = memory.recall("s", query)
    assert recall.records == () and recall.diagnostics == ()
    assert len(model.calls) == 1  # the extraction only


def test_no_records_means_no_planning_call(store: memoryd.StoreHandle) -> None:
    """With nothing stored there is nothing to plan for: no LLM call."""
    model = ScriptedModel([])
    memory = LongTermMemory(store, llm=model, plan_queries=True)
    assert memory.recall("s", "anything about Alice?").records == ()
    assert model.calls == []


def test_planning_never_runs_inside_prepare(store: memoryd.StoreHandle) -> None:
    """prepare makes no LLM call: it injects the planned recall cached for the same turn."""
    memory, model = planned(store, ['{"queries": ["dog name"]}'])
    turn = "Tell me about the pets"
    history = memory.history("s")
    assert memory_of(memory.prepare("s", [*history, m.user(turn)])) == []  # raw turn: no hit
    calls = len(model.calls)
    memory.recall("s", turn)
    [block] = memory_of(memory.prepare("s", [*history, m.user(turn)]))
    assert NOTES[2] in block
    assert len(model.calls) == calls + 1  # the recall's planning call, none in prepare


def test_max_queries_limits_the_searched_queries(store: memoryd.StoreHandle) -> None:
    """With max_queries=1 only the first planned query is searched."""
    memory, _ = planned(store, ['{"queries": ["dog name", "deploy day"]}'], max_queries=1)
    assert [r.text for r in memory.recall("s", "what is up?").records] == [NOTES[2]]


def test_planning_then_rerank_against_the_users_turn(store: memoryd.StoreHandle) -> None:
    """The rerank sees the original turn and the planned candidates; diagnostics add up."""

    def choose(sent: list[dict[str, Any]]) -> str:
        prompt = sent[-1]["content"]
        assert prompt.startswith("Question: Anything about the dog or the deploy?")
        ids = [line.split("]")[0][1:] for line in prompt.splitlines() if "Rex" in line]
        return json.dumps({"ids": ids})

    memory, model = planned(store, ["not json", choose], rerank=True)
    recall = memory.recall("s", "Anything about the dog or the deploy?")
    assert [r.text for r in recall.records] == [NOTES[2]]
    assert [d.event for d in recall.diagnostics] == ["memory_plan_failed"]
    assert model.remaining == 0


def test_the_recall_filter_plans_once_per_agent_run(store: memoryd.StoreHandle) -> None:
    """In an Agent with rerank_filter(), the run's first LLM call is preceded by one plan."""
    LongTermMemory(store, llm=ScriptedModel([facts(*map(fact, NOTES))])).append(
        "old", [m.user("notes")]
    )
    model = ScriptedModel(['{"queries": ["dog name"]}', "Rex.", facts()])
    memory = LongTermMemory(store, llm=model, plan_queries=True)
    agent = memoryd.Agent(llm=model, memory=memory, filters=[memory.rerank_filter()])
    assert agent.run("What is the pet called?", conversation_id="new").text == "Rex."
    assert model.calls[0][-1]["content"] == "User message: What is the pet called?"
    assert NOTES[2] in memory_of(model.calls[1])[0]
    assert model.remaining == 0
