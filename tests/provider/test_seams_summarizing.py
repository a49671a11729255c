"""Seams a beamai or Agently user finds on a summarising provider (a persona, a session)."""

from __future__ import annotations

import pathlib

import memoryd
from memoryd import messages
from memoryd.llm import ScriptedModel

PERSONA = messages.system("You are Pirate Pete. Always say Arr.")


def _summaries() -> ScriptedModel:
    return ScriptedModel([lambda sent: "they talked"] * 20)


def _talk(store: memoryd.StoreHandle, provider: memoryd.SummarizingProvider, turns: int) -> None:
    store.add("s", [PERSONA])
    for i in range(turns):
        provider.append("s", [messages.user(f"q{i}"), messages.assistant(f"a{i}")])


def test_a_stored_persona_stays_verbatim_at_the_head_after_a_summary(
    tmp_path: pathlib.Path,
) -> None:
    """The persona is not folded into the summary: history starts with it, then the summary."""
    store = memoryd.LmdbStore.start(tmp_path / "chat")
    provider = memoryd.SummarizingProvider(store, _summaries(), max_messages=4, keep_last=2)
    _talk(store, provider, 3)
    history = provider.history("s")
    assert history[0] == PERSONA
    assert history[1]["content"].endswith("they talked")
    assert history[2:] == [messages.user("q2"), messages.assistant("a2")]


def test_a_persona_survives_a_second_summary_and_a_restart(tmp_path: pathlib.Path) -> None:
    """A summary of a summary keeps the persona once, ahead of it, also after a restart."""
    store = memoryd.LmdbStore.start(tmp_path / "chat")
    model = _summaries()
    provider = memoryd.SummarizingProvider(store, model, max_messages=4, keep_last=2)
    _talk(store, provider, 6)
    assert len(model.calls) >= 2
    assert all("Pirate Pete" not in call[-1]["content"] for call in model.calls)
    memoryd.shutdown()
    store = memoryd.LmdbStore.start(tmp_path / "chat")
    provider = memoryd.SummarizingProvider(store, _summaries(), max_messages=4, keep_last=2)
    history = provider.history("s")
    assert next(m for m in history if m["role"] == "system") == PERSONA
    assert sum(1 for m in history if m == PERSONA) == 1


def test_a_session_window_on_a_summarising_provider_holds_the_summary(
    tmp_path: pathlib.Path,
) -> None:
    """`Session.context_window` is what a run sends: the persona, the summary, the rest."""
    store = memoryd.LmdbStore.start(tmp_path / "chat")
    provider = memoryd.SummarizingProvider(store, _summaries(), max_messages=4, keep_last=2)
    _talk(store, provider, 3)
    session = memoryd.Session("s", provider, max_length=None)
    assert session.context_window == provider.history("s")
    assert len(session.full_context) == 7  # the store keeps every message
