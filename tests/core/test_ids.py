"""`memoryd._ids.IdSource`: ids unique across calls, threads, sources and forks."""

from __future__ import annotations

import os
import threading

import pytest

from memoryd._ids import IdSource


def _nonce(an_id: str, prefix: str = "") -> str:
    return an_id[len(prefix) :].rpartition(".")[0]


def test_ids_are_the_prefix_a_hex_nonce_and_a_hex_counter() -> None:
    """An id is PREFIX + nonce in hex + '.' + the counter in hex, counting from 0."""
    source = IdSource("p:", nonce_bytes=8)
    first, second = source.next(), source.next()
    nonce = _nonce(first, "p:")
    assert first == f"p:{nonce}.0"
    assert second == f"p:{nonce}.1"
    assert len(nonce) == 16
    int(nonce, 16)


def test_the_nonce_is_drawn_once_per_source() -> None:
    """Every id of one source in one process shares its nonce; 1000 ids all differ."""
    source = IdSource()
    ids = [source.next() for _ in range(1000)]
    assert len(set(ids)) == 1000
    assert {_nonce(i) for i in ids} == {_nonce(ids[0])}
    assert len(_nonce(ids[0])) == 32


def test_two_sources_never_give_the_same_id() -> None:
    """Sources count from 0 each, but with nonces of their own."""
    one, two = IdSource(), IdSource()
    assert {one.next() for _ in range(100)}.isdisjoint({two.next() for _ in range(100)})


def test_a_nonce_shorter_than_8_bytes_is_refused() -> None:
    """Too few random bits to keep processes apart: ValueError."""
    with pytest.raises(ValueError, match="at least 8"):
        IdSource(nonce_bytes=4)


def test_threads_sharing_a_source_get_distinct_ids() -> None:
    """Eight threads taking ids from one fresh source at once never get the same id."""
    source = IdSource()
    start = threading.Barrier(8)
    taken: list[list[str]] = [[] for _ in range(8)]

    def take(mine: list[str]) -> None:
        start.wait(timeout=30)
        mine.extend(source.next() for _ in range(5000))

    threads = [threading.Thread(target=take, args=(mine,)) for mine in taken]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads)
    every = [i for mine in taken for i in mine]
    assert len(every) == 8 * 5000
    assert len(set(every)) == len(every)


def _ids_in_child(source: IdSource, count: int) -> list[str]:
    """Fork; the child takes ``count`` ids from ``source`` and sends them back."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: write and leave without running any cleanup
        status = 1
        try:
            os.close(read_end)
            data = "\n".join(source.next() for _ in range(count)).encode()
            with os.fdopen(write_end, "wb") as pipe:
                pipe.write(data)
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return data.decode().split("\n")


def test_a_forked_child_repeats_none_of_its_parents_ids() -> None:
    """The child draws a nonce of its own, so its ids differ from the parent's next ones.

    Parent and child continue from the same counter value: with the parent's nonce
    the child's ids would be exactly the ones the parent makes next.
    """
    source = IdSource()
    before = [source.next() for _ in range(10)]
    child = _ids_in_child(source, 10)
    after = [source.next() for _ in range(10)]
    assert len(set(child)) == 10
    assert set(child).isdisjoint(before + after)
    assert {_nonce(i) for i in child} != {_nonce(before[0])}
    assert {_nonce(i) for i in after} == {_nonce(before[0])}


def test_forked_children_of_one_parent_draw_different_nonces() -> None:
    """Two children forked from the same state do not repeat each other's ids."""
    source = IdSource()
    source.next()
    first, second = _ids_in_child(source, 5), _ids_in_child(source, 5)
    assert set(first).isdisjoint(second)
    assert _nonce(first[0]) != _nonce(second[0])


def test_the_ids_memoryd_makes_for_runs_invokes_and_conversations_survive_a_fork() -> None:
    """Run ids (an agent's and an agent system's), invoke ids and the ids of
    conversations and sessions made without one come from fork-safe sources: a child
    forked after the parent made some repeats none of the parent's (two processes on
    one store would otherwise share a run's journal)."""
    from memoryd.agent import agent
    from memoryd.agents import mailbox
    from memoryd.kernel import kernel
    from memoryd.provider import session

    sources = {
        "agent run ids": agent._RUN_IDS,
        "conversation ids": agent._CONVERSATION_IDS,
        "agent system run ids": mailbox._RUN_IDS,
        "invoke ids": kernel._INVOKE_IDS,
        "session ids": session._SESSION_IDS,
    }
    for what, source in sources.items():
        before = [source.next() for _ in range(5)]
        child = _ids_in_child(source, 5)
        after = [source.next() for _ in range(5)]
        assert set(child).isdisjoint(before + after), what


def test_runs_on_many_threads_get_ids_of_their_own() -> None:
    """An agent's runs given no run id or conversation id, from 8 threads at once, each
    get their own (the ids are made without a system call)."""
    import memoryd

    class Instant:
        def complete(self, messages: list[dict], *, tools: list[dict] | None = None) -> dict:
            return {"role": "assistant", "content": "ok"}

    agents = [memoryd.Agent(llm=Instant(), memory=False) for _ in range(8)]
    results: list[list[tuple[str, str]]] = [[] for _ in range(8)]

    def work(n: int) -> None:
        for _ in range(200):
            result = agents[n].run("ping")
            results[n].append((result.run_id, result.conversation_id))

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    every = [pair for mine in results for pair in mine]
    assert len(every) == 1600
    assert len({run for run, _ in every}) == 1600
    assert len({cid for _, cid in every}) == 1600
    assert all(cid.startswith("conversation-") for _, cid in every)
