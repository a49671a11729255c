"""The errors of the kernel and agent layers (all under `memoryd.MemorydError`).

```
MemorydError
├── StepLimitExceeded            the tool loop reached max_steps without a final answer
├── ToolArgumentError(ValueError)  a tool was called with arguments its schema refuses
└── UnknownRun(LookupError)      resume() was given a run id the journal does not hold
```
"""

from __future__ import annotations

from memoryd.errors import MemorydError

__all__ = ["StepLimitExceeded", "ToolArgumentError", "UnknownRun"]


class StepLimitExceeded(MemorydError):
    """The tool loop made ``max_steps`` LLM calls and the model still asked for tools."""


class ToolArgumentError(MemorydError, ValueError):
    """A tool's arguments do not match its JSON schema (nothing was called)."""


class UnknownRun(MemorydError, LookupError):
    """No run with that id is recorded in the agent's journal."""
