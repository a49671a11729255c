"""The write path's hand-over parts: `Reply` (one answer per write, answers woken in
turn) and the actor inbox (`Submission` items)."""

from __future__ import annotations

import threading
import time

import pytest

from memoryd.errors import ConflictError
from memoryd.store import requests
from memoryd.store.actor import Submission, _Inbox
from memoryd.store.reply import Reply, Turn, answer_in_turn, answering, at_end_of_answers


def test_a_reply_hands_over_its_value_across_threads() -> None:
    """The waiter sleeps until the other thread answers, then sees the value."""
    reply = Reply()
    answered = threading.Timer(0.05, reply.set, args=(7,))
    answered.start()
    assert reply.wait(5.0)
    assert reply.result() == 7
    assert reply.wait(0.0)  # answered once, waited for any number of times


def test_an_unanswered_reply_times_out() -> None:
    """wait() returns False at its timeout and leaves the reply open for a later answer."""
    reply = Reply()
    assert not reply.wait(0.02)
    assert not reply.wait(-1.0)  # a negative timeout is a poll
    assert not reply.answered
    reply.set(3)
    assert reply.wait(0.0)
    assert reply.result() == 3


def test_an_error_reply_raises_the_error() -> None:
    """set_exception takes an exc_info tuple (as the actors send) or an exception."""
    reply = Reply()
    error = ConflictError(expected=1, actual=2)
    reply.set_exception((type(error), error, None))
    assert reply.wait(1.0)
    with pytest.raises(ConflictError):
        reply.result()
    other = Reply()
    other.set_exception(ValueError("bad"))
    with pytest.raises(ValueError, match="bad"):
        other.result()


def test_only_the_first_answer_counts() -> None:
    """A second answer neither overwrites the first nor fails."""
    reply = Reply()
    reply.set(1)
    reply.set(2)
    reply.set_exception(RuntimeError("late"))
    assert reply.result() == 1


def test_the_inbox_waits_for_a_count_of_messages() -> None:
    """wait_for(n) returns True once n messages are queued, False at its timeout."""
    inbox = _Inbox()
    inbox.put("a")
    assert not inbox.wait_for(3, 0.02, since=time.monotonic(), until=time.monotonic() + 60)

    def put_two() -> None:
        time.sleep(0.02)
        inbox.put("b")
        time.sleep(0.02)
        inbox.put("c")

    feeder = threading.Thread(target=put_two)
    feeder.start()
    assert inbox.wait_for(3, 5.0, since=time.monotonic(), until=time.monotonic() + 60)
    feeder.join()
    assert [inbox.get_nowait() for _ in range(3)] == ["a", "b", "c"]


def _put_every(inbox: _Inbox, items: list[object], interval_s: float) -> threading.Thread:
    def feed() -> None:
        for item in items:
            time.sleep(interval_s)
            inbox.put(item)

    feeder = threading.Thread(target=feed)
    feeder.start()
    return feeder


def test_writes_arriving_one_after_another_all_join_the_wait() -> None:
    """The gap counts from the latest write: five writes 0.05 s apart (0.25 s in all) are
    all waited for with a gap of 0.2 s, longer than the gap but each well within it."""
    inbox = _Inbox()
    started = time.monotonic()
    feeder = _put_every(inbox, ["a", "b", "c", "d", "e"], 0.05)
    assert inbox.wait_for(5, 0.2, since=started, until=started + 60)
    assert time.monotonic() - started >= 0.2
    feeder.join()


def test_a_wait_ends_one_gap_after_the_last_write() -> None:
    """Writers that went quiet cost one gap after the last write: two writes, then
    nothing; the wait for five gives up about 0.2 s after the second."""
    inbox = _Inbox()
    started = time.monotonic()
    feeder = _put_every(inbox, ["a", "b"], 0.05)
    assert not inbox.wait_for(5, 0.2, since=started, until=started + 60)
    waited = time.monotonic() - started
    assert 0.3 <= waited < 5.0  # two puts 0.05 s apart, then one whole gap
    feeder.join()
    assert inbox.writes() == 2


def test_writes_that_keep_coming_hold_a_wait_no_longer_than_its_limit() -> None:
    """A stream of writes each within the gap, never reaching the count (one thread
    sending writes without waiting for them), holds the wait until ``until``, not for
    as long as it streams."""
    inbox = _Inbox()
    started = time.monotonic()
    feeder = _put_every(inbox, ["w"] * 40, 0.05)  # two seconds of writes 0.05 s apart
    assert not inbox.wait_for(100, 0.2, since=started, until=started + 0.5)
    waited = time.monotonic() - started
    assert 0.5 <= waited < 1.5
    feeder.join()


