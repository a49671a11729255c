"""Reply: the one-shot answer slot a writer hands to its store actor with each write.

A write's caller blocks until the actor answers; with many writers that wait is
on the hot path of every append. ``pykka.ThreadingFuture`` builds on
``queue.Queue`` (a condition variable and a fresh waiter lock per wait); a reply
is answered exactly once, so one pre-acquired lock that the actor releases does
the same job with one lock operation on each side.

A committed batch is answered with `answer_in_turn`: every reply gets its answer at
once, but of the threads waiting on them only the first is woken by the actor, and
each woken thread wakes the next. Waking eight threads at once from the actor's
thread makes them fight for the interpreter lock the actor still holds (the
operating system runs a woken thread at once, often in the actor's place); woken in
turn, each finds it free.
"""

from __future__ import annotations

import collections
import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from types import TracebackType
from typing import Any

__all__ = ["Reply", "Turn", "Wake", "answer_in_turn", "answering", "at_end_of_answers"]

ExcInfo = tuple[type[BaseException], BaseException, TracebackType | None]


_answers = threading.local()

Wake = Callable[["Turn"], bool]
"""A waiter's wake-up at the end of an `answering` block: given the turn, it wakes its
waiter and returns True if that waiter will pass the turn on (`Turn.pass_on`), or
returns False (it woke nobody who will): the next waiter is woken at once."""


class Turn:
    """The right to wake the next waiter of a batch; passed on once.

    The waiters an `answering` block woke are woken one after another: the block
    wakes the first, and each woken waiter passes the turn on as it wakes. A turn
    passed twice passes nothing the second time.

    Args:
        rest: the wake-ups still to run, in order; shared by the turns of one block.
    """

    __slots__ = ("_passed", "_rest")

    def __init__(self, rest: collections.deque[Wake]) -> None:
        self._rest = rest
        self._passed = False

    def pass_on(self) -> None:
        """Wake the next waiter that will take the turn (once; later calls do nothing)."""
        if self._passed:
            return
        self._passed = True
        rest = self._rest
        while rest:
            wake = rest.popleft()  # only the turn's one holder pops
            try:
                if wake(Turn(rest)):
                    return
            except Exception:  # the waiter's side failed (never raised into the actor)
                continue


@contextlib.contextmanager
def answering() -> Iterator[None]:
    """Answer a batch's writers inside this block: the wake-ups their answers ask for
    with `at_end_of_answers` run once each, one after another, from the block's end.

    An event loop waiting for twenty answers of one batch is then woken once for all
    of them, not once for each of the answers that happened to land before it ran;
    and eight event loops, each waiting for one answer, are woken in turn like the
    threads of `answer_in_turn` (the first by the actor, each woken loop waking the
    next), not all at once to fight for the interpreter lock.
    """
    if getattr(_answers, "pending", None) is not None:
        yield  # nested: the outer block runs them
        return
    pending: dict[int, Wake] = {}
    _answers.pending = pending
    try:
        yield
    finally:
        _answers.pending = None
        if pending:
            Turn(collections.deque(pending.values())).pass_on()


def at_end_of_answers(key: object, wake: Wake) -> bool:
    """Inside `answering`, run ``wake`` once (per ``key``) in its turn after the block.

    Returns:
        True if it was put off; False outside `answering` (the caller wakes now).
    """
    pending: dict[int, Wake] | None = getattr(_answers, "pending", None)
    if pending is None:
        return False
    pending.setdefault(id(key), wake)
    return True


