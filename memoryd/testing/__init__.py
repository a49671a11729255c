"""The store contract: memoryd's behaviour tests for a store, which any backend can run.

Every memoryd store (LMDB, ephemeral, Redis, remote) passes this suite, and a store written
outside memoryd runs the same tests the same way. Subclass the contract classes in a pytest
module, define a ``make_store`` fixture that returns a factory, and run pytest::

    import itertools

    import pytest

    import memoryd
    from memoryd.testing import ImportContract, RecordContract, StoreContract


    class TestMyStore(StoreContract, RecordContract, ImportContract):
        @pytest.fixture
        def make_store(self, tmp_path):
            paths = (tmp_path / f"store-{n}" for n in itertools.count())

            def make(**options):  # starts a new, empty store on every call
                return memoryd.LmdbStore.start(next(paths), **options)  # your store's start

            yield make
            memoryd.shutdown()  # stops every store the test started

``make_store(**options)`` starts a new, empty store each time it is called and returns its
handle (a `Store`); it passes ``name=`` through when given and otherwise gives each store a
name of its own. The fixture stops what it started once the test is done.

`StoreContract` is the core: adds and gets, idempotency keys, expected versions, pop,
clear, fork, events, the change feed, listing, threads, crashes and names.
`RecordContract` (``record``), `ImportContract` (``import_events``) and
`JournalSpaceContract` (hidden ids, ``add(then_clear=...)``) are mixed in by a
backend that offers those methods.

The lifecycle tests reach a store the way memoryd's own are reached: they crash it with
``supervisors.kill(name)`` and expect it restarted with its data, look it up with
``memoryd.whereis(name)`` and stop everything with ``memoryd.shutdown()``. A backend whose
stores live elsewhere (a server process, say) replaces those three in its fixture with
``monkeypatch.setattr``, as memoryd's tests of `memoryd.RemoteStore` do.

This package imports pytest, which the rest of memoryd never does: pytest is a test-time
dependency (the ``test`` extra), needed only where the contract runs. ``import memoryd``
does not import this package.
"""

from __future__ import annotations

from memoryd.testing._messages import texts
from memoryd.testing._store import Store, StoreFactory
from memoryd.testing.contract import StoreContract
from memoryd.testing.imports import ImportContract
from memoryd.testing.journal_space import JournalSpaceContract
from memoryd.testing.records import RecordContract

__all__ = [
    "ImportContract",
    "JournalSpaceContract",
    "RecordContract",
    "Store",
    "StoreContract",
    "StoreFactory",
    "texts",
]
