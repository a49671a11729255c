"""The LLM boundary: the `ChatModel` protocol and the models memoryd ships.

```python
from memoryd.llm import ScriptedModel

model = ScriptedModel(["Hello Alice!"])
model.complete([{"role": "user", "content": "My name is Alice"}])
```

`OpenAIChat` (any OpenAI-compatible endpoint) needs ``httpx``; it is imported on
first use, so the rest of memoryd works without it.
"""

from typing import TYPE_CHECKING, Any

from memoryd.errors import LLMError, ScriptExhausted
from memoryd.llm.base import ChatModel
from memoryd.llm.scripted import ScriptedModel

if TYPE_CHECKING:
    from memoryd.llm.openai import OpenAIChat

__all__ = ["ChatModel", "LLMError", "OpenAIChat", "ScriptExhausted", "ScriptedModel"]


def __getattr__(name: str) -> Any:
    if name == "OpenAIChat":
        from memoryd.llm.openai import OpenAIChat  # noqa: PLC0415 - httpx only when used

        return OpenAIChat
    raise AttributeError(f"module 'memoryd.llm' has no attribute {name!r}")
