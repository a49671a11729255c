"""memoryd: durable conversation memory for LLM agents.

An event-sourced actor system: every store is a supervised Pykka actor that owns
its LMDB environment; every change is an msgpack event, fsynced before it is
acknowledged.

```python
import memoryd
from memoryd import messages

store = memoryd.LmdbStore.start("data/chat", name="my_mem")
store.add("session-1", [messages.user("My name is Alice")])
store.get("session-1", limit=50)
```
"""

from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

from memoryd import messages
from memoryd._version import __version__
from memoryd.agent import Agent, PendingRun, RunResult
from memoryd.api import default_store, shutdown, whereis
from memoryd.errors import (
    AlreadyStarted,
    AuthenticationError,
    ConflictError,
    CorruptRecord,
    InvalidConversationId,
    InvalidMessage,
    MemorydError,
    StorageError,
    StoreNotRunning,
    StoreUnavailable,
    WriteTimeout,
)
from memoryd.events import Change, Event, EventKind
from memoryd.kernel import (
    ChatRequest,
    Context,
    Filter,
    InvokeResult,
    Kernel,
    StepLimitExceeded,
    Tool,
    ToolArgumentError,
    ToolCall,
    ToolResult,
    UnknownRun,
    memory_filter,
    tool,
)
from memoryd.memory import LongTermMemory
from memoryd.provider import (
    DefaultProvider,
    Explanation,
    MemoryProvider,
    Session,
    SummarizingProvider,
    explain,
    preprocessors,
    safe_window,
    window,
)
from memoryd.store.handle import StoreHandle
from memoryd.store.lmdb_store import EphemeralStore, LmdbStore

if _TYPE_CHECKING:
    from memoryd.aio import AsyncStore
    from memoryd.client import RemoteStore, connect
    from memoryd.store.redis_store import RedisStore

__all__ = [
    "Agent",
    "AlreadyStarted",
    "AsyncStore",
    "AuthenticationError",
    "Change",
    "ChatRequest",
    "ConflictError",
    "Context",
    "CorruptRecord",
    "DefaultProvider",
    "EphemeralStore",
    "Event",
    "EventKind",
    "Explanation",
    "Filter",
    "InvalidConversationId",
    "InvalidMessage",
    "InvokeResult",
    "Kernel",
    "LmdbStore",
    "LongTermMemory",
    "MemoryProvider",
    "MemorydError",
    "PendingRun",
    "RedisStore",
    "RemoteStore",
    "RunResult",
    "Session",
    "StepLimitExceeded",
    "StorageError",
    "StoreHandle",
    "StoreNotRunning",
    "StoreUnavailable",
    "SummarizingProvider",
    "Tool",
    "ToolArgumentError",
    "ToolCall",
    "ToolResult",
    "UnknownRun",
    "WriteTimeout",
    "__version__",
    "connect",
    "default_store",
    "explain",
    "memory_filter",
    "messages",
    "preprocessors",
    "safe_window",
    "shutdown",
    "tool",
    "whereis",
    "window",
]


def __getattr__(name: str) -> _Any:
    """``connect`` and ``RemoteStore`` load the HTTP client (httpx), ``RedisStore``
    redis-py, ``AsyncStore`` the asyncio face, on first use."""
    if name == "AsyncStore":
        from memoryd import aio  # noqa: PLC0415 (asyncio face only when used)

        return aio.AsyncStore
    if name in ("connect", "RemoteStore"):
        from memoryd import client  # noqa: PLC0415 (httpx only when a daemon is used)

        return getattr(client, name)
    if name == "RedisStore":
        from memoryd.store import redis_store  # noqa: PLC0415 (redis-py only when used)

        return redis_store.RedisStore
    raise AttributeError(f"module 'memoryd' has no attribute {name!r}")
