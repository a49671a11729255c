"""The name registry: one live actor per name; names free themselves on death."""

import threading

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


def test_whereis_returns_the_registered_ref(refs) -> None:
    """register then whereis gives the same ref back."""
    ref = refs()
    register("reg.a", ref)
    assert whereis("reg.a") is ref
    assert "reg.a" in registered()
    assert unregister("reg.a")
    assert whereis("reg.a") is None


def test_a_name_held_by_a_live_actor_cannot_be_taken(refs) -> None:
    """A duplicate name raises NameTaken and keeps the first holder."""
    first, second = refs(), refs()
    register("reg.b", first)
    with pytest.raises(NameTaken, match=r"reg\.b"):
        register("reg.b", second)
    assert whereis("reg.b") is first
    unregister("reg.b")


def test_a_dead_actors_name_is_free(refs) -> None:
    """Once the holder stopped, whereis is None and the name can be reused."""
    first, second = refs(), refs()
    register("reg.c", first)
    first.stop()
    assert whereis("reg.c") is None
    register("reg.c", second)
    assert whereis("reg.c") is second
    unregister("reg.c")


def test_unregister_with_a_stale_ref_keeps_the_new_holder(refs) -> None:
    """An old incarnation's late unregister cannot remove its successor."""
    old, new = refs(), refs()
    register("reg.d", new)
    assert unregister("reg.d", old) is False
    assert whereis("reg.d") is new
    unregister("reg.d")


@pytest.mark.parametrize("name", ["", None, 3])
def test_bad_names_are_refused(refs, name) -> None:
    """Names must be non-empty strings."""
    with pytest.raises(ValueError):
        register(name, refs())


def test_concurrent_registration_has_exactly_one_winner(refs) -> None:
    """Eight threads race for one name: one wins, seven get NameTaken."""
    actors = [refs() for _ in range(8)]
    outcomes: list[str] = []
    barrier = threading.Barrier(8)

    def race(ref: pykka.ActorRef) -> None:
        barrier.wait()
        try:
            register("reg.race", ref)
            outcomes.append("won")
        except NameTaken:
            outcomes.append("lost")

    threads = [threading.Thread(target=race, args=(a,)) for a in actors]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["lost"] * 7 + ["won"]
    unregister("reg.race")
