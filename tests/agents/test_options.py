"""AgentSystem.start refuses bad arguments by name, before it registers or starts anything
(the same name then starts a good system), and the longest names it takes work."""

from __future__ import annotations

from typing import Any

import pytest

import memoryd
import supervisors
from memoryd.agents import AgentSystem
from memoryd.agents.lease import LEASE_PREFIX, lease_id
from tests.agents._agents import echo_model, factory, start


@pytest.mark.parametrize(
    ("options", "error", "needle"),
    [
        ({"max_active": 0}, ValueError, "max_active must be an int > 0, not 0"),
        ({"max_active": True}, ValueError, "max_active must be an int > 0, not True"),
        ({"mailbox": 2.5}, ValueError, "mailbox must be an int > 0, not 2.5"),
        ({"idle_after_s": float("nan")}, ValueError, "idle_after_s must be a finite number"),
        ({"period_s": -1}, ValueError, "period_s must be a finite number > 0, not -1"),
        ({"max_restarts": -1}, ValueError, "max_restarts must be an int >= 0"),
        ({"recover": "later"}, ValueError, "recover must be 'resume', 'discard' or 'keep'"),
        ({"name": ""}, ValueError, "name must be a non-empty str"),
        ({"name": "a/b"}, ValueError, "system name 'a/b' holds '/'"),
        ({"name": "n" * 129}, ValueError, r"\(129 characters\) is longer than 128"),
        ({"name": "tab\there"}, ValueError, "not printable"),
    ],
)
def test_a_bad_option_is_refused_by_name_and_starts_nothing(
    store: memoryd.StoreHandle,
    systems: list[AgentSystem],
    options: dict[str, Any],
    error: type[Exception],
    needle: str,
) -> None:
    """Each bad option is named in its error; no supervisor is registered for it."""
    agents = {"echo": factory(store, echo_model)}
    with pytest.raises(error, match=needle):
        AgentSystem.start(agents, store=store, **{"name": "opts", **options})
    assert supervisors.whereis("memoryd.agents/opts") is None
    system = start(systems, agents, store=store, name="opts")
    assert system.call("echo", "k", "hi").text == "echo: hi"


@pytest.mark.parametrize(
    ("agents", "error", "needle"),
    [
        ({}, ValueError, "needs at least one agent type"),
        ({"a/b": None}, ValueError, "an agent type must be a non-empty str without '/'"),
        ({"": None}, ValueError, "an agent type must be a non-empty str"),
        ({"bell\x07": None}, ValueError, r"agent type 'bell\\x07'.*control character U\+0007"),
        ({"t" * 300: None}, ValueError, r"\(300 characters\) cannot start.*the limit is 256"),
        ({"echo": "not a factory"}, TypeError, "factory of agent type 'echo' is not callable"),
    ],
)
def test_a_bad_agent_type_is_refused_at_start(
    store: memoryd.StoreHandle, agents: dict[Any, Any], error: type[Exception], needle: str
) -> None:
    """A type that could name no instance's conversation is refused at start, not at
    its first call; nothing is registered."""
    with pytest.raises(error, match=needle):
        AgentSystem.start(agents, store=store, name="types")
    assert supervisors.whereis("memoryd.agents/types") is None


def test_the_longest_names_work(store: memoryd.StoreHandle, systems: list[AgentSystem]) -> None:
    """A 128-character system name and a type that leaves one character for the key fit."""
    agent_type = "t" * 254  # "<type>/<key>" is at most 256 bytes
    system = start(systems, {agent_type: factory(store, echo_model)}, store=store, name="s" * 128)
    assert system.call(agent_type, "k", "hi").conversation_id == f"{agent_type}/k"
    assert [i.name for i in system.instances()] == [f"{'s' * 128}/{agent_type}/k"]


def test_a_long_instance_id_takes_a_hashed_lease_of_its_own() -> None:
    """An instance's lease spells its conversation id while the two fit in one id, and
    hashes it past that: ids that differ by one character get different leases, and no
    hashed lease can be the spelled lease of another instance."""
    short = "t/" + "k" * (256 - len(LEASE_PREFIX) - 2)
    assert lease_id(short) == f"{LEASE_PREFIX}{short}"
    long_a, long_b = short + "a", short + "b"
    assert lease_id(long_a) != lease_id(long_b)
    assert not lease_id(long_a).startswith(LEASE_PREFIX)
    for cid in (short, long_a, "t/" + "é" * 127):
        assert memoryd.messages.validate_conversation_id(lease_id(cid)) == lease_id(cid)
