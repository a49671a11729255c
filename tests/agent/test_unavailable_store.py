"""A turn whose store went away fails once, at the first store call that finds it so."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

import memoryd
from memoryd import messages
from memoryd.client.remote import DEFAULT_TIMEOUT_S, RemoteStore
from memoryd.llm import ScriptedModel
from tests.server.daemon import Daemon

ROOT = pathlib.Path(__file__).resolve().parents[2]


@memoryd.tool
def echo(text: str) -> str:
    """Echo the text back."""
    return text


class CountingStore(RemoteStore):
    """A RemoteStore that records each API call it makes and each that found no daemon."""

    def __init__(self, address: str, **options: Any) -> None:
        super().__init__(address, **options)
        self.calls: list[str] = []
        self.unavailable: list[str] = []

    def _call(self, method: str, path: str, **options: Any) -> Any:
        self.calls.append(f"{method} {path}")
        try:
            return super()._call(method, path, **options)
        except memoryd.StoreUnavailable:
            self.unavailable.append(f"{method} {path}")
            raise


def call(name: str, call_id: str) -> dict[str, Any]:
    return messages.assistant(tool_calls=[messages.tool_call(call_id, name, {"text": "x"})])


@pytest.mark.parametrize("journal", [True, False], ids=["journal", "no-journal"])
def test_a_turn_against_a_killed_daemon_fails_at_the_first_call(journal: bool) -> None:
    """One tool step is journaled; the next tool SIGKILLs the daemon: the store call
    after it fails, no other is made, and the run raises StoreUnavailable."""
    with Daemon().start() as daemon:
        store = CountingStore(daemon.address, timeout=1.0)
        made: list[int] = []

        @memoryd.tool
        def kill(text: str) -> str:
            """SIGKILL the daemon."""
            daemon.kill()
            made.append(len(store.calls))
            return "killed"

        agent = memoryd.Agent(
            llm=ScriptedModel(["hello", call("echo", "t1"), call("kill", "t2"), "unstored"]),
            memory=store,
            tools=[echo, kill],
            journal=None if journal else False,
        )
        assert agent.run("first", conversation_id="c").text == "hello"
        with pytest.raises(memoryd.StoreUnavailable, match="cannot reach the memoryd daemon"):
            agent.run("second", conversation_id="c")
        assert made, "the daemon was not killed"
        after_kill = store.calls[made[0] :]
        assert len(after_kill) == 1, after_kill
        assert store.unavailable == after_kill
    memoryd.shutdown()


def test_the_remote_default_deadline_is_stated_in_the_readme() -> None:
    """README names RemoteStore's default per-call deadline, and it is the code's."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"default per-call deadline is {DEFAULT_TIMEOUT_S:g} s" in text
