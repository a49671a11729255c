"""A crash storm is never silent: an ephemeral default store that comes back empty says so."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

import memoryd
import supervisors
from memoryd import app, messages
from memoryd.protocol import DEFAULT_STORE_NAME
from tests.helpers import wait_until


def _give_up(name: str) -> None:
    """Crash the stores supervisor until the root's intensity is spent and it gives up.

    A store that keeps crashing is restarted with backoff and never takes the tree down;
    the root gives up only when its own child, the stores supervisor, crashes too often.
    ``name`` must be running under it, so it is lost with it.
    """
    root = supervisors.whereis(app.ROOT)
    assert root is not None and supervisors.whereis(name) is not None
    for _ in range(50):  # the root allows 3 restarts in 5 s; a few more kills end it
        if not root.is_alive():
            break
        ref = supervisors.whereis(app.STORES)
        if ref is not None:
            supervisors.kill(app.STORES)
        wait_until(
            lambda old=ref: (
                not root.is_alive() or supervisors.whereis(app.STORES) not in (None, old)
            ),
            timeout=30,
            message="the stores supervisor was not restarted",
        )
    wait_until(lambda: not root.is_alive(), timeout=30, message="the root never gave up")


@pytest.fixture(autouse=True)
def _ephemeral_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMORYD_DATA", raising=False)


def test_a_default_store_recreated_empty_is_logged_and_counted() -> None:
    """After the tree gave up, the next default_store() is empty: an error event says so
    and stats()["recreated_empty"] counts it."""
    memoryd.default_store().add("c", [messages.user("remember me")])
    before = memoryd.default_store().stats()["recreated_empty"]
    _give_up(DEFAULT_STORE_NAME)
    with capture_logs() as logs:
        again = memoryd.default_store()
    assert again.get("c") == []
    errors = [e for e in logs if e["log_level"] == "error"]
    assert [e["event"] for e in errors] == ["tree_gave_up", "default_store_recreated_empty"]
    assert errors[0]["stores"] == [DEFAULT_STORE_NAME]
    assert errors[1]["times"] == before + 1
    assert again.stats()["recreated_empty"] == before + 1


def test_a_shutdown_then_a_fresh_default_store_is_no_loss() -> None:
    """memoryd.shutdown() forgets on purpose: the next default store starts quietly."""
    memoryd.default_store().add("c", [messages.user("scratch")])
    before = memoryd.default_store().stats()["recreated_empty"]
    memoryd.shutdown()
    with capture_logs() as logs:
        fresh = memoryd.default_store()
    assert [e for e in logs if e["log_level"] == "error"] == []
    assert fresh.get("c") == []
    assert fresh.stats()["recreated_empty"] == before