def test_an_expected_batch_gathers_writes_arriving_one_after_another() -> None:
    """After a commit the actor expects its writers back: its next get() returns once
    all of them came, though they took longer than one linger to, one by one."""
    inbox = _Inbox()
    inbox.expect(4, 0.2, 60.0)
    writes = [Submission(((requests.clear(f"c{n}"), Reply()),), n) for n in range(4)]
    feeder = _put_every(inbox, list(writes), 0.06)
    assert inbox.get(timeout=None) is writes[0]
    assert inbox.writes() == 3  # the others were in by then
    assert inbox.gathered_since is not None
    feeder.join()


def test_after_a_counted_wait_one_message_wakes_a_plain_get() -> None:
    """The count is reset: the actor loop's blocking get() wakes for a single message."""
    inbox = _Inbox()
    assert not inbox.wait_for(5, 0.01, since=time.monotonic(), until=time.monotonic() + 60)
    got: list[str] = []
    getter = threading.Thread(target=lambda: got.append(inbox.get(timeout=5.0)))
    getter.start()
    time.sleep(0.02)
    inbox.put("x")
    getter.join(5.0)
    assert got == ["x"]


# -- answers in turn ----------------------------------------------------------------


def _waiters(replies: list[Reply], timeout: float = 60.0) -> tuple[list[threading.Thread], dict]:
    """One thread per reply, each blocked in ``wait(timeout)``; their outcomes by index
    (the result, the error it raises, or an error from waiting itself)."""
    got: dict[int, object] = {}

    def wait(index: int, reply: Reply) -> None:
        try:
            if reply.wait(timeout) and reply.wait(0.0):  # a second wait passes nothing on
                got[index] = reply.result()
        except Exception as exc:
            got[index] = exc

    threads = [
        threading.Thread(target=wait, args=(i, r), daemon=True) for i, r in enumerate(replies)
    ]
    for thread in threads:
        thread.start()
    return threads, got


def _joined(threads: list[threading.Thread]) -> bool:
    """True when every thread ended within a generous deadline (a missed wake never does)."""
    for thread in threads:
        thread.join(10.0)
    return not any(thread.is_alive() for thread in threads)


def _blocked(replies: list[Reply]) -> None:
    """Wait until every reply's waiter is blocked on it (so no answer is taken at a timeout)."""
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline:
        if all(r._ready.locked() for r in replies):
            time.sleep(0.02)
            return
        time.sleep(0.005)


def test_answers_in_turn_wake_every_waiter_with_its_own_answer() -> None:
    """Eight blocked waiters, woken one by another, each get their value or their error."""
    replies = [Reply() for _ in range(8)]
    threads, got = _waiters(replies)
    _blocked(replies)
    error = ConflictError(expected=1, actual=2)
    answer_in_turn([(r, i != 3, error if i == 3 else i * 10) for i, r in enumerate(replies)])
    assert _joined(threads)
    assert got == {i: (error if i == 3 else i * 10) for i in range(8)}


def test_a_waiter_that_gave_up_still_passes_the_wake_on() -> None:
    """A reply abandoned before its answer, in the middle of a batch, wakes the ones after it."""
    replies = [Reply() for _ in range(5)]
    replies[1].abandon()  # its caller raised (a timeout) before the commit ended
    threads, got = _waiters([replies[0], *replies[2:]])
    _blocked([replies[0], *replies[2:]])
    answer_in_turn([(r, True, i) for i, r in enumerate(replies)])
    assert _joined(threads)
    assert got == {0: 0, 1: 2, 2: 3, 3: 4}


def test_a_batch_of_thousands_of_waiters_that_gave_up_wakes_the_one_after_them() -> None:
    """5,000 replies abandoned before their answer (their callers' deadlines passed
    while the batch committed, as with ``--timeout 0.001``), then one waiter: answering
    the batch wakes it. The turn used to be passed by one call per abandoned reply, and
    the actor died of a `RecursionError` a thousand replies in."""
    gave_up = [Reply() for _ in range(5_000)]
    for reply in gave_up:
        reply.abandon()
    last = Reply()
    threads, got = _waiters([last])
    _blocked([last])
    answer_in_turn([(r, True, i) for i, r in enumerate([*gave_up, last])])
    assert _joined(threads)
    assert got == {0: 5_000}


def test_a_waiter_giving_up_after_its_wake_passes_it_on() -> None:
    """abandon() of a reply already woken wakes the next waiter (the first one never waits)."""
    first, second = Reply(), Reply()
    threads, got = _waiters([second])
    _blocked([second])
    answer_in_turn([(first, True, "a"), (second, True, "b")])
    first.abandon()
    assert _joined(threads)
    assert got == {0: "b"}


