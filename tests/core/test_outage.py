"""`Outage`: what a store or a reaper logs while what it tries fails (pure, a given clock)."""

from __future__ import annotations

from memoryd._outage import Outage


def test_an_outage_warns_once_then_at_most_every_repeat_and_ends_once() -> None:
    outage = Outage("redis_unreachable", "redis_still_unreachable", repeat_s=5.0)
    assert outage.reached(0.0) is None  # no outage: nothing to say
    said = [outage.lost(t / 20) for t in range(0, 240)]  # 12 s of tries every 50 ms
    assert [(t / 20, e) for t, e in enumerate(said) if e] == [
        (0.0, "redis_unreachable"),
        (5.0, "redis_still_unreachable"),
        (10.0, "redis_still_unreachable"),
    ]
    assert outage.ongoing
    assert outage.reached(12.5) == (12.5, 240)
    assert not outage.ongoing
    assert outage.reached(13.0) is None
    assert outage.lost(20.0) == "redis_unreachable"  # a new outage starts over
    assert outage.reached(20.25) == (0.25, 1)
