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

from memoryd import messages
from memoryd._version import __version__
from memoryd.api import default_store, shutdown, whereis
from memoryd.errors import (
    AlreadyStarted,
    ConflictError,
    CorruptRecord,
    InvalidConversationId,
    InvalidMessage,
    MemorydError,
    StorageError,
    StoreUnavailable,
    WriteTimeout,
)
from memoryd.events import Change, Event, EventKind
from memoryd.store.handle import StoreHandle
from memoryd.store.lmdb_store import EphemeralStore, LmdbStore

__all__ = [
    "AlreadyStarted",
    "Change",
    "ConflictError",
    "CorruptRecord",
    "EphemeralStore",
    "Event",
    "EventKind",
    "InvalidConversationId",
    "InvalidMessage",
    "LmdbStore",
    "MemorydError",
    "StorageError",
    "StoreHandle",
    "StoreUnavailable",
    "WriteTimeout",
    "__version__",
    "default_store",
    "messages",
    "shutdown",
    "whereis",
]