def test_an_answer_counts_at_the_timeout_even_before_its_wake() -> None:
    """A reply answered in turn is there when its wait times out, woken or not; waits
    after that, and the late wake, change nothing."""
    first, second = Reply(), Reply()
    answer_in_turn([(first, True, 1), (second, True, 2)])
    # The first reply's waiter has not woken, so the second was never woken.
    assert second.answered
    assert second.wait(0.01)
    assert second.result() == 2
    assert first.wait(0.0)  # now the turn reaches the second reply, which took its answer
    assert second.wait(0.0)
    assert first.result() == 1


def test_replies_with_a_notify_are_answered_and_notified_at_once() -> None:
    """An event loop's reply is notified by the answering thread, not woken in turn."""
    notified: list[str] = []
    looped = Reply(notify=lambda: notified.append("loop"))
    threaded = Reply()
    answer_in_turn([(threaded, True, 1), (looped, False, ValueError("refused"))])
    assert notified == ["loop"]
    assert looped.wait(0.0)
    with pytest.raises(ValueError, match="refused"):
        looped.result()
    assert threaded.wait(0.0)
    assert threaded.result() == 1


def test_replies_answered_before_keep_their_first_answer() -> None:
    """answer_in_turn skips a reply that was answered already (a hand-back, a failure)."""
    early = Reply()
    early.set_exception(RuntimeError("handed back"))
    later = Reply()
    answer_in_turn([(early, True, 1), (later, True, 2)])
    with pytest.raises(RuntimeError, match="handed back"):
        early.result()
    assert later.wait(0.0)
    assert later.result() == 2


def test_waiters_giving_up_while_answers_arrive_never_leave_one_unwoken() -> None:
    """Many batches, some waiters abandoning at any moment: every other waiter is woken,
    and no wake is passed twice (a second release of a lock would raise)."""
    for batch in range(50):
        replies = [Reply() for _ in range(8)]
        quitters = {batch % 8, (batch * 3 + 1) % 8}
        stay = [r for i, r in enumerate(replies) if i not in quitters]
        threads, got = _waiters(stay)
        quit_threads = [
            threading.Thread(target=replies[i].abandon, daemon=True) for i in sorted(quitters)
        ]
        for thread in quit_threads:
            thread.start()
        answer_in_turn([(r, True, i) for i, r in enumerate(replies)])
        assert _joined(threads + quit_threads)
        assert sorted(got.values()) == [i for i in range(8) if i not in quitters]


# -- submissions in the inbox ---------------------------------------------------------


def test_the_inbox_hands_over_the_submissions_up_to_another_message() -> None:
    """take_submissions takes the writes at the head, leaving a control message and
    everything after it in order; the write count follows."""
    inbox = _Inbox()
    first = Submission(((requests.clear("a"), Reply()),), writer=1)
    second = Submission([(requests.clear("b"), Reply()), (requests.clear("c"), Reply())])
    last = Submission(((requests.clear("d"), Reply()),), writer=2)
    for item in (first, second, "stop", last):
        inbox.put(item)
    assert inbox.writes() == 5  # three writes, one other message, one write
    assert inbox.take_submissions() == [first, second]
    assert inbox.writes() == 2
    assert inbox.take_submissions() == []
    assert inbox.get_nowait() == "stop"
    assert inbox.take_submissions() == [last]
    assert inbox.empty()
    assert inbox.writes() == 0


def _getter(inbox: _Inbox) -> tuple[threading.Thread, list[object]]:
    """A thread taking one message from ``inbox`` (as the actor loop does)."""
    got: list[object] = []
    thread = threading.Thread(target=lambda: got.append(inbox.get()), daemon=True)
    thread.start()
    return thread, got


def _write(name: str) -> Submission:
    return Submission(((requests.clear(name), Reply()),), writer=name)


def test_a_get_after_expect_waits_for_the_expected_writes() -> None:
    """After expect(3), the actor's wait for a message ignores the first two writes and
    returns the first once the third is queued; the wait is recorded as a hold."""
    inbox = _Inbox()
    inbox.expect(3, 10.0, 60.0)
    thread, got = _getter(inbox)
    first = _write("a")
    inbox.put(first)
    inbox.put(_write("b"))
    thread.join(0.1)
    assert thread.is_alive()  # two of three: still waiting
    inbox.put(_write("c"))
    assert _joined([thread])
    assert got == [first]
    assert inbox.gathered_since is not None
    assert inbox.writes() == 2


def test_another_message_ends_the_wait_for_expected_writes() -> None:
    """A control message (a stop, a stats ask) is not held back by the expected writes."""
    inbox = _Inbox()
    inbox.expect(8, 10.0, 60.0)
    thread, got = _getter(inbox)
    write = _write("a")
    inbox.put(write)
    thread.join(0.05)
    assert thread.is_alive()
    inbox.put("stop")
    assert _joined([thread])
    assert got == [write]


