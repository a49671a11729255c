"""A long recovery says how far it is while it lasts (`_Tally`, on a given clock)."""

from __future__ import annotations

from concurrent.futures import Future

from structlog.testing import capture_logs

from memoryd.agents.recovery import _Tally


def ended(result: object = None, error: Exception | None = None) -> Future[object]:
    future: Future[object] = Future()
    if error is None:
        future.set_result(result)
    else:
        future.set_exception(error)
    return future


def test_progress_is_logged_at_most_every_interval_and_the_end_once() -> None:
    """10 runs ending a second apart: progress at 5 s and 10 s (not at each run), each
    failure as it ends, and the end with the totals."""
    now = [0.0]
    tally = _Tally("crew", 11, clock=lambda: now[0], every_s=5.0)
    with capture_logs() as logs:
        for n in range(1, 12):
            now[0] = float(n)
            tally.ended(f"r{n}", ended(error=RuntimeError("down") if n == 3 else None))
    said = [(e["event"], e.get("done"), e.get("failed"), e.get("seconds")) for e in logs]
    assert said == [
        ("recovered_run_failed", None, None, None),
        ("agent_system_recovery_progress", 5, 1, 5.0),
        ("agent_system_recovery_progress", 10, 1, 10.0),
        ("agent_system_recovered", None, 1, 11.0),
    ]
    assert logs[-1]["runs"] == 11
