"""A thousand kill/restart cycles leave no thread behind."""

import threading

import pytest
from pykka.messages import ProxyCall
from structlog.testing import capture_logs

from supervisors import ChildSpec, Supervisor, kill, whereis

from ._support import FakeClock, Journal, Worker, wait_until, worker_spec


@pytest.mark.slow
def test_a_thousand_kill_restart_cycles_leak_no_threads() -> None:
    """After 1,000 kills and restarts and a stop, the thread count is back to baseline."""
    baseline = threading.active_count()
    journal = Journal()
    sup = Supervisor.start(
        name="soak", max_restarts=10**6, children=[worker_spec(journal, "victim")]
    )
    for _ in range(1000):
        old = whereis("victim")
        assert kill("victim")

        def fresh(old=old):  # type: ignore[no-untyped-def]
            ref = whereis("victim")
            return ref if ref is not None and ref is not old else None

        ref = wait_until(fresh)
        assert (
            ref.ask(ProxyCall(attr_path=("ping",), args=(), kwargs={}), timeout=5) == "pong:victim"
        )
    assert journal.of("exit:killed").count("victim") == 1000
    sup.stop()
    wait_until(lambda: threading.active_count() == baseline)


def test_supervisor_events_carry_otp_report_keys() -> None:
    """child_started, child_terminated and reached_max_restart_intensity are logged with keys."""
    journal = Journal()
    with capture_logs() as logs:
        sup = Supervisor.start(
            name="logged",
            max_restarts=0,
            clock=FakeClock(),
            children=[ChildSpec(id="w", start=lambda: Worker.start(journal, "w", name="w"))],
        )
        kill("w")
        wait_until(lambda: not sup.is_alive())
    events = {entry["event"]: entry for entry in logs}
    assert events["child_started"]["supervisor"] == "logged"
    assert events["child_started"]["child"] == "w"
    assert events["child_terminated"]["reason"].startswith("killed")
    assert events["child_terminated"]["log_level"] == "error"
    assert events["reached_max_restart_intensity"]["child"] == "w"
