"""keep_turn (pure): the provider's view is sent unless it cut into the current turn."""

from __future__ import annotations

from memoryd import messages
from memoryd.agent.memory import keep_turn

SYSTEM = messages.system("summary of older turns")
OLD = [messages.user("q0"), messages.assistant("a0")]
TURN = [
    messages.user("q1"),
    messages.assistant(tool_calls=[messages.tool_call("c1", "f", {})]),
    messages.tool("c1", "r"),
]


def test_an_intact_turn_keeps_the_providers_view() -> None:
    """When prepared ends with the whole turn, it is sent as it is."""
    prepared = [SYSTEM, OLD[1], *TURN]
    assert keep_turn(prepared, TURN) == prepared


def test_rewritten_contents_still_count_as_intact() -> None:
    """A preprocessor that rewrites text (redaction) does not trigger the fallback."""
    redacted = [messages.user("[REDACTED]"), *TURN[1:]]
    assert keep_turn([*OLD, *redacted], TURN) == [*OLD, *redacted]


def test_a_cut_turn_is_sent_whole_after_the_kept_system_messages() -> None:
    """A window that dropped the user input gives the system messages, then the whole turn."""
    prepared = [SYSTEM, *TURN[1:]]
    assert keep_turn(prepared, TURN) == [SYSTEM, *TURN]
