"""The store contract (DESIGN.md §3.3 to §5): the behaviour every store backend shows,
written once as tests and run against each backend.

`StoreContract` gathers the behaviours, one private module per concept:
`_history` (adds and gets), `_writes` (retries, conflicts, pop, clear, at_version),
`_log` (fork, events, tail, listing), `_system` (windowed reads keep system messages)
and `_lifecycle` (threads, crashes, names, stats).
"""

from __future__ import annotations

import pytest

from memoryd.testing._history import HistoryContract
from memoryd.testing._lifecycle import LifecycleContract
from memoryd.testing._log import LogContract
from memoryd.testing._store import Store, StoreFactory
from memoryd.testing._system import SystemContract
from memoryd.testing._writes import WriteContract

__all__ = ["StoreContract"]


class StoreContract(HistoryContract, WriteContract, LogContract, SystemContract, LifecycleContract):
    """Behaviour every store backend must show.

    A backend's test class subclasses this and defines the fixture ``make_store``
    (``make_store(**options)`` starts a fresh, empty store); pytest reports a missing one
    as a missing fixture.
    """

    @pytest.fixture
    def store(self, make_store: StoreFactory) -> Store:
        """A new, empty store from ``make_store``."""
        return make_store()
