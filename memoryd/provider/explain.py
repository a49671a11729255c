"""explain: what a provider's prepare dropped, changed or summarised, and why.

```python
print(memoryd.explain(provider, "session-1"))
# session-1: 240 stored -> 53 loaded -> 50 sent
#   safe_window(50): ...                  53 -> 50  dropped user=2 tool=1
#   summary: versions 1..180 (412 messages) are one system message (compacted v181)
```
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memoryd.provider.protocol import MemoryProvider
from memoryd.provider.safe_window import check_messages

__all__ = ["Explanation", "Step", "explain"]

Message = dict[str, Any]


@dataclass(frozen=True, kw_only=True, slots=True)
class Step:
    """One step of a prepare.

    Attributes:
        name: What the step does (its ``describe()``).
        before: Messages in.
        after: Messages out.
        dropped: Messages removed, by role.
        changed: Messages out that are not among the messages in (cut or rewritten).
    """

    name: str
    before: int
    after: int
    dropped: dict[str, int]
    changed: int


@dataclass(frozen=True, kw_only=True, slots=True)
class Explanation:
    """What one prepare did.

    Attributes:
        conversation_id: The conversation.
        stored: Messages the store holds now.
        loaded: Messages the provider's history returned (with the extra messages).
        sent: Messages prepare returned.
        steps: The steps, in order.
        summary: The summary in effect (a `SummarizingProvider`), or None.
    """

    conversation_id: str
    stored: int
    loaded: int
    sent: int
    steps: tuple[Step, ...]
    summary: dict[str, Any] | None = None

    def __str__(self) -> str:
        lines = [
            f"{self.conversation_id}: {self.stored} stored -> {self.loaded} loaded "
            f"-> {self.sent} sent"
        ]
        for step in self.steps:
            dropped = " ".join(f"{role}={n}" for role, n in sorted(step.dropped.items()))
            line = f"  {step.name}: {step.before} -> {step.after}"
            if dropped:
                line += f"  dropped {dropped}"
            if step.changed:
                line += f"  changed {step.changed}"
            lines.append(line)
        if self.summary is not None:
            span = self.summary.get("replaces", {})
            lines.append(
                f"  summary: versions {span.get('from_version')}..{span.get('to_version')} "
                f"({self.summary.get('replaced_messages')} messages) are one system message "
                f"(compacted v{self.summary.get('version')})"
            )
        return "\n".join(lines)


def _key(message: Message) -> str:
    return json.dumps(message, sort_keys=True, default=str)


def _step(name: str, before: Sequence[Message], after: Sequence[Message]) -> Step:
    before_keys = Counter(_key(m) for m in before)
    after_keys = Counter(_key(m) for m in after)
    roles: Counter[str] = Counter()
    gone = before_keys - after_keys
    for message in before:
        key = _key(message)
        if gone[key] > 0:
            gone[key] -= 1
            roles[str(message.get("role"))] += 1
    changed = sum((after_keys - before_keys).values())
    return Step(
        name=name, before=len(before), after=len(after), dropped=dict(roles), changed=changed
    )


def explain(provider: MemoryProvider, cid: str, messages: Sequence[Message] = ()) -> Explanation:
    """Run ``provider``'s history and prepare step by step and report each step.

    Providers with a ``stages()`` method (`DefaultProvider`, `SummarizingProvider`) are
    reported per step; any other provider as one ``prepare`` step.

    Args:
        provider: The provider.
        cid: The conversation id.
        messages: Messages of the current turn, appended to the history as an agent would.

    Returns:
        The explanation; ``str()`` of it is a readable report.

    Raises:
        InvalidMessage: ``messages`` is not a list of message dicts.
    """
    extra = check_messages(list(messages))
    loaded = provider.history(cid) + extra
    store = getattr(provider, "store", None)
    stored = len(store.get(cid)) if store is not None else len(loaded)
    steps: list[Step] = []
    stages = getattr(provider, "stages", None)
    current = list(loaded)
    if callable(stages):
        for name, step in stages():
            after = step(list(current))
            steps.append(_step(name, current, after))
            current = after
    else:
        current = provider.prepare(cid, list(loaded))
        steps.append(_step("prepare", loaded, current))
    compaction = getattr(provider, "compaction", None)
    summary = compaction(cid) if callable(compaction) else None
    return Explanation(
        conversation_id=cid,
        stored=stored,
        loaded=len(loaded),
        sent=len(current),
        steps=tuple(steps),
        summary=summary,
    )
