"""Child specs are frozen values validated up front."""

import dataclasses
import math

import pytest

from supervisors import ChildSpec, ChildSpecError, Restart, Strategy, Supervisor


def _start() -> None:
    return None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"id": ""}, "non-empty str"),
        ({"id": 7}, "non-empty str"),
        ({"start": "nope"}, "start must be callable"),
        ({"args": [1]}, "args must be a tuple"),
        ({"restart": "permanent"}, "restart must be a Restart"),
        ({"shutdown_s": 0}, "shutdown_s"),
        ({"shutdown_s": float("nan")}, "shutdown_s"),
        ({"shutdown_s": "5"}, "shutdown_s"),
        ({"start_timeout_s": -1}, "start_timeout_s"),
        ({"supervisor": 1}, "supervisor must be a bool"),
    ],
)
def test_bad_child_spec_values_raise_one_named_error(kwargs: dict, message: str) -> None:
    """Each bad field raises ChildSpecError naming the field."""
    base = {"id": "a", "start": _start}
    with pytest.raises(ChildSpecError, match=message):
        ChildSpec(**{**base, **kwargs})


def test_child_spec_is_frozen_and_keyword_only() -> None:
    """A spec cannot be changed after creation nor built positionally."""
    spec = ChildSpec(id="a", start=_start)
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.id = "b"  # type: ignore[misc]
    with pytest.raises(TypeError):
        ChildSpec("a", _start)  # type: ignore[misc]
    assert spec.restart is Restart.PERMANENT


def test_duplicate_child_ids_are_refused_before_anything_starts() -> None:
    """Supervisor.start validates the whole list first."""
    started: list[str] = []

    def start() -> None:
        started.append("x")

    specs = [ChildSpec(id="a", start=start), ChildSpec(id="a", start=start)]
    with pytest.raises(ChildSpecError, match="duplicate child id 'a'"):
        Supervisor.start(children=specs)
    assert started == []


@pytest.mark.parametrize(
    "kwargs",
    [
        {"strategy": "one_for_one"},
        {"max_restarts": -1},
        {"period_s": 0},
        {"children": ["not a spec"]},
    ],
)
def test_bad_supervisor_settings_raise_child_spec_error(kwargs: dict) -> None:
    """Bad strategy, intensity or children are refused with ChildSpecError."""
    with pytest.raises(ChildSpecError):
        Supervisor.start(**kwargs)


def test_strategy_values_are_the_otp_names() -> None:
    """The enum values read like OTP's atoms."""
    assert {s.value for s in Strategy} == {"one_for_one", "one_for_all", "rest_for_one"}


def test_a_supervisor_childs_shutdown_and_start_default_to_no_limit() -> None:
    """OTP: a supervisor child's shutdown defaults to infinity (its children's shutdowns
    bound it), a worker's to 5 s; an explicit value is kept for either."""
    from supervisors._spec import shutdown_limit_s, start_limit_s

    sup = ChildSpec(id="s", start=_start, supervisor=True)
    worker = ChildSpec(id="w", start=_start)
    assert sup.shutdown_s is None and sup.start_timeout_s is None
    assert shutdown_limit_s(sup) == math.inf and start_limit_s(sup) == math.inf
    assert shutdown_limit_s(worker) == 5.0 and start_limit_s(worker) == 10.0
    pinned = ChildSpec(id="p", start=_start, supervisor=True, shutdown_s=2.0)
    assert shutdown_limit_s(pinned) == 2.0
    assert shutdown_limit_s(ChildSpec(id="i", start=_start, shutdown_s=math.inf)) == math.inf
