"""The store contract run against LmdbStore (durable, fsync before acknowledgement)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

import memoryd
from memoryd.testing import (
    ImportContract,
    JournalSpaceContract,
    RecordContract,
    Store,
    StoreContract,
    StoreFactory,
)


class TestLmdbStore(StoreContract, RecordContract, ImportContract, JournalSpaceContract):
    """Every contract behaviour, on an LMDB store in a fresh directory under tmp_path."""

    @pytest.fixture
    def make_store(self, tmp_path: Path) -> StoreFactory:
        counter = itertools.count()

        def make(**options: Any) -> Store:
            path = tmp_path / f"store-{next(counter)}"
            store: Store = memoryd.LmdbStore.start(str(path), **options)
            return store

        return make
