"""The exceptions memoryd raises, all under one root.

```
MemorydError
├── InvalidMessage(ValueError)         a message is not a valid chat message
│   └── InvalidSessionItem(TypeError)  an OpenAI Agents session item of the wrong type
├── InvalidConversationId(ValueError)  a conversation id is empty, too long or has controls
├── ConflictError                      add(expected_version=...) did not match
├── UnknownConversation(LookupError)   fork() was given a source never written
├── AlreadyStarted                     a store name or a data directory is already in use
├── AuthenticationError(PermissionError)  the daemon refused the token, Host or Origin
├── StoreUnavailable                   not running, or not back within the call timeout
│   ├── StoreNotRunning                the daemon runs no store of that name (stopped)
│   │   └── UnknownStore(LookupError)  ... and never had one: a read does not create it
│   └── WriteTimeout                   the outcome is unknown: retry with the same
│                                      idempotency_key
├── StorageError                       the backend failed (the store crashes and restarts)
│   ├── CorruptRecord                  stored bytes cannot be decoded
│   └── DiskFull                       the disk holding the store is full: nothing was
│                                      written; free space and retry
├── ProtocolError                      the daemon answered something the client cannot read
├── ExportFormatError(ValueError)      a line of an export file is not valid (it is named)
├── LLMError                           a chat model failed to answer
│   └── ScriptExhausted                a ScriptedModel was called past its script's end
├── StepLimitExceeded                  the tool loop reached max_steps without a final answer
├── ToolArgumentError(ValueError)      a tool was called with arguments its schema refuses
├── UnknownRun(LookupError)            resume() was given a run id the journal does not hold
├── UnknownAgent(LookupError)          an AgentSystem was called with an agent type it lacks
├── Overloaded                         an agent instance's mailbox is full (nothing written)
├── CallTimeout(TimeoutError)          an agent call did not finish within its deadline
├── CallCycle                          an agent call would wait on itself (a cycle of
│                                      instances calling each other)
├── AgentSystemStopped                 an agent system was stopped before (or while) it
│                                      answered the call
├── SchemaError(ValueError)            a memory record body does not match its schema, or
│                                      the schema itself is malformed
├── ExtractionError(ValueError)        a model's extraction, query planning or rerank reply
│                                      is not the JSON that was asked for
└── DenseUnavailable(ImportError)      dense retrieval without its extra
                                       (memoryd.memory.dense: pip install 'memoryd[dense]')
```

Internal signals, raised and caught inside memoryd; a caller of its public API never
sees them:

```
EngineClosed                           a store's engine closed under a read (a restart):
                                       look the store's current engine up again
EngineBusy                             a read that may not wait found the LMDB map growing
WouldWait                              a read made `without_waiting` would have waited
NotWritten(StoreUnavailable)           a store stopped before attempting a write: the
                                       handle sends the write again
ConnectFailed                          the daemon client made no connection: nothing sent
TransportFailed                        the exchange with the daemon failed after sending
                                       began: the outcome is unknown
HttpError                              the daemon's HTTP layer refuses a request itself
                                       and answers with its status
JsonProblem                            a value is not JSON-compatible; `messages` turns it
                                       into InvalidMessage naming the path
RunInterrupted                         an agent system stops a run at a step boundary (its
                                       instance was killed or shut down, or a run in its
                                       caller's thread passed the call's deadline): the
                                       journal is kept and the instance's (next)
                                       incarnation resumes the run
```

Every message says what was wrong and what to do about it. Exceptions carrying extra
attributes (``ConflictError.expected``/``actual``, ``AlreadyStarted.owner_pid``) keep them
across ``pickle`` and ``copy``, so they survive a trip between processes.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AgentSystemStopped",
    "AlreadyStarted",
    "AuthenticationError",
    "CallCycle",
    "CallTimeout",
    "ConflictError",
    "ConnectFailed",
    "CorruptRecord",
    "DenseUnavailable",
    "DiskFull",
    "EngineBusy",
    "EngineClosed",
    "ExportFormatError",
    "ExtractionError",
    "HttpError",
    "InvalidConversationId",
    "InvalidMessage",
    "InvalidSessionItem",
    "JsonProblem",
    "LLMError",
    "MemorydError",
    "NotWritten",
    "Overloaded",
    "ProtocolError",
    "RunInterrupted",
    "SchemaError",
    "ScriptExhausted",
    "StepLimitExceeded",
    "StorageError",
    "StoreNotRunning",
    "StoreUnavailable",
    "ToolArgumentError",
    "TransportFailed",
    "UnknownAgent",
    "UnknownConversation",
    "UnknownRun",
    "UnknownStore",
    "WouldWait",
    "WriteTimeout",
]


class MemorydError(Exception):
    """Root of every exception memoryd raises on purpose."""


class InvalidMessage(MemorydError, ValueError):
    """A message is not a valid OpenAI-format chat message, or it is too large.

    Raised in the caller's thread before anything reaches a store.
    """


class InvalidSessionItem(InvalidMessage, TypeError):
    """A session item is not a dict, or holds a value of a type JSON cannot carry.

    An `InvalidMessage` for memoryd, and a ``TypeError`` as the OpenAI Agents SDK's own
    sessions raise for such an item (`memoryd.integrations.openai_agents`). Nothing is written.
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


