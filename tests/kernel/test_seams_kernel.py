"""Seams a beamai user finds on the kernel path (one-off invokes under a retry filter)."""

from __future__ import annotations

import pathlib
from typing import Any

import memoryd
from memoryd import messages
from memoryd.llm import LLMError, ScriptedModel


class Retry(memoryd.Filter):
    """Re-runs the inner chain with the same request when the LLM fails (beamai's hazard)."""

    def around_chat(self, request: memoryd.ChatRequest, next: Any) -> dict[str, Any]:
        try:
            return next(request)
        except LLMError:
            return next(request)


def test_one_off_invoke_under_an_outer_retry_sends_its_delta_once(tmp_path: pathlib.Path) -> None:
    """A retry outside the memory filter re-runs a step; the one-off history holds it once."""
    store = memoryd.LmdbStore.start(tmp_path / "chat")
    model = ScriptedModel([LLMError("rate limited"), "hello", LLMError("again"), "done"])
    kernel = memoryd.Kernel(llm=model, filters=[Retry(), memoryd.memory_filter(store)])
    kernel.invoke([messages.user("one-off")])
    assert model.calls[1] == [messages.user("one-off")]
    assert store.conversations() == []


def test_one_off_tool_loop_under_an_outer_retry_sends_each_message_once(
    tmp_path: pathlib.Path,
) -> None:
    """Within one one-off tool loop, a retried step neither repeats its delta nor its reply."""

    @memoryd.tool
    def lookup(q: str) -> str:
        """Look something up.

        Args:
            q: The query.
        """
        return f"found {q}"

    store = memoryd.LmdbStore.start(tmp_path / "chat")
    call = messages.assistant(tool_calls=[messages.tool_call("c1", "lookup", {"q": "x"})])
    model = ScriptedModel([call, LLMError("rate limited"), "answer"])
    kernel = memoryd.Kernel(
        llm=model, filters=[Retry(), memoryd.memory_filter(store)], tools=[lookup]
    )
    result = kernel.invoke([messages.user("look up x")])
    assert result.text == "answer"
    assert [m["role"] for m in model.calls[-1]] == ["user", "assistant", "tool"]