def test_the_wait_for_expected_writes_ends_at_its_linger() -> None:
    """Writers that do not come cost the linger: the write that came is then taken."""
    inbox = _Inbox()
    inbox.expect(8, 0.05, 60.0)
    write = _write("a")
    inbox.put(write)
    thread, got = _getter(inbox)
    assert _joined([thread])
    assert got == [write]


def test_expect_applies_to_one_wait_only() -> None:
    """The next get after the expected one returns the first write at once; expecting
    writes already queued does not wait (nor count as a hold)."""
    inbox = _Inbox()
    inbox.expect(2, 0.0, 0.0)
    inbox.put(_write("a"))
    inbox.put(_write("b"))
    inbox.get()
    assert inbox.gathered_since is None  # both were there: nothing was held back
    inbox.get()
    thread, got = _getter(inbox)
    write = _write("c")
    inbox.put(write)
    assert _joined([thread])
    assert got == [write]


def test_a_submission_is_its_own_pykka_envelope() -> None:
    """The actor loop reads message and reply_to off an inbox item: a tell, no answer."""
    submission = Submission(((requests.pop("a"), Reply()),), writer=None)
    assert submission.message is submission
    assert submission.reply_to is None


# -- wake-ups at the end of an answering block ------------------------------------------


class _Waiter:
    """A wake-up that records its call and keeps the turn it is given (or declines it)."""

    def __init__(self, name: str, woke: list[str], *, takes_turn: bool = True) -> None:
        self.name, self.woke, self.takes_turn = name, woke, takes_turn
        self.turn: Turn | None = None

    def __call__(self, turn: Turn) -> bool:
        self.woke.append(self.name)
        self.turn = turn
        return self.takes_turn


def test_the_wake_ups_of_a_block_run_in_turn_once_each() -> None:
    """The block's end wakes the first waiter; each woken one wakes the next by passing
    its turn on; a key asking twice is woken once; a turn passed twice passes once."""
    woke: list[str] = []
    a, b, c = (_Waiter(name, woke) for name in "abc")
    with answering():
        assert at_end_of_answers("a", a)
        assert at_end_of_answers("b", b)
        assert at_end_of_answers("a", _Waiter("a again", woke))
        assert at_end_of_answers("c", c)
        assert woke == []  # nothing before the block ends
    assert woke == ["a"]
    assert a.turn is not None
    a.turn.pass_on()
    a.turn.pass_on()
    assert woke == ["a", "b"]
    assert b.turn is not None
    b.turn.pass_on()
    assert woke == ["a", "b", "c"]
    assert c.turn is not None
    c.turn.pass_on()  # the last one: nobody left
    assert woke == ["a", "b", "c"]


def test_a_wake_up_that_declines_or_fails_passes_the_turn_at_once() -> None:
    """A waiter that will not pass the turn on (it woke nobody, or raised) does not
    hold up the ones after it; nothing is raised into the answering thread."""
    woke: list[str] = []

    def broken(turn: Turn) -> bool:
        woke.append("broken")
        raise RuntimeError("a closed loop")

    with answering():
        at_end_of_answers("declines", _Waiter("declines", woke, takes_turn=False))
        at_end_of_answers("broken", broken)
        at_end_of_answers("last", _Waiter("last", woke))
    assert woke == ["declines", "broken", "last"]


def test_outside_a_block_the_caller_wakes_at_once() -> None:
    """at_end_of_answers outside `answering` puts nothing off."""
    woke: list[str] = []
    assert not at_end_of_answers("a", _Waiter("a", woke))
    assert woke == []


def test_a_reply_nobody_waits_for_yet_does_not_hold_up_its_batch() -> None:
    """A begun write's reply (``in_turn=False``) is answered at once, not in turn: the
    waiter answered after it is woken though the begun writer never waits (in turn, it
    would wait for that writer to wake and pass the turn on)."""
    begun, waited = Reply(in_turn=False), Reply()
    threads, got = _waiters([waited])
    answer_in_turn([(begun, True, "begun"), (waited, True, "waited")])
    assert _joined(threads) and got == {0: "waited"}
    assert begun.wait(0.0) and begun.result() == "begun"


def test_a_begun_reply_joins_the_turns_once_its_writer_waits() -> None:
    """After `Reply.join_turns` the reply is woken in turn like any other, and passes the
    turn on: both waiters of the batch wake."""
    first, second = Reply(in_turn=False), Reply()
    first.join_turns()
    threads, got = _waiters([first, second])
    answer_in_turn([(first, True, 1), (second, True, 2)])
    assert _joined(threads) and got == {0: 1, 1: 2}
