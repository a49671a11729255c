"""How agent instances are named: registry names, conversation ids and derived run ids. Pure.

An instance registers as ``"<system>/<type>/<key>"`` (DESIGN §3.7), so
``supervisors.kill("crew/researcher/user-42")`` reaches it. The system's own supervisor
registers as ``"memoryd.agents/<system>"``, under `REGISTRY_PREFIX`, a prefix store names
may not take (`memoryd.store.config.StoreConfig` refuses it): a system named like a store
never clashes with it. An instance's name holds two ``/`` after the system's name, which
no store name the application starts is expected to share; if one does, activating that
instance raises `AlreadyStarted` naming it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from memoryd import messages as msgs
from memoryd._shown import shown
from memoryd.errors import InvalidConversationId

__all__ = [
    "REGISTRY_PREFIX",
    "check_agent_types",
    "check_key",
    "check_request_id",
    "check_system_name",
    "conversation_id",
    "instance_name",
    "request_run_id",
    "split_conversation",
    "system_name",
]

REGISTRY_PREFIX = "memoryd.agents/"
"""The start of every registered name of an agent system (reserved: no store takes it)."""


def check_agent_types(names: Iterable[object]) -> tuple[str, ...]:
    """Check agent type names: non-empty str without ``/`` (it separates type and key).

    Args:
        names: The agent types.

    Returns:
        The names, in order.

    Raises:
        ValueError: A name is not such a str, or there is none.
    """
    checked = []
    for name in names:
        if not isinstance(name, str) or not name or "/" in name:
            raise ValueError(f"an agent type must be a non-empty str without '/', not {name!r}")
        try:  # the type starts every conversation id of its instances: check it once, here
            msgs.validate_turn_conversation_id(conversation_id(name, "k"))
        except InvalidConversationId as exc:
            raise ValueError(
                f"agent type {shown(name)} cannot start its instances' conversation ids "
                f"'<type>/<key>': {exc}"
            ) from None
        checked.append(name)
    if not checked:
        raise ValueError("an agent system needs at least one agent type")
    return tuple(checked)


MAX_SYSTEM_NAME = 128
"""The longest system name (characters): it starts every registered name of the system."""


def check_system_name(name: object) -> str:
    """Check a system's name: a non-empty, printable str without ``/``, at most
    `MAX_SYSTEM_NAME` characters. A ``/`` would make ``"<system>/<type>/<key>"``
    ambiguous: system ``"a/b"``'s instance ``t/k`` and system ``"a"``'s instance
    ``b/t/k`` would take one registered name.

    Raises:
        ValueError: Not such a str (the message says which rule).
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty str, not {name!r}")
    if "/" in name:
        raise ValueError(
            f"system name {shown(name)} holds '/', which separates the parts of its "
            "instances' names '<system>/<type>/<key>'; choose a name without it"
        )
    if len(name) > MAX_SYSTEM_NAME:
        raise ValueError(f"system name {shown(name)} is longer than {MAX_SYSTEM_NAME} characters")
    if not name.isprintable():
        raise ValueError(f"system name {name!r} holds a character that is not printable")
    return name


def check_key(agent_type: str, key: object) -> str:
    """Check an instance key: a non-empty str that makes a valid conversation id.

    Raises:
        ValueError: Not a non-empty str.
        InvalidConversationId: ``"<type>/<key>"`` is not a valid conversation id.
    """
    if not isinstance(key, str) or not key:
        raise ValueError(f"an instance key must be a non-empty str, not {key!r}")
    try:
        msgs.validate_turn_conversation_id(conversation_id(agent_type, key))
    except InvalidConversationId as exc:
        raise InvalidConversationId(
            f"instance key {shown(key)} of agent type {agent_type!r} cannot name its "
            f"conversation '<type>/<key>': {exc}"
        ) from None
    return key


def conversation_id(agent_type: str, key: str) -> str:
    """An instance's conversation: ``"<type>/<key>"``."""
    return f"{agent_type}/{key}"


def system_name(system: str) -> str:
    """The registered name of a system's supervisor: ``"memoryd.agents/<system>"``."""
    return f"{REGISTRY_PREFIX}{system}"


def instance_name(system: str, agent_type: str, key: str) -> str:
    """An instance's registered name: ``"<system>/<type>/<key>"``."""
    return f"{system}/{agent_type}/{key}"


def split_conversation(cid: str) -> tuple[str, str]:
    """The (type, key) of an instance's conversation id (the key may hold ``/``)."""
    agent_type, _, key = cid.partition("/")
    return agent_type, key


MAX_REQUEST_ID = 1024
"""The longest request id (characters); an id of a request elsewhere fits, a body does not."""


def check_request_id(request_id: object) -> str:
    """Check a call's request id: a non-empty str of at most `MAX_REQUEST_ID` characters
    that encodes as UTF-8 (it is hashed into the run id).

    Raises:
        ValueError: Not such a str (the message says which rule).
    """
    if not isinstance(request_id, str) or not request_id:
        raise ValueError(f"request_id must be a non-empty str, not {request_id!r:.80}")
    if len(request_id) > MAX_REQUEST_ID:
        raise ValueError(
            f"request_id {shown(request_id)} is longer than {MAX_REQUEST_ID} characters"
        )
    try:
        request_id.encode()
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"request_id {shown(request_id)} holds a lone surrogate at index {exc.start}; "
            "fix its encoding"
        ) from None
    return request_id


def request_run_id(agent_type: str, key: str, request_id: str) -> str:
    """The run id a call with ``request_id`` runs as: the same for the same request on the
    same instance, in every process, so its commit (keyed by run id) is found again."""
    digest = hashlib.sha256(f"{agent_type}/{key}\n{request_id}".encode()).hexdigest()
    return f"q{digest[:31]}"
