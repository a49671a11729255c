"""The deadline of the call a thread or task is working for, carried into the store calls
it makes.

A store call has a deadline of its own (a handle's ``call_timeout_s``, a daemon client's
``timeout``), counted from when it starts. Code working for a caller that has a deadline
of its own (an agent system's call, run in its caller's thread) runs under `bounded`,
and every store call made meanwhile ends by the sooner of the two: a store that stopped
answering holds the caller up to the caller's deadline, not to the store's.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Iterator

__all__ = ["bounded", "until"]

_deadline: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "memoryd_deadline", default=None
)


def until(timeout_s: float) -> float:
    """The ``time.monotonic()`` deadline of a store call that may take ``timeout_s``:
    sooner when the code making it runs under a caller's deadline (`bounded`)."""
    own = time.monotonic() + timeout_s
    outer = _deadline.get()
    return own if outer is None or outer > own else outer


@contextlib.contextmanager
def bounded(deadline: float) -> Iterator[None]:
    """Bound the store calls made in the block (in this thread or task, and in the worker
    threads it starts with `asyncio.to_thread`, which copy its context) by ``deadline``
    (``time.monotonic()``), or by a sooner one already in force."""
    outer = _deadline.get()
    token = _deadline.set(deadline if outer is None or deadline < outer else outer)
    try:
        yield
    finally:
        _deadline.reset(token)
