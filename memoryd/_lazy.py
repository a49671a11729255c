"""Names a module offers from a private module loaded only when one is first used.

A module that defines dataclasses costs milliseconds to import (``dataclasses`` and what
it pulls in); a command that never builds one of its values need not pay for it. The
module keeps the names in its ``__all__`` and its type hints (under ``TYPE_CHECKING``),
and its ``__getattr__`` (PEP 562) made here loads the private module on the first use of
one and keeps the value as an attribute, so later uses are plain attribute reads. Pure.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(
    namespace: dict[str, Any], module: str, source: str, names: frozenset[str]
) -> Callable[[str], Any]:
    """The ``__getattr__`` of module ``module`` (whose globals are ``namespace``) that
    loads ``names`` from module ``source`` on first use.

    The returned function raises ``AttributeError`` for any other name.
    """

    def __getattr__(name: str) -> Any:  # noqa: N807 (a module's __getattr__)
        if name not in names:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        value = getattr(__import__(source, fromlist=(name,)), name)
        namespace[name] = value
        return value

    return __getattr__