class Reply:
    """Set once by the actor (`set`, `set_exception` or `answer_in_turn`); waited for by
    the caller.

    Args:
        notify: called once in the answering thread right after the answer, e.g. to
            wake an event loop with ``loop.call_soon_threadsafe``; whatever it raises
            is swallowed (the waiter is gone), so the actor is never disturbed.
        in_turn: False for a writer that is not waiting yet (`StoreHandle.begin`): its
            answer is handed over at once, not in turn, until `join_turns`.
    """

    __slots__ = (
        "_abandoned",
        "_answered",
        "_error",
        "_in_turn",
        "_notify",
        "_ready",
        "_turn",
        "_value",
    )

    def __init__(self, notify: Callable[[], object] | None = None, *, in_turn: bool = True) -> None:
        self._ready = threading.Lock()
        self._ready.acquire()
        self._answered = False
        self._value: Any = None
        self._error: BaseException | None = None
        self._notify = notify
        self._in_turn = in_turn and notify is None
        """True when `answer_in_turn` leaves the wake-up to the previous waiter."""
        self._turn: list[Reply] = []
        """The reply whose waiter this one's waiter wakes (`answer_in_turn`); popped once."""
        self._abandoned = False

    def set(self, value: Any = None) -> None:
        """Answer with ``value``. Only the first answer counts (answers come from one thread)."""
        if not self._answered:
            self._answered = True
            self._value = value
            self._wake()

    def set_exception(self, exc_info: ExcInfo | BaseException) -> None:
        """Answer with an error (an exception or a ``sys.exc_info()``-style tuple)."""
        if not self._answered:
            self._answered = True
            self._error = exc_info[1] if isinstance(exc_info, tuple) else exc_info
            self._wake()

    def _wake(self) -> None:
        """Hand the answer over: release the waiting thread, then call ``notify``.

        A subclass whose waiter is not a thread (an event loop's) replaces this.
        """
        self._ready.release()
        if self._notify is not None:
            with contextlib.suppress(Exception):  # e.g. a closed event loop: nobody waits
                self._notify()

    def join_turns(self) -> None:
        """Be woken in turn from now on (a reply made with ``in_turn=False`` whose
        writer is about to wait): an answer given before this was handed over at once."""
        self._in_turn = self._notify is None

    def wait(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds for the answer; True once it is there.

        A waiter woken by `answer_in_turn` wakes the next waiter of its batch first.
        An answer that is there when the timeout ends counts, woken or not.
        """
        if self._ready.acquire(timeout=max(timeout, 0.0)):
            self._ready.release()  # later waits return at once
            self._pass_turn()
            return True
        if self._answered:  # answered in turn, the wake still on its way: take the answer
            self.abandon()  # and leave the turn to whoever releases this reply
            return True
        return False

    def abandon(self) -> None:
        """The caller stops waiting (it raises instead): its turn to wake is passed on.

        Call it from the waiting thread on every way out that does not end with
        `wait` returning True, so the waiters after it in the batch are still woken.
        """
        self._abandoned = True
        if self._ready.acquire(blocking=False):  # woken already: pass the turn on now
            self._ready.release()
            self._pass_turn()

    def _pass_turn(self) -> None:
        """Wake the next waiter of the batch, once, whoever gets here first."""
        following = self._take_turn()
        if following is not None:
            following._wake_in_turn()

    def _take_turn(self) -> Reply | None:
        """The reply whose waiter this one's wakes, taken once (by whoever asks first)."""
        if self._turn:
            try:
                return self._turn.pop()  # one atomic pop: a turn is passed once
            except IndexError:
                return None
        return None

    def _wake_in_turn(self) -> None:
        """Wake this reply's waiter; past waiters that gave up, wake the next ones here
        (a loop, not a call each: a batch of thousands of abandoned waiters, all timed
        out, is walked without growing the actor's stack)."""
        reply: Reply | None = self
        while reply is not None:
            reply._ready.release()
            if not reply._abandoned:  # its waiter passes the turn on when it wakes
                return
            reply = reply._take_turn()  # nobody will wake to pass it on: do it here

    @property
    def answered(self) -> bool:
        """True once the actor answered."""
        return self._answered

    def result(self) -> Any:
        """The answer: the value, or the error raised. Call after `wait` returned True."""
        if self._error is not None:
            raise self._error
        return self._value


def answer_in_turn(answers: Sequence[tuple[Reply, bool, Any]]) -> None:
    """Answer a batch's replies; their waiting threads are woken one after another.

    Replies with a ``notify``, and those of an event loop, are answered and notified at
    once. The others all hold their answer on return, but only the first one's waiter is
    woken here: each waiter wakes the next when it wakes (`Reply.wait`), or when it
    gives up waiting (`Reply.abandon`), so every waiter is woken, each once.

    Args:
        answers: ``(reply, ok, value)``: the value to answer with when ``ok``, else
            the error to raise; replies answered before are left as they are.
    """
    previous: Reply | None = None
    first: Reply | None = None
    for reply, ok, value in answers:
        if reply._answered:
            continue
        if not reply._in_turn:
            if ok:
                reply.set(value)
            else:
                reply.set_exception(value)
            continue
        reply._answered = True
        if ok:
            reply._value = value
        else:
            reply._error = value
        if previous is None:
            first = reply
        else:
            previous._turn.append(reply)
        previous = reply
    if first is not None:
        first._wake_in_turn()
