"""The kernel: filters, the tool loop, the memory filter and tools (beamai's kernel path)."""

from memoryd.errors import StepLimitExceeded, ToolArgumentError, UnknownRun
from memoryd.kernel.context import Context
from memoryd.kernel.filters import (
    ChatNext,
    ChatRequest,
    Filter,
    SystemPromptFilter,
    ToolCall,
    ToolNext,
    ToolResult,
)
from memoryd.kernel.kernel import InvokeResult, Kernel, message_text
from memoryd.kernel.memory import MemoryFilter, memory_filter
from memoryd.kernel.tools import Tool, tool

__all__ = [
    "ChatNext",
    "ChatRequest",
    "Context",
    "Filter",
    "InvokeResult",
    "Kernel",
    "MemoryFilter",
    "StepLimitExceeded",
    "SystemPromptFilter",
    "Tool",
    "ToolArgumentError",
    "ToolCall",
    "ToolNext",
    "ToolResult",
    "UnknownRun",
    "memory_filter",
    "message_text",
    "tool",
]
