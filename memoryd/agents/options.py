"""The arguments of `AgentSystem.start`, checked in one place. Pure."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from memoryd.agents import naming

__all__ = ["RECOVER_POLICIES", "Options", "check_options", "positive"]

RECOVER_POLICIES = ("resume", "discard", "keep")


def positive(value: object, what: str, *, integer: bool = False) -> None:
    """Check that ``value`` is a finite number (or an int) above 0.

    Args:
        value: The value.
        what: Its name, for the message.
        integer: Require an int.

    Raises:
        ValueError: It is not (the message names it).
    """
    kinds = (int,) if integer else (int, float)
    if (
        isinstance(value, bool)
        or not isinstance(value, kinds)
        or not math.isfinite(value)
        or value <= 0
    ):
        kind = "an int" if integer else "a finite number"
        raise ValueError(f"{what} must be {kind} > 0, not {value!r}")


@dataclass(frozen=True, kw_only=True, slots=True)
class Options:
    """The settings of an agent system, as given to `AgentSystem.start` (unchecked until
    `check_options`)."""

    name: str
    idle_after_s: float
    max_active: int
    mailbox: int
    max_restarts: int
    period_s: float
    call_timeout_s: float
    lease_s: float


def check_options(
    agents: Mapping[str, object], options: Options, recover: object
) -> tuple[str, ...]:
    """Check the arguments of `AgentSystem.start`.

    Returns:
        The agent types, in order.

    Raises:
        ValueError: A bad argument (named).
        TypeError: A factory is not callable.
    """
    types = naming.check_agent_types(agents)
    for agent_type in types:
        if not callable(agents[agent_type]):
            raise TypeError(f"the factory of agent type {agent_type!r} is not callable")
    name, max_restarts = options.name, options.max_restarts
    naming.check_system_name(name)
    for what in ("idle_after_s", "period_s", "call_timeout_s", "lease_s"):
        positive(getattr(options, what), what)
    for what in ("max_active", "mailbox"):
        positive(getattr(options, what), what, integer=True)
    if isinstance(max_restarts, bool) or not isinstance(max_restarts, int) or max_restarts < 0:
        raise ValueError(f"max_restarts must be an int >= 0, not {max_restarts!r}")
    if recover not in RECOVER_POLICIES:
        raise ValueError(f"recover must be 'resume', 'discard' or 'keep', not {recover!r}")
    return types
