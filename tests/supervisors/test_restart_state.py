"""A child being restarted (its start keeps failing, and is retried) is in its own
state, as OTP's ``restarting`` child: terminate_child ends it, and a retry already
queued does not start the child again."""

from __future__ import annotations

import threading

from supervisors import ChildSpec, Supervisor, kill, whereis

from ._support import FakeClock, Journal, Worker, wait_until


def test_a_child_terminated_while_its_restart_is_retried_stays_terminated() -> None:
    """The restart of w fails and is retried; terminate_child('w') meanwhile; once w
    could start again, no queued retry starts it: it stays terminated, its spec kept."""
    journal, failing = Journal(), threading.Event()
    sup = Supervisor.start(
        name="rs",
        max_restarts=100_000,
        clock=FakeClock(),
        children=[
            ChildSpec(
                id="w",
                start=lambda: Worker.start(journal, "w", name="rs.w", fail_init=failing.is_set),
            )
        ],
    )
    failing.set()
    kill("rs.w")
    wait_until(lambda: journal.count("init_failed", "w") >= 2)  # retried
    sup.terminate_child("w")
    failing.clear()
    # Answered after any retry still queued (the supervisor is busy until none is).
    assert [(c.id, c.ref) for c in sup.which_children()] == [("w", None)]
    assert whereis("rs.w") is None
    assert journal.count("init", "w") == 1  # only the first incarnation ever started
    sup.restart_child("w")  # the spec was kept
    assert whereis("rs.w") is not None
    sup.stop()
