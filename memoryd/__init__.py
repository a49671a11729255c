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

import functools as _functools
import importlib as _importlib
from collections.abc import Callable as _Callable
from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

from memoryd import messages
from memoryd._after_import import when_imported as _when_imported
from memoryd._version import __version__
from memoryd.errors import (
    AgentSystemStopped,
    AlreadyStarted,
    AuthenticationError,
    CallCycle,
    CallTimeout,
    ConflictError,
    CorruptRecord,
    DenseUnavailable,
    DiskFull,
    ExportFormatError,
    ExtractionError,
    InvalidConversationId,
    InvalidMessage,
    InvalidSessionItem,
    LLMError,
    MemorydError,
    Overloaded,
    ProtocolError,
    SchemaError,
    ScriptExhausted,
    StepLimitExceeded,
    StorageError,
    StoreNotRunning,
    StoreUnavailable,
    ToolArgumentError,
    UnknownAgent,
    UnknownConversation,
    UnknownRun,
    UnknownStore,
    WriteTimeout,
)
from memoryd.events import EventKind

if _TYPE_CHECKING:
    from memoryd.agent import Agent, PendingRun, RunResult
    from memoryd.agents import AgentSystem
    from memoryd.aio import AsyncStore
    from memoryd.app import shutdown
    from memoryd.client.remote import RemoteStore, connect
    from memoryd.events import Change, Event
    from memoryd.kernel import (
        ChatRequest,
        Context,
        Filter,
        InvokeResult,
        Kernel,
        Tool,
        ToolCall,
        ToolResult,
        memory_filter,
        tool,
    )
    from memoryd.memory import LongTermMemory
    from memoryd.provider import (
        ChatStore,
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
    from memoryd.store.default import default_store
    from memoryd.store.handle import StoreHandle
    from memoryd.store.lmdb.handle import EphemeralStore, LmdbStore
    from memoryd.store.lookup import whereis
    from memoryd.store.redis.handle import RedisStore

_LAZY = {
    **dict.fromkeys(("Agent", "PendingRun", "RunResult"), "memoryd.agent"),
    "AgentSystem": "memoryd.agents",
    **dict.fromkeys(
        (
            "ChatRequest",
            "Context",
            "Filter",
            "InvokeResult",
            "Kernel",
            "Tool",
            "ToolCall",
            "ToolResult",
            "memory_filter",
            "tool",
        ),
        "memoryd.kernel",
    ),
    "LongTermMemory": "memoryd.memory",
    **dict.fromkeys(
        (
            "ChatStore",
            "DefaultProvider",
            "Explanation",
            "MemoryProvider",
            "Session",
            "SummarizingProvider",
            "explain",
            "preprocessors",
            "safe_window",
            "window",
        ),
        "memoryd.provider",
    ),
    "AsyncStore": "memoryd.aio",
    "Change": "memoryd.events",
    "Event": "memoryd.events",
    "RemoteStore": "memoryd.client.remote",
    "connect": "memoryd.client.remote",
    "RedisStore": "memoryd.store.redis.handle",
    "shutdown": "memoryd.app",
    "default_store": "memoryd.store.default",
    "StoreHandle": "memoryd.store.handle",
    "EphemeralStore": "memoryd.store.lmdb.handle",
    "LmdbStore": "memoryd.store.lmdb.handle",
    "whereis": "memoryd.store.lookup",
}
"""Names loaded on first use, and their modules: a program loads only the stack it uses
(a daemon client does not load LMDB, the actors or structlog; a program that only stores
and reads conversations does not load the agent, kernel, provider and memory stacks, the
daemon client or redis-py; a daemon client that only reads messages does not build the
event records)."""
_SUBPACKAGES = frozenset({"agent", "agents", "kernel", "memory", "provider"})

__all__ = [
    "Agent",
    "AgentSystem",
    "AgentSystemStopped",
    "AlreadyStarted",
    "AsyncStore",
    "AuthenticationError",
    "CallCycle",
    "CallTimeout",
    "Change",
    "ChatRequest",
    "ChatStore",
    "ConflictError",
    "Context",
    "CorruptRecord",
    "DefaultProvider",
    "DenseUnavailable",
    "DiskFull",
    "EphemeralStore",
    "Event",
    "EventKind",
    "Explanation",
    "ExportFormatError",
    "ExtractionError",
    "Filter",
    "InvalidConversationId",
    "InvalidMessage",
    "InvalidSessionItem",
    "InvokeResult",
    "Kernel",
    "LLMError",
    "LmdbStore",
    "LongTermMemory",
    "MemoryProvider",
    "MemorydError",
    "Overloaded",
    "PendingRun",
    "ProtocolError",
    "RedisStore",
    "RemoteStore",
    "RunResult",
    "SchemaError",
    "ScriptExhausted",
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
    "UnknownAgent",
    "UnknownConversation",
    "UnknownRun",
    "UnknownStore",
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


def _load(module: str) -> _Callable[[], object]:
    return _functools.partial(_importlib.import_module, module)


# Loaded on first need, so a daemon client loads neither: memoryd.logging (structlog's
# routing into the standard loggers) as soon as structlog or pykka is imported, before
# any module can log through them; the supervision tree (which attaches itself to the
# table of stores) as soon as that table is, when a store backend is first imported.
_when_imported("structlog", _load("memoryd.logging"))
_when_imported("pykka", _load("memoryd.logging"))
_when_imported("memoryd.store.lookup", _load("memoryd.app"))


def __getattr__(name: str) -> _Any:
    """Load a lazy name (`_LAZY`) or one of the subpackages on first use, then keep it."""
    module_name = _LAZY.get(name)
    if module_name is None and name in _SUBPACKAGES:
        module_name = f"memoryd.{name}"
        value = _importlib.import_module(module_name)
    elif module_name is None:
        raise AttributeError(f"module 'memoryd' has no attribute {name!r}")
    else:
        value = getattr(_importlib.import_module(module_name), name)
    globals()[name] = value
    return value
