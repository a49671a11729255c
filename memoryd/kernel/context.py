"""Context: the immutable value that travels with one kernel invoke or agent run."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from memoryd import messages as msgs

__all__ = ["Context"]


def _freeze(metadata: Any) -> Mapping[str, Any]:
    if not isinstance(metadata, Mapping):
        raise TypeError(f"Context metadata must be a mapping, not {type(metadata).__name__}")
    for key in metadata:
        if not isinstance(key, str):
            raise TypeError(f"Context metadata keys must be str, got {key!r}")
    return MappingProxyType(dict(metadata))


@dataclass(frozen=True, kw_only=True, slots=True)
class Context:
    """Which conversation an invoke belongs to, plus free-form metadata for filters.

    ```python
    ctx = Context(conversation_id="session-1").with_metadata(user="alice")
    ```

    Attributes:
        conversation_id: The conversation the memory filter reads and writes; None
            means "no conversation" (a memory filter then uses an ephemeral one).
        metadata: Read-only str-keyed values for filters (user id, trace id, ...).

    Raises:
        InvalidConversationId: A bad ``conversation_id``.
        TypeError: ``metadata`` is not a str-keyed mapping.
    """

    conversation_id: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        if self.conversation_id is not None:
            object.__setattr__(
                self, "conversation_id", msgs.validate_turn_conversation_id(self.conversation_id)
            )
        object.__setattr__(self, "metadata", _freeze(self.metadata))

    @classmethod
    def of_run(cls, conversation_id: str, run_id: str) -> Context:
        """The context of an agent's run: ``conversation_id``, checked already by the
        run, and ``{"run_id": run_id}`` (made without checking again: every run has one).

        Args:
            conversation_id: The run's conversation id, as `validate_conversation_id`
                returned it.
            run_id: The run id.

        Returns:
            The context.
        """
        made = object.__new__(cls)
        object.__setattr__(made, "conversation_id", conversation_id)
        object.__setattr__(made, "metadata", MappingProxyType({"run_id": run_id}))
        return made

    def with_conversation_id(self, conversation_id: str | None) -> Context:
        """A copy bound to another conversation.

        Args:
            conversation_id: The conversation id, or None.

        Returns:
            The new context.
        """
        return dataclasses.replace(self, conversation_id=conversation_id)

    def with_metadata(self, **values: Any) -> Context:
        """A copy with ``values`` merged into the metadata.

        Args:
            **values: The entries to add or replace.

        Returns:
            The new context.
        """
        return dataclasses.replace(self, metadata={**self.metadata, **values})

    def without_metadata(self, *keys: str) -> Context:
        """A copy without the given metadata keys (missing keys are ignored).

        Args:
            *keys: The keys to drop.

        Returns:
            The new context.
        """
        return dataclasses.replace(
            self, metadata={k: v for k, v in self.metadata.items() if k not in keys}
        )
