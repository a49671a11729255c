"""Ctrl-C held back over the few steps that must not be cut in two.

A SIGINT raises ``KeyboardInterrupt`` at whichever bytecode the main thread runs next.
Between a call that makes something (a file, a directory) and the ``try`` that would
remove it again, that is a leak: the thing is made and nobody knows its name. Holding
Ctrl-C over the making and the naming closes that gap.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator


@contextlib.contextmanager
def held(*, ignore_after: bool = False) -> Iterator[list[int]]:
    """Hold Ctrl-C back for the block: a SIGINT that comes meanwhile is recorded in the
    list yielded, not raised.

    Outside the main thread signals are not this thread's to handle (none are raised
    here), and the block runs as it is.

    Args:
        ignore_after: leave Ctrl-C ignored after the block (the process exits next)
            instead of restoring its handler.

    Yields:
        The SIGINTs that came during the block; the caller acts on them after it.
    """
    came: list[int] = []
    try:
        previous = signal.signal(signal.SIGINT, lambda signum, frame: came.append(signum))
    except ValueError:  # not the main thread
        previous = None
    try:
        yield came
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, signal.SIG_IGN if ignore_after else previous)
