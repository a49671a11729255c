"""Pure workload values: settings, message texts, conversation ids, percentiles.

Nothing in this module does I/O or reads a clock.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

Message = dict[str, object]

_WORDS = (
    "agent",
    "memory",
    "durable",
    "append",
    "reply",
    "context",
    "window",
    "token",
    "summary",
    "history",
    "session",
    "tool",
    "result",
    "answer",
    "question",
    "prompt",
    "cache",
    "event",
    "version",
    "commit",
    "reader",
    "writer",
    "store",
    "actor",
    "the",
    "a",
    "of",
    "to",
    "and",
    "in",
    "is",
    "for",
    "with",
    "that",
    "on",
    "my",
)


@dataclass(frozen=True, kw_only=True, slots=True)
class Settings:
    """Sizes of one benchmark run.

    Attributes:
        appends: appends timed per (peer, writer count); split evenly across writers
            and across rounds.
        rounds: the appends of each writer count are made in this many rounds, the
            peers taking turns, so a slow patch of the machine is shared by all.
        writers: writer-thread counts to measure, e.g. (1, 8).
        convs_per_writer: conversations each writer appends to, round-robin.
        warmup: untimed appends per writer before the clock starts.
        text_chars: approximate length of each appended message's content.
        read_convs: conversations in the read store.
        read_msgs: messages per conversation in the read store.
        big_convs: conversations in ours' large read store.
        big_filler_msgs: messages per unmeasured conversation in the large store.
        sample: conversations whose reads are timed.
        reads: timed reads per measurement (cycling through the sample).
        last_n: size of the "last N messages" read.
        populate_batch: messages per ``add`` call when populating ours.
        populate_threads: concurrent threads populating ours (to use group commit).
    """

    appends: int = 2000
    rounds: int = 5
    writers: tuple[int, ...] = (1, 8)
    convs_per_writer: int = 4
    warmup: int = 20
    text_chars: int = 200
    read_convs: int = 1000
    read_msgs: int = 200
    big_convs: int = 100_000
    big_filler_msgs: int = 5
    sample: int = 50
    reads: int = 1000
    last_n: int = 50
    populate_batch: int = 50
    populate_threads: int = 16


QUICK = Settings(
    appends=200,
    rounds=2,
    warmup=5,
    read_convs=100,
    big_convs=2000,
    sample=20,
    reads=200,
)


def make_texts(count: int, chars: int, seed: int = 7) -> list[str]:
    """Return ``count`` distinct pseudo-random sentences of about ``chars`` characters.

    Args:
        count: how many texts.
        chars: target length of each text (the result is within one word of it).
        seed: seed of the private random generator, so runs are repeatable.

    Returns:
        The texts, each a different word sequence ending with its index.
    """
    rng = random.Random(seed)
    texts: list[str] = []
    for index in range(count):
        words: list[str] = []
        length = 0
        tail = f" #{index}."
        while length + len(tail) < chars:
            word = rng.choice(_WORDS)
            words.append(word)
            length += len(word) + 1
        texts.append(" ".join(words) + tail)
    return texts


def writer_conversations(writer: int, count: int) -> list[str]:
    """Return the conversation ids that one writer thread appends to.

    Args:
        writer: the writer's index.
        count: conversations per writer.

    Returns:
        ``count`` ids, unique across writers.
    """
    return [f"bench-w{writer}-c{k}" for k in range(count)]


def read_conversation_id(index: int) -> str:
    """Return the id of conversation ``index`` in a read store."""
    return f"conv-{index:06d}"


def conversation_messages(index: int, count: int, texts: Sequence[str]) -> list[Message]:
    """Return the ``count`` messages of read-store conversation ``index``.

    Messages alternate user / assistant and their texts are unique per (index, position)
    through a rotating offset into ``texts``, so a read that returns the wrong records
    is caught by content comparison.

    Args:
        index: the conversation's index.
        count: how many messages.
        texts: the text pool from :func:`make_texts`.

    Returns:
        Fresh message dicts in chronological order.
    """
    messages: list[Message] = []
    for position in range(count):
        role = "user" if position % 2 == 0 else "assistant"
        text = texts[(index * 31 + position) % len(texts)]
        messages.append({"role": role, "content": f"{index}:{position} {text}"})
    return messages


def sample_indices(total: int, count: int, seed: int = 11) -> list[int]:
    """Return ``min(count, total)`` distinct, sorted, repeatable indices in ``range(total)``."""
    return sorted(random.Random(seed).sample(range(total), min(count, total)))


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """Return the nearest-rank percentile of already sorted values.

    Args:
        sorted_values: ascending values; must not be empty.
        fraction: 0 < fraction <= 1, e.g. 0.99.

    Returns:
        The smallest value with at least ``fraction`` of the values at or below it.

    Raises:
        ValueError: if ``sorted_values`` is empty.
    """
    if not sorted_values:
        raise ValueError("percentile of no values")
    rank = max(1, math.ceil(fraction * len(sorted_values)))
    return sorted_values[rank - 1]
