"""The daemon's answers checked for their shape before a caller sees them. Pure.

A daemon (or anything else listening at its address: a proxy, a wrong port, a
hostile server) may answer a 2xx whose body decodes but is not what the call asks
for: no ``version`` field, a version that is negative, a float or past 2**64-1,
``messages`` that are not a list of objects. Each function here takes the decoded
answer and the call it answers (``"GET /v1/..."``, for the message) and returns the
field, or raises `memoryd.errors.ProtocolError` naming the call and what was wrong,
never a ``KeyError`` or ``TypeError`` from deep inside the client.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from memoryd._shown import described
from memoryd.errors import ProtocolError
from memoryd.store.requests import MAX_VERSION

__all__ = [
    "converted",
    "field",
    "flag",
    "listed",
    "mapping",
    "message_or_none",
    "positive_int",
    "version",
]


_T = TypeVar("_T")


def _refused(call: str, problem: str) -> ProtocolError:
    return ProtocolError(f"the daemon's answer to {call} {problem}; is it a memoryd daemon?")


def mapping(answer: Any, call: str) -> dict[str, Any]:
    """``answer`` itself, which must be an object.

    Raises:
        ProtocolError: it is anything else.
    """
    if type(answer) is not dict:
        raise _refused(call, f"is {described(answer)}, not an object")
    return answer


def field(answer: Any, name: str, call: str) -> Any:
    """The field ``name`` of the object ``answer``.

    Raises:
        ProtocolError: ``answer`` is not an object, or has no such field.
    """
    found = mapping(answer, call)
    if name not in found:
        raise _refused(call, f"has no {name!r} field (it has {sorted(found)[:8]})")
    return found[name]


def version(answer: Any, call: str) -> int:
    """The ``version`` of a write's or a version read's answer: an int from 0 to 2**64-1.

    Raises:
        ProtocolError: no such field, or anything else in it.
    """
    value = field(answer, "version", call)
    if type(value) is not int or not 0 <= value <= MAX_VERSION:
        raise _refused(call, f"holds the version {described(value)}, not an int from 0 to 2**64-1")
    return value


def positive_int(answer: Any, name: str, call: str, default: int) -> int:
    """The optional field ``name``: an int of at least 1, or ``default`` when absent.

    Raises:
        ProtocolError: ``answer`` is not an object, or the field holds anything else.
    """
    value = mapping(answer, call).get(name, default)
    if type(value) is not int or value < 1:
        raise _refused(call, f"holds {name} {described(value)}, not an int of at least 1")
    return value


def flag(answer: Any, name: str, call: str) -> bool:
    """The field ``name``: true or false.

    Raises:
        ProtocolError: no such field, or anything else in it.
    """
    value = field(answer, name, call)
    if type(value) is not bool:
        raise _refused(call, f"holds {name} {described(value)}, not true or false")
    return value


def optional_flag(answer: Any, name: str, call: str) -> bool:
    """The field ``name`` if the answer holds it (true or false), else false.

    Raises:
        ProtocolError: anything but true or false in it.
    """
    value = mapping(answer, call).get(name, False)
    if type(value) is not bool:
        raise _refused(call, f"holds {name} {described(value)}, not true or false")
    return value


def listed(answer: Any, name: str, item: type[_T], call: str) -> list[_T]:
    """The field ``name``: a list whose every element is exactly of type ``item``.

    Raises:
        ProtocolError: no such field, not a list, or an element of another type.
    """
    value = field(answer, name, call)
    if type(value) is not list:
        raise _refused(call, f"holds {name} as {described(value)}, not a list")
    for index, element in enumerate(value):
        if type(element) is not item:
            raise _refused(
                call,
                f"holds {name}[{index}] as {described(element)}, not a {item.__name__}",
            )
    return value


def message_or_none(answer: Any, call: str) -> dict[str, Any] | None:
    """The ``message`` of a pop's answer: an object, or null.

    Raises:
        ProtocolError: no such field, or anything else in it.
    """
    value = field(answer, "message", call)
    if value is not None and type(value) is not dict:
        raise _refused(call, f"holds the message {described(value)}, not an object or null")
    return value


def converted(items: list[dict[str, Any]], convert: Callable[[Any], _T], call: str) -> list[_T]:
    """Each of ``items`` rebuilt by ``convert`` (an event or a change from its wire form).

    Raises:
        ProtocolError: ``convert`` refused one (its ValueError, TypeError or
            OverflowError, named).
    """
    try:
        return [convert(item) for item in items]
    except (ValueError, TypeError, OverflowError) as exc:
        raise _refused(call, f"holds a record that cannot be read: {exc}") from None
