"""Write requests: the values a handle sends to its store, their builders and every argument check.

Pure. Each builder (`add`, `record`, `import_events`, `clear`, `pop`, `fork`) checks
a caller's arguments and returns the request value, or raises the documented error
naming the problem (nothing is sent, so nothing is written); `result` turns a store's
raw answer into what the matching `StoreHandle` method returns. The sync methods of
`StoreHandle` and the awaitable paths (`StoreHandle.submit`, `AsyncStore`, the daemon)
share them, and the read methods use the argument checks (`check_after`, ...).

Messages are checked by `memoryd.messages.check`: a `CheckedMessages` batch is taken
as it is (only its sizes are compared with the store's limit), a plain list is fully
checked and copied. An event's ``data`` follows the same JSON-value rules as messages
(`memoryd._json_values`).

The argument checks live in `memoryd.store._argument_checks`; the request values and
their builders in `memoryd.store._write_requests`, loaded on first use, so a program
that only reads does not load `dataclasses`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memoryd.store._argument_checks import (
    HIDDEN_PREFIX,
    MAX_IDEMPOTENCY_KEY_BYTES,
    MAX_IMPORT_VERSION,
    RECORD_KINDS,
    check_after,
    check_data,
    check_idempotency_key,
    check_optional_count,
    check_prefix,
    check_timeout,
    hidden,
)

if TYPE_CHECKING:
    from memoryd.store._write_requests import (
        Add,
        Clear,
        Fork,
        Import,
        Pop,
        Record,
        WriteRequest,
        add,
        clear,
        fork,
        import_events,
        pop,
        record,
        result,
    )

__all__ = [
    "HIDDEN_PREFIX",
    "MAX_IDEMPOTENCY_KEY_BYTES",
    "MAX_IMPORT_VERSION",
    "RECORD_KINDS",
    "Add",
    "Clear",
    "Fork",
    "Import",
    "Pop",
    "Record",
    "WriteRequest",
    "add",
    "check_after",
    "check_data",
    "check_idempotency_key",
    "check_optional_count",
    "check_prefix",
    "check_timeout",
    "clear",
    "fork",
    "hidden",
    "import_events",
    "pop",
    "record",
    "result",
]

_WRITES = frozenset(
    {
        "Add",
        "Clear",
        "Fork",
        "Import",
        "Pop",
        "Record",
        "WriteRequest",
        "add",
        "clear",
        "fork",
        "import_events",
        "pop",
        "record",
        "result",
    }
)
"""The names defined in `memoryd.store._write_requests`, loaded on first use."""


def __getattr__(name: str) -> Any:
    """Load the write requests and their builders on first use, then keep them here.

    Raises:
        AttributeError: ``name`` is not an attribute of this module.
    """
    if name not in _WRITES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from memoryd.store import _write_requests  # noqa: PLC0415 (dataclasses: only for writes)

    value = getattr(_write_requests, name)
    globals()[name] = value
    return value
