"""Long-term memory: scoped records extracted by an LLM and recalled with BM25.

```python
from memoryd.memory import LongTermMemory

memory = LongTermMemory(store, llm=model)            # global + session scopes
agent = memoryd.Agent(llm=model, memory=memory)
```

Records are ``memo`` events in per-scope records conversations (`records`); bm25s (the
``memory`` extra) is imported only on the first retrieval.
"""

from memoryd.memory.extract import DEFAULT_EXTRACTION_INSTRUCTION, ExtractionError, Fact
from memoryd.memory.filter import RecallFilter
from memoryd.memory.provider import LongTermMemory
from memoryd.memory.records import MemoryRecord, Provenance, fold, records_conversation
from memoryd.memory.retrieve import Diagnostic, Recall
from memoryd.memory.schema import DEFAULT_BODY_SCHEMA, SchemaError, validate_body

__all__ = [
    "DEFAULT_BODY_SCHEMA",
    "DEFAULT_EXTRACTION_INSTRUCTION",
    "Diagnostic",
    "ExtractionError",
    "Fact",
    "LongTermMemory",
    "MemoryRecord",
    "Provenance",
    "Recall",
    "RecallFilter",
    "SchemaError",
    "fold",
    "records_conversation",
    "validate_body",
]
