"""Every supervisors test ends with no actor left running."""

from collections.abc import Iterator

import pykka
import pytest


@pytest.fixture(autouse=True)
def _stop_every_actor() -> Iterator[None]:
    yield
    pykka.ActorRegistry.stop_all(block=True, timeout=10)
