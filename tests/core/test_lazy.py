"""Names loaded on first use (memoryd._lazy): the lazy modules offer exactly what their
private sources define, load it once, and refuse any other name."""

from __future__ import annotations

import subprocess
import sys

import pytest

from memoryd import _event_records, events
from memoryd._lazy import lazy_names
from memoryd.store import _write_requests, requests


@pytest.mark.parametrize(
    ("module", "names", "source"),
    [
        (events, events._RECORDS, _event_records),
        (requests, requests._WRITES, _write_requests),
    ],
    ids=["events", "store.requests"],
)
def test_a_lazy_module_offers_exactly_its_sources_names(
    module: object, names: frozenset[str], source: object
) -> None:
    assert names == set(source.__all__)  # type: ignore[attr-defined]
    assert names <= set(module.__all__)  # type: ignore[attr-defined]
    for name in names:
        assert getattr(module, name) is getattr(source, name)


def test_a_name_is_loaded_on_first_use_and_kept() -> None:
    """In a fresh interpreter: importing `memoryd.events` loads no dataclass module; the
    first use of `Event` does, and leaves it an attribute of the module."""
    probe = (
        "import sys\n"
        "from memoryd import events\n"
        "assert 'memoryd._event_records' not in sys.modules\n"
        "assert 'Event' not in vars(events)\n"
        "E = events.Event\n"
        "assert 'memoryd._event_records' in sys.modules\n"
        "assert vars(events)['Event'] is E\n"
    )
    subprocess.run([sys.executable, "-c", probe], check=True, timeout=60)


def test_any_other_name_is_an_attribute_error_naming_the_module() -> None:
    namespace: dict[str, object] = {}
    getter = lazy_names(namespace, "some.module", "memoryd._event_records", frozenset({"Event"}))
    with pytest.raises(AttributeError, match=r"module 'some\.module' has no attribute 'Nope'"):
        getter("Nope")
    assert getter("Event") is _event_records.Event
    assert namespace == {"Event": _event_records.Event}
    with pytest.raises(AttributeError, match="has no attribute"):
        events.NoSuchName  # noqa: B018