class UnknownConversation(MemorydError, LookupError):
    """A conversation that was never written was named where one must exist (a fork's
    source). Nothing was written."""


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


class UnknownStore(StoreNotRunning, LookupError):
    """The daemon has no store of that name: none was ever written (a read never creates one).

    A `memoryd.connect` handle reads such a store as empty (its first write creates it);
    the command line, and a handle made with ``empty_when_missing=False``, raise this.
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


class DiskFull(StorageError):
    """The file system holding the store has no space left: nothing of the write was stored.

    The store keeps running and serves reads; it refuses writes at once while the disk
    stays full, and writes again once space is freed. Retry later, with the same
    ``idempotency_key``.
    """


class ProtocolError(MemorydError):
    """The daemon answered with something this client does not understand."""


class ExportFormatError(MemorydError, ValueError):
    """A line of an export file is not valid; the message names the line.

    Attributes:
        line: The 1-based number of the first bad line.
        problem: What is wrong with it.
    """

    line: int
    problem: str

    def __init__(self, line: int, problem: str) -> None:
        """Create the error.

        Args:
            line: The 1-based number of the bad line.
            problem: What is wrong with it.
        """
        super().__init__(f"line {line}: {problem}")
        self.line = line
        self.problem = problem

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle support that keeps ``line`` and ``problem``.

        Returns:
            The reduce tuple.
        """
        return (ExportFormatError, (self.line, self.problem))


class LLMError(MemorydError):
    """A chat model failed to answer (transport error, refusal, malformed reply, ...)."""


class ScriptExhausted(LLMError):
    """A `ScriptedModel` was called more often than its script has responses."""


class StepLimitExceeded(MemorydError):
    """The tool loop made ``max_steps`` LLM calls and the model still asked for tools."""


class ToolArgumentError(MemorydError, ValueError):
    """A tool's arguments do not match its JSON schema (nothing was called)."""


class UnknownRun(MemorydError, LookupError):
    """No run with that id is recorded in the agent's journal."""


class UnknownAgent(MemorydError, LookupError):
    """An `AgentSystem` was called with an agent type it was not started with."""


class Overloaded(MemorydError):
    """An agent instance's mailbox is full: the call is refused at once and nothing is
    written. Retry later, or start the system with a larger ``mailbox``."""


class CallTimeout(MemorydError, TimeoutError):
    """An agent call did not finish within its deadline.

    A call still queued is withdrawn (nothing is written); a run already started goes on
    and commits: call again with the same ``request_id`` to get its result.
    """


class CallCycle(MemorydError):
    """An agent call was made to an instance whose run is waiting on the caller: it
    would wait on itself. Nothing was queued; call another instance, or restructure
    the agents so that calls between instances form no cycle."""


class AgentSystemStopped(MemorydError):
    """The agent system was stopped: a new call is refused, and a call still waiting
    when it stopped is answered with this (a run it had started stays pending in the
    journal; start the system again with ``recover="resume"`` to finish it)."""


class SchemaError(MemorydError, ValueError):
    """A value does not match its schema, or the schema itself is malformed."""


class ExtractionError(MemorydError, ValueError):
    """The LLM's reply is not the JSON the extraction (or planning, or rerank) asked for."""


class DenseUnavailable(MemorydError, ImportError):
    """Dense retrieval was asked for but the ``dense`` extra is not installed."""


# --------------------------------------------------------------------------- internal signals


class EngineClosed(Exception):
    """A store's engine (LMDB environment, Redis client) is closing or closed: its actor
    stopped or restarts. Readers catch it and look the store's current engine up again."""


class EngineBusy(Exception):
    """A read that may not wait found the map growing (readers are paused)."""


class WouldWait(Exception):
    """A read made `without_waiting` would have had to wait (the store is restarting,
    or its map growing): nothing was read; read it again where waiting is harmless."""


class NotWritten(StoreUnavailable):
    """The store stopped before attempting this write: nothing was written; retry is safe."""


class ConnectFailed(Exception):
    """No connection could be made: the request was surely not sent."""


class TransportFailed(Exception):
    """The connection failed after the request was (perhaps) sent: outcome unknown."""


class HttpError(Exception):
    """An error the HTTP layer answers itself (bad body, too large, unauthorised, unknown).

    Args:
        status: the HTTP status.
        type_name: the error ``type`` in the body.
        message: what was wrong and what to do.
    """

    def __init__(self, status: int, type_name: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.type_name = type_name


class RunInterrupted(Exception):
    """An agent system stopped a run at a step boundary, its journal kept.

    Raised by an instance's step hook when the instance was killed or is being shut
    down, or when a run made in its caller's thread passed the call's deadline; the
    agent lets it through without discarding the run's journal, and the instance's
    (next) incarnation resumes the run in its own thread.
    """


class JsonProblem(Exception):
    """A JSON-compatibility problem found while copying; the path grows as it unwinds."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.parts: list[str | int] = []
