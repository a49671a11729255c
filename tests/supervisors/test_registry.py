"""The name registry: one live actor per name; names free themselves on death."""

import re
import threading
from collections.abc import Iterator

import pykka
import pytest

from supervisors import NameTaken, register, registered, unregister, whereis


class Plain(pykka.ThreadingActor):
    pass


@pytest.fixture
def refs():
    started: list[pykka.ActorRef] = []

    def make() -> pykka.ActorRef:
        ref = Plain.start()
        started.append(ref)
        return ref

    yield make
    for ref in started:
        ref.stop()


@pytest.fixture
def name(request: pytest.FixtureRequest) -> Iterator[str]:
    """A registry name of this test's own, freed when the test ends."""
    chosen = f"reg.{request.node.name}"
    yield chosen
    unregister(chosen)


def test_whereis_returns_the_registered_ref(refs, name: str) -> None:
    """register then whereis gives the same ref back."""
    ref = refs()
    register(name, ref)
    assert whereis(name) is ref
    assert name in registered()
    assert unregister(name)
    assert whereis(name) is None


def test_a_name_held_by_a_live_actor_cannot_be_taken(refs, name: str) -> None:
    """A duplicate name raises NameTaken and keeps the first holder."""
    first, second = refs(), refs()
    register(name, first)
    with pytest.raises(NameTaken, match=re.escape(name)):
        register(name, second)
    assert whereis(name) is first


def test_a_dead_actors_name_is_free(refs, name: str) -> None:
    """Once the holder stopped, whereis is None and the name can be reused."""
    first, second = refs(), refs()
    register(name, first)
    first.stop()
    assert whereis(name) is None
    register(name, second)
    assert whereis(name) is second


def test_unregister_with_a_stale_ref_keeps_the_new_holder(refs, name: str) -> None:
    """An old incarnation's late unregister cannot remove its successor."""
    old, new = refs(), refs()
    register(name, new)
    assert unregister(name, old) is False
    assert whereis(name) is new


@pytest.mark.parametrize("bad", ["", None, 3])
def test_bad_names_are_refused(refs, bad) -> None:
    """Names must be non-empty strings."""
    with pytest.raises(ValueError):
        register(bad, refs())


def test_concurrent_registration_has_exactly_one_winner(refs, name: str) -> None:
    """Eight threads race for one name: one wins, seven get NameTaken."""
    actors = [refs() for _ in range(8)]
    outcomes: list[str] = []
    barrier = threading.Barrier(8)

    def race(ref: pykka.ActorRef) -> None:
        barrier.wait()
        try:
            register(name, ref)
            outcomes.append("won")
        except NameTaken:
            outcomes.append("lost")

    threads = [threading.Thread(target=race, args=(a,)) for a in actors]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["lost"] * 7 + ["won"]
