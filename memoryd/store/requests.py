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

from typing import TYPE_CHECKING

from memoryd._lazy import lazy_names
from memoryd.store._argument_checks import (
    HIDDEN_PREFIX,
    MAX_IDEMPOTENCY_KEY_BYTES,
    MAX_IMPORT_VERSION,
    MAX_VERSION,
    RECORD_KINDS,
    check_after,
    check_data,
    check_idempotency_key,
    check_optional_count,
    check_optional_version,
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
        supersede_refused,
    )

__all__ = [
    "HIDDEN_PREFIX",
    "MAX_IDEMPOTENCY_KEY_BYTES",
    "MAX_IMPORT_VERSION",
    "MAX_VERSION",
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
    "check_optional_version",
    "check_prefix",
    "check_timeout",
    "clear",
    "fork",
    "hidden",
    "import_events",
    "pop",
    "record",
    "result",
    "supersede_refused",
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
        "supersede_refused",
    }
)
"""The names defined in `memoryd.store._write_requests`, loaded on first use."""


__getattr__ = lazy_names(globals(), __name__, "memoryd.store._write_requests", _WRITES)
