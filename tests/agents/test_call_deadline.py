"""A call's deadline bounds the store calls its run makes in the caller's thread: with
the daemon behind the store gone, a call fails with `CallTimeout` by its own deadline,
not with the store's error after the store's deadline (five times longer here)."""

from __future__ import annotations

import asyncio
import signal
import time

import pytest

import memoryd
from memoryd.agents import AgentSystem
from tests.agents._agents import factory, start, stepping_model
from tests.server.daemon import Daemon

_STORE_DEADLINE_S = 10.0
_CALL_DEADLINE_S = 1.0


@pytest.mark.parametrize("how", ["thread", "loop"])
def test_a_call_to_a_store_that_stopped_answering_ends_by_the_calls_deadline(
    systems: list[AgentSystem], how: str
) -> None:
    """The daemon is stopped (SIGSTOP: connections hang) after a first call; the next
    call, run in its caller's thread or on its loop, raises CallTimeout. Before, it
    waited for the store's 10 s deadline and raised the store's WriteTimeout or
    StoreUnavailable. Once the daemon goes on, the run is finished by the instance and
    the conversation holds both turns once."""
    with Daemon().start() as daemon:
        store = memoryd.connect(daemon.address, timeout=_STORE_DEADLINE_S)
        system = start(systems, {"w": factory(store, lambda: stepping_model(1))}, store=store)
        assert system.call("w", "k", "first").text == "done 1 for first"
        assert daemon.proc is not None
        daemon.proc.send_signal(signal.SIGSTOP)
        try:
            began = time.monotonic()
            with pytest.raises(memoryd.CallTimeout):
                if how == "thread":
                    system.call("w", "k", "second", timeout=_CALL_DEADLINE_S)
                else:
                    asyncio.run(system.acall("w", "k", "second", timeout=_CALL_DEADLINE_S))
            took = time.monotonic() - began
        finally:
            daemon.proc.send_signal(signal.SIGCONT)
        assert took < _STORE_DEADLINE_S, f"the call waited {took:.1f} s: the store's deadline"
        deadline = time.monotonic() + 60
        while len(store.get("w/k")) < 6 and time.monotonic() < deadline:
            time.sleep(0.05)
        users = [m["content"] for m in store.get("w/k") if m["role"] == "user"]
        assert users == ["first", "second"]
        system.stop()
