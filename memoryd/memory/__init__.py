"""Long-term memory: scoped records extracted by an LLM and recalled by BM25 or embeddings.

```python
from memoryd.memory import LongTermMemory

memory = LongTermMemory(store, llm=model)                      # global + session scopes
memory = LongTermMemory(store, llm=model, retrieval="hybrid")  # BM25 + all-MiniLM-L6-v2
agent = memoryd.Agent(llm=model, memory=memory)
```

Records are ``memo`` events in per-scope records conversations (`records`, written by
`book`); bm25s (the ``memory`` extra) is imported only on the first retrieval, the
sentence-transformers model (the ``dense`` extra, `dense`) on the first dense one.
`search` holds the retrieval modes, `plan` the LLM query planning, `pipeline` the
recall steps (plan, search, rerank) and `retrieve` BM25, the rerank and the memory block.
"""

from memoryd.errors import DenseUnavailable, ExtractionError, SchemaError
from memoryd.memory.extract import DEFAULT_EXTRACTION_INSTRUCTION, Fact
from memoryd.memory.filter import Recaller, RecallFilter
from memoryd.memory.longterm import LongTermMemory
from memoryd.memory.pipeline import RecallSettings
from memoryd.memory.plan import DEFAULT_PLAN_INSTRUCTION
from memoryd.memory.records import MemoryRecord, Provenance, fold, records_conversation
from memoryd.memory.retrieve import Diagnostic, Recall
from memoryd.memory.schema import DEFAULT_BODY_SCHEMA, validate_body
from memoryd.memory.search import RETRIEVALS

__all__ = [
    "DEFAULT_BODY_SCHEMA",
    "DEFAULT_EXTRACTION_INSTRUCTION",
    "DEFAULT_PLAN_INSTRUCTION",
    "RETRIEVALS",
    "DenseUnavailable",
    "Diagnostic",
    "ExtractionError",
    "Fact",
    "LongTermMemory",
    "MemoryRecord",
    "Provenance",
    "Recall",
    "RecallFilter",
    "RecallSettings",
    "Recaller",
    "SchemaError",
    "fold",
    "records_conversation",
    "validate_body",
]
