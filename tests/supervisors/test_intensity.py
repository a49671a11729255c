"""RestartIntensity follows OTP's add_restart: counted first, inclusive window edge."""

import pytest

from supervisors import RestartIntensity


def test_allows_exactly_max_restarts_within_the_period() -> None:
    """Three restarts in the window are fine; the fourth exceeds max_restarts=3."""
    intensity = RestartIntensity(3, 5.0)
    assert [intensity.record(t) for t in (0.0, 1.0, 2.0)] == [True, True, True]
    assert intensity.record(3.0) is False


def test_window_edge_is_inclusive() -> None:
    """A restart exactly period_s ago is still inside the window (OTP: R >= Now - Period)."""
    intensity = RestartIntensity(1, 5.0)
    assert intensity.record(10.0)
    assert intensity.record(15.0) is False


def test_restarts_older_than_the_period_leave_the_window() -> None:
    """Just past the edge, the old restart no longer counts."""
    intensity = RestartIntensity(1, 5.0)
    assert intensity.record(10.0)
    assert intensity.record(15.000001)
    assert intensity.in_window == 1


def test_zero_max_restarts_refuses_the_first_restart() -> None:
    """max_restarts=0 means a supervisor gives up on the first death."""
    assert RestartIntensity(0, 5.0).record(0.0) is False


def test_sliding_window_counts_only_recent_restarts() -> None:
    """Restarts spread wider than the period never exceed the intensity."""
    intensity = RestartIntensity(2, 1.0)
    assert all(intensity.record(t * 0.6) for t in range(50))


@pytest.mark.parametrize(
    ("max_restarts", "period_s"),
    [
        (-1, 5.0),
        (1.5, 5.0),
        (True, 5.0),
        (3, 0),
        (3, -1.0),
        (3, "5"),
        (3, float("nan")),
        (3, float("inf")),
    ],
)
def test_bad_settings_are_refused(max_restarts: object, period_s: object) -> None:
    """Negative or non-int max_restarts and periods that are not finite and positive
    raise ValueError."""
    with pytest.raises(ValueError):
        RestartIntensity(max_restarts, period_s)  # type: ignore[arg-type]
