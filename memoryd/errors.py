"""The exceptions memoryd raises, all under one root.

```
MemorydError
├── InvalidMessage(ValueError)         a message is not a valid chat message
├── InvalidConversationId(ValueError)  a conversation id is empty, too long or has controls
├── ConflictError                      add(expected_version=...) did not match
├── AlreadyStarted                     a store name or a data directory is already in use
├── AuthenticationError(PermissionError)  the daemon refused the token, Host or Origin
├── StoreUnavailable                   not running, or not back within the call timeout
│   ├── StoreNotRunning                the daemon runs no store of that name (stopped)
│   └── WriteTimeout                   the outcome is unknown: retry with the same
│                                      idempotency_key
├── StorageError                       the backend failed (the store crashes and restarts)
│   └── CorruptRecord                  stored bytes cannot be decoded
└── DenseUnavailable(ImportError)      dense retrieval without its extra
                                       (memoryd.memory.dense: pip install 'memoryd[dense]')
```

Internal signals, caught inside memoryd and never raised to a caller:

```
EngineClosed                           a store's engine closed under a read (a restart):
                                       look the store's current engine up again
```

Every message says what was wrong and what to do about it. Exceptions carrying extra
attributes (``ConflictError.expected``/``actual``, ``AlreadyStarted.owner_pid``) keep them
across ``pickle`` and ``copy``, so they survive a trip between processes.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AlreadyStarted",
    "AuthenticationError",
    "ConflictError",
    "CorruptRecord",
    "EngineClosed",
    "InvalidConversationId",
    "InvalidMessage",
    "MemorydError",
    "StorageError",
    "StoreNotRunning",
    "StoreUnavailable",
    "WriteTimeout",
]


class MemorydError(Exception):
    """Root of every exception memoryd raises on purpose."""


class InvalidMessage(MemorydError, ValueError):
    """A message is not a valid OpenAI-format chat message, or it is too large.

    Raised in the caller's thread before anything reaches a store.
    """


class InvalidConversationId(MemorydError, ValueError):
    """A conversation id is not a non-empty str of at most 256 UTF-8 bytes without controls."""


def _rebuild_conflict(message: str, expected: int | None, actual: int) -> ConflictError:
    """Recreate a `ConflictError` when unpickling.

    Args:
        message: The original message.
        expected: The expected version.
        actual: The actual version.

    Returns:
        An equivalent `ConflictError`.
    """
    return ConflictError(message, expected=expected, actual=actual)


class ConflictError(MemorydError):
    """An ``add(expected_version=...)`` found the conversation at another version.

    Attributes:
        expected: The version the caller expected.
        actual: The version the conversation was at.
    """

    expected: int | None
    actual: int

    def __init__(self, message: str | None = None, *, expected: int | None, actual: int) -> None:
        """Create the error.

        Args:
            message: What happened; a default naming both versions is used when None.
            expected: The version the caller expected.
            actual: The version the conversation was at.
        """
        if message is None:
            message = (
                f"expected version {expected} but the conversation is at version {actual}; "
                "read it again and retry with the current version"
            )
        super().__init__(message)
        self.expected = expected
        self.actual = actual

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle support that keeps ``expected`` and ``actual``.

        Returns:
            The reduce tuple.
        """
        return (_rebuild_conflict, (str(self), self.expected, self.actual))


class AlreadyStarted(MemorydError):
    """A store name or a data directory is already in use.

    Attributes:
        owner_pid: The process id holding the data directory, when known.
    """

    owner_pid: int | None

    def __init__(self, message: str, *, owner_pid: int | None = None) -> None:
        """Create the error.

        Args:
            message: What is in use and what to do.
            owner_pid: The process id holding the data directory, when known.
        """
        super().__init__(message)
        self.owner_pid = owner_pid


class StoreUnavailable(MemorydError):
    """The store is not running, or did not come back within the call timeout."""


class StoreNotRunning(StoreUnavailable):
    """The daemon runs no store of that name (it was stopped): calls fail at once, unretried.

    Start it again (``RemoteStore.start``, or ``memoryd.connect``, which starts it on use).
    """


class AuthenticationError(MemorydError, PermissionError):
    """The daemon refused the request: a missing or wrong token, or a foreign Host or Origin."""


class WriteTimeout(StoreUnavailable):
    """A write did not answer in time: its outcome is unknown.

    Retry with the same ``idempotency_key``; a retry cannot duplicate the write.
    """


class StorageError(MemorydError):
    """The storage backend failed; the store crashes and is restarted by its supervisor."""


class CorruptRecord(StorageError):
    """Stored bytes cannot be decoded into the record they should hold."""


class EngineClosed(Exception):
    """A store's engine (LMDB environment, Redis client) is closing or closed: its actor
    stopped or restarts. Readers catch it and look the store's current engine up again."""
