"""Writer processes that add through daemons and log each acknowledgement, and the check
that every acknowledged add is stored exactly once, in order (see ``tests.client._writer``)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.client._writer import read_acks

__all__ = ["assert_each_ack_stored_once", "start_writers"]


def start_writers(
    addresses: Sequence[str], prefix: str, count: int, acks: Sequence[Path]
) -> list[subprocess.Popen[bytes]]:
    """One writer a file of ``acks``: writer ``c`` adds ``count`` messages to conversation
    ``{prefix}{c}`` through ``addresses[c % len(addresses)]``."""
    return [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.client._writer",
                addresses[c % len(addresses)],
                f"{prefix}{c}",
                str(count),
                str(path),
            ]
        )
        for c, path in enumerate(acks)
    ]


def assert_each_ack_stored_once(store: Any, prefix: str, count: int, acks: Sequence[Path]) -> None:
    """Each writer saw all its ``count`` adds acknowledged, with versions 1 to ``count``, and
    its conversation in ``store`` holds each message once, in the order it was written."""
    for c, path in enumerate(acks):
        acked = read_acks(path)
        assert [i for i, _ in acked] == list(range(count))
        assert [v for _, v in acked] == list(range(1, count + 1))
        texts = [m["content"] for m in store.get(f"{prefix}{c}")]
        assert texts == [f"{prefix}{c}-{i}" for i in range(count)]
