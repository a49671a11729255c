"""Nested supervisors: a supervisor child is waited for as long as its own children's
shutdowns take (OTP's infinity); one abandoned anyway takes its whole subtree with it,
so no descendant keeps a registered name after the tree stopped; and a start error names
every supervisor on the way down to the child that failed."""

from __future__ import annotations

import threading

import pytest

from supervisors import (
    ChildSpec,
    DynamicSupervisor,
    Exit,
    StartError,
    SupervisedActor,
    Supervisor,
    registered,
    whereis,
)

from ._support import Journal, Slow, wait_until


def _start() -> None:
    return None


def test_stop_waits_for_a_nested_supervisor_whose_children_stop_slowly() -> None:
    """A nested supervisor (default spec) whose two children each take a while to stop:
    the root's stop returns once both stopped with reason shutdown, no name left."""
    journal, gate = Journal(), threading.Event()
    threading.Timer(0.1, gate.set).start()
    inner = ChildSpec(
        id="inner",
        supervisor=True,
        start=lambda: Supervisor.start(
            name="nest.inner",
            children=[
                ChildSpec(id=g, start=lambda g=g: Slow.start(journal, g, stop_gate=gate))
                for g in ("nest.g1", "nest.g2")
            ],
        ),
    )
    root = Supervisor.start(name="nest.root", children=[inner])
    root.stop()
    assert journal.of("exit:shutdown") == ["nest.g2", "nest.g1"]
    assert registered() == []


def test_an_abandoned_nested_supervisor_takes_its_subtree_with_it() -> None:
    """The nested supervisor outlives the shutdown_s its spec gives it: once the root's
    stop returns, no descendant holds a name, so a fresh tree starts under the same
    names; the abandoned actors terminate (killed) once what they run returns."""
    journal, gate = Journal(), threading.Event()

    def start_inner() -> Supervisor:
        return Supervisor.start(
            name="aband.inner",
            children=[
                ChildSpec(id=g, start=lambda g=g: Slow.start(journal, g, stop_gate=gate))
                for g in ("aband.g1", "aband.g2")
            ],
        )

    inner = ChildSpec(id="inner", supervisor=True, shutdown_s=0.1, start=start_inner)
    root = Supervisor.start(name="aband.root", children=[inner])
    old = whereis("aband.g1")
    try:
        root.stop()
        assert registered() == []
        assert old is not None and not old.is_alive()
        again = Supervisor.start(name="aband.root", children=[inner])
        assert whereis("aband.g1") not in (None, old)
    finally:
        gate.set()
    wait_until(lambda: journal.of("exit:killed") == ["aband.g1"])
    wait_until(lambda: journal.of("exit:shutdown") == ["aband.g2"])  # it was stopping
    again.stop()


class _Bad(SupervisedActor):
    def init(self) -> None:
        raise OSError("disk full")

    def terminate(self, exit: Exit) -> None:
        pass


def test_a_start_error_names_the_child_and_its_supervisor() -> None:
    """A child whose init() raised: the error names its id and its supervisor, from
    Supervisor.start and from start_child, with what init() raised as the cause."""
    with pytest.raises(StartError) as info:
        Supervisor.start(name="names.root", children=[ChildSpec(id="store-7", start=_Bad.start)])
    assert str(info.value).startswith("child 'store-7' of 'names.root' failed to start")
    assert "OSError: disk full" in str(info.value)
    assert isinstance(info.value.__cause__, OSError)
    dyn = DynamicSupervisor.start(name="names.dyn")
    with pytest.raises(StartError) as info:
        dyn.start_child(ChildSpec(id="store-8", start=_Bad.start))
    assert str(info.value).startswith("child 'store-8' of 'names.dyn' failed to start")
    assert isinstance(info.value.__cause__, OSError)
    dyn.stop()


def test_a_start_error_in_a_subtree_names_the_path_to_the_child() -> None:
    """A grandchild failed: the error names it, its supervisor and that one's parent."""
    inner = ChildSpec(
        id="inner",
        supervisor=True,
        start=lambda: Supervisor.start(
            name="path.inner", children=[ChildSpec(id="leaf", start=_Bad.start)]
        ),
    )
    with pytest.raises(StartError) as info:
        Supervisor.start(name="path.root", children=[inner])
    message = str(info.value)
    assert message.startswith("child 'inner' of 'path.root' failed to start: ")
    assert "child 'leaf' of 'path.inner' failed to start" in message
    assert isinstance(info.value.__cause__, OSError)
    assert registered() == []
