"""explain: what a prepare dropped and why, by step."""

from __future__ import annotations

from typing import Any

import memoryd
from memoryd import DefaultProvider, explain, preprocessors
from tests.provider.test_safe_window import a, calls, r, s, u


def test_explain_counts_what_each_step_dropped() -> None:
    """The window step drops by role; the redaction step changes but drops nothing."""
    store = memoryd.EphemeralStore.start()
    provider = DefaultProvider(
        store, window=3, preprocessors=[preprocessors.redact("secret")], read_tail=False
    )
    provider.append("c", [s("S"), u("1"), calls("x"), r("x"), a("secret 2"), u("3")])
    report = explain(provider, "c", [u("now")])
    assert (report.stored, report.loaded, report.sent) == (6, 7, 4)
    window, redact = report.steps
    assert window.dropped == {"user": 1, "assistant": 1, "tool": 1}
    assert (window.before, window.after) == (7, 4)
    assert redact.dropped == {"assistant": 1}
    assert redact.changed == 1
    text = str(report)
    assert "safe_window(3)" in text
    assert "redact('secret'" in text


def test_explain_works_for_any_provider() -> None:
    """A provider without stages is reported as one prepare step."""

    class Halving:
        def history(self, cid: str) -> list[dict[str, Any]]:
            return [u(str(i)) for i in range(4)]

        def append(self, cid: str, messages: Any, *, idempotency_key: Any = None) -> int:
            return 0

        def prepare(self, cid: str, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
            return messages[len(messages) // 2 :]

        def clear(self, cid: str) -> None:
            return None

    report = explain(Halving(), "c")
    assert [(step.name, step.before, step.after) for step in report.steps] == [("prepare", 4, 2)]
    assert report.steps[0].dropped == {"user": 2}
