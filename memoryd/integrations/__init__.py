"""Adapters that let framework code keep its memory in a memoryd store.

Each adapter lives in its own module and imports its framework, so import the one
you use; ``import memoryd`` (and this package) imports neither:

- `memoryd.integrations.openai_agents.MemorydSession`: an OpenAI Agents SDK
  ``Session`` (extra ``memoryd[openai-agents]``).
- `memoryd.integrations.langchain.MemorydChatMessageHistory`: a LangChain
  ``BaseChatMessageHistory`` (extra ``memoryd[langchain]``).
"""

__all__: list[str] = []
