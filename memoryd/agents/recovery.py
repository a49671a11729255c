"""Which pending runs an agent system recovers: the orphaned runs of its agent types."""

from __future__ import annotations

import time
from collections.abc import Collection

from memoryd.agent.journal import RunJournal, RunRecord
from memoryd.agent.locks import active_runs
from memoryd.agents.naming import split_conversation
from memoryd.store.handle import StoreHandle

__all__ = ["orphaned_runs"]


def orphaned_runs(store: StoreHandle, agent_types: Collection[str]) -> list[RunRecord]:
    """The store's pending runs that belong to ``agent_types`` and that no live process
    holds (store-wide, oldest first), found without knowing any conversation id.

    A run belongs to a type when its conversation is ``"<type>/<key>"``.

    Args:
        store: The store.
        agent_types: The agent types.

    Returns:
        Their journal records.
    """
    now, here = time.time(), active_runs()
    return [
        record
        for record in RunJournal(store).pending()
        if split_conversation(record.conversation_id)[0] in agent_types
        and record.orphaned(now, record.run_id in here)
    ]
