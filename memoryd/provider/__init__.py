"""The policy layer: what each LLM call sees; the store keeps the full log.

`MemoryProvider` (beamai's provider), `ChatStore` (the protocol a user's store meets),
`DefaultProvider` with `safe_window`, Koog's `preprocessors`, Agently's `Session`, the
`SummarizingProvider`, and `explain`.
"""

from memoryd.provider import preprocessors
from memoryd.provider.chat_store import ChatStore
from memoryd.provider.default import DefaultProvider, window
from memoryd.provider.explain import Explanation, explain
from memoryd.provider.protocol import MemoryProvider
from memoryd.provider.safe_window import safe_window
from memoryd.provider.session import Session
from memoryd.provider.summarizing import SummarizingProvider

__all__ = [
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
]
