"""Agent: the tool loop with provider-driven memory, turn-atomic commits and resume.

```python
agent = memoryd.Agent(llm=model, memory="default", tools=[lookup], system_prompt="Be brief.")
reply = agent.run("What's my name?", conversation_id="session-1")
reply.text
```

Each run (beamai's agent path, Koog's ChatMemory and Persistence):

1. loads the history with the provider's ``history`` (the conversation's version is
   read first: it is the base the commit checks);
2. loops: ``prepare`` the history + this turn, never dropping the turn (`keep_turn`),
   one LLM call through the kernel's ``around_chat`` layers, then the tool calls
   through its ``around_tool`` layers, until plain text or ``max_steps``;
   every message is checkpointed in the run journal as it is produced;
3. commits the whole turn (input, tool calls, tool results, answer) as ONE write with
   the run id as idempotency key, only when the run succeeded and only if the
   conversation did not change meanwhile (`ConflictError` otherwise).

A run that fails leaves the history as it was; a run whose process died stays in
`Agent.pending_runs` and `Agent.resume` finishes it without calling again the tools
whose results were recorded. Runs on one conversation in one process take turns.

With an active session (Agently, `activate_session`), a run without a conversation id
is a turn of that session, and each LLM call is sent the session's window: the
provider's ``prepare`` of history + turn, then the session's analysis and resize
handlers (``max_length`` with ``simple_cut`` by default), the turn always kept whole.
A memo the handlers return is persisted after the turn is committed; a run never
replaces the stored history (`Session.refresh` applies a resize handler's history).
The session's ``input_keys`` / ``reply_keys`` choose what the run records of prompt
data and of a JSON answer. A run with neither a conversation id nor a session gets a
new ``conversation-<hex>`` id: its turn is stored there and ``RunResult.conversation_id``
says where.

A store that becomes unavailable fails the turn once: the first store call that
finds it so raises `StoreUnavailable` (after its deadline), and the run is left as it
is in the journal (pending, for `resume`) without another call to that store.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import copy
import json
import time
from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from memoryd import messages as msgs
from memoryd._ids import IdSource
from memoryd.agent.drops import UNDROPPED
from memoryd.agent.journal import (
    RunJournal,
    RunRecord,
    StepWrite,
    check_new_run_id,
    check_run_id,
)
from memoryd.agent.lease_keeper import KEEPER, Kept
from memoryd.agent.locks import active_runs, conversation_lock, run_active, run_turn
from memoryd.agent.memory import (
    base_version,
    check_provider_options,
    commit_turn,
    committed_fresh,
    keep_turn,
    record_limit,
    resolve_memory,
    store_of,
)
from memoryd.agent.sessions import SessionMethods, Sessions
from memoryd.errors import (
    ConflictError,
    DiskFull,
    InvalidMessage,
    RunInterrupted,
    StepLimitExceeded,
    StoreUnavailable,
)
from memoryd.kernel.context import Context
from memoryd.kernel.filters import ToolResult
from memoryd.kernel.kernel import (
    DEFAULT_MAX_TOOL_CALLS,
    Kernel,
    check_max_steps,
    check_reply_size,
    message_text,
    oversized_result,
    recordable_result,
)
from memoryd.kernel.memory import MemoryFilter
from memoryd.kernel.tools import Tool
from memoryd.llm.base import ChatModel
from memoryd.messages import CheckedMessages
from memoryd.provider import preprocessors as pre
from memoryd.provider.default import DefaultProvider
from memoryd.provider.protocol import MemoryProvider
from memoryd.provider.session import Session
from memoryd.provider.session_turns import recorded_turn
from memoryd.store import requests
from memoryd.store.handle import StoreHandle, WouldWait, without_waiting

__all__ = ["Agent", "PendingRun", "RunResult", "current_tool_call", "pending_runs_of"]

log = structlog.get_logger(__name__)

_UNKNOWN = -1
"""`Agent._result_limit` before its first tool result."""

_RUN_IDS = IdSource()
"""Run ids of runs given none: unique across processes sharing a store, without a system
call per run (a system call lets another thread take the interpreter lock)."""
_CONVERSATION_IDS = IdSource("conversation-")
"""Conversation ids of runs given none and no active session."""
Message = dict[str, Any]

current_tool_call: contextvars.ContextVar[tuple[str, str] | None] = contextvars.ContextVar(
    "memoryd_current_tool_call", default=None
)
"""(run id, tool call id) of the tool call an agent is running in this context, else None."""

# What the tool loop (`Agent._steps`, a generator) asks of the run driving it, a tuple
# whose first item is one of these; `Agent.run` does it in its thread, `Agent.arun` on its
# event loop (user code that may block in a worker thread), a tool call or an LLM call
# after its step boundary (`Agent._boundary`). The loop gets back:
_TOOL = 0
"""``(kind, call, context)``: the tool call's `ToolResult`, called with
`current_tool_call` set, after the last step's write is durable and the lease renewed."""
_SAVE = 1
"""``(kind, turn, added)``: None; the step's journal write is sent."""
_CHAT = 2
"""``(kind, history, shown, context, step)``: the model's reply, checked, to the window
of the history and the turn as shown (`Agent._window`)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RunResult:
    """What one `Agent.run` (or `Agent.resume`) produced.

    Attributes:
        message: The final assistant message.
        messages: The whole turn: the input, tool calls, tool results, the answer.
        conversation_id: The conversation the turn was stored in: the one given, the
            active session's, or a new ``conversation-<hex>`` id.
        run_id: The run id (the commit's idempotency key).
        version: The conversation's version after the commit; None without memory
            or with a memory that keeps no versions.
    """

    message: Message
    messages: tuple[Message, ...]
    conversation_id: str
    run_id: str
    version: int | None

    @property
    def text(self) -> str:
        """The final answer's text."""
        return message_text(self.message)


@dataclass(frozen=True, kw_only=True, slots=True)
class PendingRun:
    """A run that never finished (its process died, or it is still running elsewhere).

    Attributes:
        run_id: The id to pass to `Agent.resume`.
        conversation_id: Its conversation.
        messages: The turn as far as the journal recorded it.
        owner: The owner id of the process holding the run's lease.
        orphaned: True when no live process holds it (its owner died, or its lease
            ran out): it is safe to resume.
    """

    run_id: str
    conversation_id: str
    messages: tuple[Message, ...]
    owner: str = ""
    orphaned: bool = True


def pending_runs_of(records: Iterable[RunRecord]) -> list[PendingRun]:
    """The `PendingRun` of each journal record, each told orphaned or not as of now.

    Args:
        records: Unfinished runs from a `RunJournal`.

    Returns:
        Their pending runs, in the records' order.
    """
    now, here = time.time(), active_runs()
    return [
        PendingRun(
            run_id=r.run_id,
            conversation_id=r.conversation_id,
            messages=r.messages,
            owner=r.owner,
            orphaned=r.orphaned(now, r.run_id in here),
        )
        for r in records
    ]


_PURE_WINDOWS: tuple[type | None, ...] = (DefaultProvider, type(None))
"""Memories whose window `Agent.arun` computes on its event loop (pure: no I/O)."""


class _Run:
    """What the loop knows of the run it drives (one per run: plain slots, no checks).

    Attributes:
        run_id: The run id.
        cid: The conversation.
        base: The conversation's version when the run started (None: no versions).
        inputs: How many messages of the turn are the run's input.
        session: The active session when the run is one of its turns.
        memos: The memos the session's handlers returned, in order.
        full: The history the session's handlers are given (read at the first LLM call).
        writing: The journal write of its last tool step, until it is waited for.
    """

    __slots__ = (
        "base",
        "cid",
        "full",
        "inputs",
        "kept",
        "memos",
        "run_id",
        "session",
        "writing",
    )

    def __init__(
        self, run_id: str, cid: str, base: int | None, inputs: int, session: Session | None
    ) -> None:
        self.run_id = run_id
        self.cid = cid
        self.base = base
        self.inputs = inputs
        self.session = session
        self.memos: list[Any] = []
        self.full: list[Message] | None = None
        self.writing: StepWrite | None = None
        self.kept: Kept | None = None
        """Kept by the lease keeper from its first call (a journaled run), until it ends."""


def _input_messages(value: Any) -> CheckedMessages:
    """The run's input, checked once: the only check it gets on its way to the store."""
    if isinstance(value, str):
        return msgs.check([{"role": "user", "content": value}], max_bytes=None)
    if isinstance(value, dict) and "role" not in value:  # prompt data, sent as JSON
        try:
            text = json.dumps(value, ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            raise InvalidMessage(f"prompt data must be JSON-compatible: {exc}") from None
        return msgs.check([{"role": "user", "content": text}], max_bytes=None)
    if isinstance(value, dict):
        try:
            return msgs.check([value], max_bytes=None)
        except InvalidMessage as exc:
            raise InvalidMessage(str(exc.__cause__ or exc)) from None
    if isinstance(value, list | tuple):
        return msgs.check(value, max_bytes=None)
    raise InvalidMessage(
        f"run input must be a str, a message dict or a list of them, got {type(value).__name__}"
    )


def _resolve_journal(journal: Any, provider: MemoryProvider | None) -> RunJournal | None:
    if journal is False:
        return None
    if isinstance(journal, StoreHandle):
        return RunJournal(journal)
    if journal is not None:
        raise TypeError(f"journal must be None, False or a store handle, not {journal!r:.60}")
    if store_of(provider) is None:
        return None
    assert provider is not None
    return RunJournal(lambda: store_of(provider))  # type: ignore[arg-type,return-value]


async def _outlast(future: asyncio.Future[Any]) -> None:
    """Wait until ``future`` is done, however often the task is cancelled meanwhile (the
    caller raises its cancellation afterwards); its outcome stays in it."""
    while not future.done():
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait([future])


class Agent(SessionMethods):
    """An LLM agent with tools and conversation memory.

    Args:
        llm: The chat model.
        memory: ``"default"`` (the shared default store, no window),
            ``memoryd.window(n)`` (default store + safe window of n), a store handle
            or any `memoryd.ChatStore` (that store, no window), any `MemoryProvider`
            (beamai's four callbacks are enough; see `memoryd.agent.memory` for what
            a run promises without idempotency keys and expected versions), or
            ``False`` (no memory).
        tools: `Tool` objects or type-hinted functions.
        system_prompt: Sent first on every LLM call; never stored.
        max_steps: The most LLM calls one run may make.
        filters: Kernel filters around each LLM and tool call (not a memory filter:
            the agent's memory is ``memory=``).
        journal: Where runs are checkpointed: None for the memory's store (no journal
            when it has none), a store handle, or False for no journal.
        keep_failed_runs: Keep a run that raised pending, as Koog's checkpoints do: a
            model that failed at step 7 leaves steps 1 to 6 recorded, and `resume`
            (or `AgentSystem.resume`, or a system's recovery on start) goes on from
            there without calling their tools again. By default a run that raised
            drops its journal (a run stopped at a step boundary, or one that found its
            store unavailable, is kept either way). Needs a journal.
        max_tool_calls: The most tool calls of one reply that run; each call past it
            gets an error result the model reads, and its tool does not run.

    Raises:
        TypeError, ValueError: A bad argument (the message names it).
    """

    def __init__(
        self,
        *,
        llm: ChatModel,
        memory: Any = "default",
        tools: Sequence[Tool | Any] = (),
        system_prompt: str | None = None,
        max_steps: int = 10,
        filters: Sequence[Any] = (),
        journal: StoreHandle | bool | None = None,
        keep_failed_runs: bool = False,
        max_tool_calls: int = DEFAULT_MAX_TOOL_CALLS,
    ) -> None:
        if any(isinstance(f, MemoryFilter) for f in filters if not isinstance(filters, str)):
            raise TypeError(
                "an Agent takes its memory from memory=, not from a memory_filter; "
                "use memory_filter with a Kernel"
            )
        self.kernel = Kernel(
            llm=llm,
            tools=tools,
            filters=filters,
            system_prompt=system_prompt,
            max_steps=check_max_steps(max_steps),
            max_tool_calls=max_tool_calls,
        )
        self.provider: MemoryProvider | None = resolve_memory(memory)
        self._append_options = check_provider_options(self.provider)
        self._journal = _resolve_journal(journal, self.provider)
        self._stored_shape: tuple[pre.Preprocessor, ...] = (
            self.provider.store_preprocessors if isinstance(self.provider, DefaultProvider) else ()
        )
        """The provider's store preprocessors, which bind the journal too: a step is
        journaled as they would let it be stored (``redact``: never a secret on disk)."""
        if not isinstance(keep_failed_runs, bool):
            raise TypeError(f"keep_failed_runs must be a bool, not {keep_failed_runs!r:.60}")
        if keep_failed_runs and self._journal is None:
            raise ValueError(
                "keep_failed_runs needs a journal: give the agent memory in a store, or "
                "journal= a store handle"
            )
        self.keep_failed_runs = keep_failed_runs
        self._result_limit: int | None = _UNKNOWN
        """The largest tool result a run records (`record_limit`), known at first use."""
        self._session: Session | None = None
        self._sessions = Sessions()
        self.agent_type: str | None = None
        """The agent type an `AgentSystem` runs this agent as (recorded in its journals)."""
        self.step_hook: Callable[[str], None] | None = None
        """Called with the run id at every step boundary (before each LLM and tool call).
        A `memoryd.errors.RunInterrupted` it raises ends the run there with its journal
        kept (to be resumed); another exception fails the run like any error."""

    @property
    def keeps_journal(self) -> bool:
        """True when the agent journals its runs' tool steps (so they can be resumed)."""
        return self._journal is not None

    @property
    def max_steps(self) -> int:
        """The most LLM calls one run may make."""
        return self.kernel.max_steps

    # -- runs ----------------------------------------------------------------------------------

    def run(
        self, input: Any, conversation_id: str | None = None, *, run_id: str | None = None
    ) -> RunResult:
        """Run one turn: the tool loop, then one atomic commit of the turn.

        ``agent.run("text", "session-1")`` is Koog's positional form.

        Args:
            input: The user's text, a message dict, a list of messages, or prompt data
                (a dict without ``"role"``: sent as JSON; a session's ``input_keys``
                choose what is recorded).
            conversation_id: The conversation (default: the active session's, else a
                new generated id, returned on the result).
            run_id: The run id, also the commit's idempotency key (default: a new one).

        Returns:
            The result.

        Raises:
            InvalidMessage: Bad input.
            InvalidConversationId: A bad ``conversation_id``.
            StepLimitExceeded: No final answer within ``max_steps`` LLM calls.
            ConflictError: The conversation changed during the run (nothing stored).
            LLMError: The model failed (nothing stored).
            StoreUnavailable: The store is unavailable (the first store call that
                found it so; the run stays pending in the journal).
        """
        turn, cid, run_id = self._start(input, conversation_id, run_id)
        with run_turn(run_id, self._lock_key(cid)):
            base, history = self._load(cid)
            return self._drive(
                _Run(run_id, cid, base, len(turn), self._session_of(cid)), history, turn
            )

    async def arun(
        self, input: Any, conversation_id: str | None = None, *, run_id: str | None = None
    ) -> RunResult:
        """`run` as a coroutine: the same turn, journal and commit, never blocking the loop.

        Many runs share one event loop: a run waiting for its model, a tool or its
        journal's write lets the others run. On the loop run memoryd's own steps, an
        ``async def acomplete`` of the model (`ScriptedModel` has one) when the agent
        has no filters, ``async def`` tools when no filter has an ``around_tool``, a
        `DefaultProvider`'s window, and its history's read when that is a windowed tail
        of a local store; the journal's writes and the commit go through the store's
        awaitable path. The rest, which may block (a model with only ``complete``,
        plain function tools, filters, another provider, a session's handlers, other
        history reads), runs in worker threads (`asyncio.to_thread`).

        A cancelled run stops like an interrupted one: nothing is committed, and a
        run that recorded tool steps stays pending for `resume`. One cancelled while
        its commit is under way raises `asyncio.CancelledError` once the commit has
        its outcome (the turn may be stored then), never while it is in flight.

        Args:
            input: As for `run`.
            conversation_id: As for `run`.
            run_id: As for `run`.

        Returns:
            The result.

        Raises:
            The errors of `run`.
        """
        turn, cid, run_id = self._start(input, conversation_id, run_id)
        async with run_turn(run_id, self._lock_key(cid)):
            base, history = await self._aload(cid)
            run = _Run(run_id, cid, base, len(turn), self._session_of(cid))
            return await self._adrive(run, history, turn)

    def pending_runs(self, conversation_id: str | None = None) -> list[PendingRun]:
        """Unfinished runs that called tools, oldest first (a run without tool steps
        has nothing to resume: its only write is its commit).

        Args:
            conversation_id: Only this conversation's runs; None for the whole store.

        Returns:
            The pending runs (a crashed process's, or ones still running elsewhere:
            `PendingRun.orphaned` tells them apart).

        Raises:
            ValueError: The agent keeps no journal.
        """
        journal = self._need_journal("pending_runs")
        cid = None if conversation_id is None else msgs.validate_conversation_id(conversation_id)
        return pending_runs_of(journal.pending(cid))

    def discard(self, run_id: str) -> None:
        """Drop a pending run: it is no longer listed and cannot be resumed.

        Args:
            run_id: The run id (from `pending_runs`).

        Raises:
            UnknownRun: The journal holds no unfinished run ``run_id``.
            ValueError: A live process holds the run (this one, running it, or another
                whose lease has not run out), or the agent keeps no journal.
            ConflictError: Another process took the run over meanwhile (it keeps it).
        """
        journal = self._need_journal("discard")
        journal.discard_orphan(journal.orphan(run_id))
        log.info("run_discarded", run_id=run_id)

    def resume(self, run_id: str) -> RunResult:
        """Finish a pending run from its last recorded step, then commit its turn.

        The run is claimed first (compare-and-set on its journal), so of several
        processes resuming one run, one does. Tool calls whose results were recorded
        are not called again. The rest of the run continues on the conversation as it
        is now (a run that crashed after its commit is only cleared).

        Args:
            run_id: The run id (from `pending_runs`).

        Returns:
            The result.

        Raises:
            UnknownRun: The journal holds no unfinished run ``run_id`` (finished runs
                leave nothing behind).
            ConflictError: Another process claimed the run first.
            ValueError: A live process holds the run (this one, running it, or another
                whose lease has not run out: it finishes the run), or the agent keeps no
                journal.
            StepLimitExceeded, LLMError: As for `run`.
        """
        journal = self._need_journal("resume")
        with run_active(check_run_id(run_id)):
            record = journal.load(run_id)
            journal.check_orphaned(record, running_here=False)  # marked active just above
            with conversation_lock(self._lock_key(record.conversation_id)):
                done = self._claimed(journal, record)
                if isinstance(done, RunResult):
                    return done
                return self._drive(*done)

    async def aresume(self, run_id: str) -> RunResult:
        """`resume` as a coroutine: the rest of the run goes on as `arun` runs one, on
        the loop, and a cancelled resume stops as a cancelled run does (its journal
        stays pending, with the steps it recorded).

        Args:
            run_id: The run id (from `pending_runs`).

        Returns:
            The result.

        Raises:
            The errors of `resume`.
        """
        journal = self._need_journal("resume")
        with run_active(check_run_id(run_id)):
            record = await asyncio.to_thread(journal.load, run_id)
            journal.check_orphaned(record, running_here=False)  # marked active just above
            async with conversation_lock(self._lock_key(record.conversation_id)):
                claiming = asyncio.ensure_future(
                    asyncio.to_thread(self._claimed, journal, record)
                )
                try:
                    done = await asyncio.shield(claiming)
                except asyncio.CancelledError:
                    # the claim goes on in its thread: once it ends, nothing of the
                    # run is kept here (it is pending again, for the next resume)
                    await _outlast(claiming)
                    self._stopped(run_id)
                    raise
                if isinstance(done, RunResult):
                    return done
                return await self._adrive(*done)

    def _claimed(
        self, journal: RunJournal, record: RunRecord
    ) -> RunResult | tuple[_Run, list[Message], CheckedMessages]:
        """Claim a pending run to resume it (under its conversation's lock): its result
        when it had committed its turn before it stopped, else what drives the rest."""
        journal.claim(record)
        run_id, cid = record.run_id, record.conversation_id
        store = store_of(self.provider)
        if store is not None:
            for event in store.events(cid, after=record.base_version):
                if event.idempotency_key == run_id:  # crashed after its commit
                    journal.discard(run_id)
                    return self._result(run_id, cid, record.messages, event.version)
        base, history = self._load(cid)
        log.info("run_resumed", run_id=run_id, conversation=cid, steps=len(record.messages))
        turn = msgs.check(record.messages, max_bytes=None)  # read back from the store
        return _Run(run_id, cid, base, record.inputs, self._session_of(cid)), history, turn

    # -- internals -------------------------------------------------------------------------

    def _start(
        self, input: Any, conversation_id: str | None, run_id: str | None
    ) -> tuple[CheckedMessages, str, str]:
        """A new run's checked input, conversation id and run id."""
        turn = _input_messages(input)
        if conversation_id is None and self._session is not None:
            conversation_id = self._session.id
        if conversation_id is None:
            conversation_id = _CONVERSATION_IDS.next()
        cid = msgs.validate_turn_conversation_id(conversation_id)
        if run_id is None:
            run_id = _RUN_IDS.next()
        return turn, cid, check_new_run_id(run_id)

    def _need_journal(self, what: str) -> RunJournal:
        if self._journal is None:
            raise ValueError(
                f"{what} needs a run journal; this agent keeps none (memory=False, or a "
                "provider without a .store): pass journal=<store handle>"
            )
        return self._journal

    def _lock_key(self, cid: str) -> tuple[Any, str]:
        """The key of the conversation's process-wide lock: its store's name (or the
        provider's identity) and the conversation id."""
        store = store_of(self.provider)
        return (store.name if store is not None else id(self.provider), cid)

    def _load(self, cid: str) -> tuple[int | None, list[Message]]:
        if self.provider is None:
            return None, []
        return base_version(self.provider, cid), self.provider.history(cid)

    async def _aload(self, cid: str) -> tuple[int | None, list[Message]]:
        """`_load` from an event loop: on the loop when a `DefaultProvider` with a window
        reads the tail of a local store, which is cheaper than a hand-off to a worker
        thread (`StoreHandle.reads_inline`), else in a worker thread."""
        provider = self.provider
        if provider is None:
            return None, []
        if (
            type(provider) is DefaultProvider
            and provider.window is not None
            and provider.store_features.handle
            and provider.store.reads_inline(provider.window)
        ):
            try:
                with without_waiting():
                    return self._load(cid)
            except WouldWait:
                pass  # the store is restarting: wait for it off the loop
        return await asyncio.to_thread(self._load, cid)

    def _session_of(self, cid: str) -> Session | None:
        """The active session when the run is one of its turns."""
        session = self._session
        return session if session is not None and session.id == cid else None

    def _result(self, run_id: str, cid: str, turn: Sequence[Message], version: Any) -> RunResult:
        return RunResult(
            message=turn[-1],
            messages=tuple(turn),
            conversation_id=cid,
            run_id=run_id,
            version=None if version is None else int(version),
        )

    def _drive(self, run: _Run, history: list[Message], turn: CheckedMessages) -> RunResult:
        """Run the tool loop, commit the turn, and answer; a failed run drops its journal."""
        if UNDROPPED and self._journal is not None:  # a failed run's journal, left behind
            self._drop_undropped()
        try:
            turn = self._loop(run, history, turn)
            version = None if self.provider is None else self._commit(run, turn)
        except Exception as exc:
            self._failed(run.run_id, exc)
            raise
        except BaseException:
            self._stopped(run.run_id)
            raise
        return self._finish(run, turn, version)

    async def _adrive(self, run: _Run, history: list[Message], turn: CheckedMessages) -> RunResult:
        """`_drive` on an event loop."""
        if UNDROPPED and self._journal is not None:
            await asyncio.to_thread(self._drop_undropped)
        try:
            turn = await self._aloop(run, history, turn)
            version = None if self.provider is None else await self._acommit_whole(run, turn)
        except Exception as exc:
            await asyncio.to_thread(self._failed, run.run_id, exc)
            raise
        except BaseException:
            self._stopped(run.run_id)
            raise
        if run.session is not None:  # its memo is written to the store
            return await asyncio.to_thread(self._finish, run, turn, version)
        return self._finish(run, turn, version)

    def _failed(self, run_id: str, exc: Exception) -> None:
        """A run that raised ``exc`` drops its journal, unless it was stopped at a step
        boundary (`RunInterrupted`: kept for the resume), found its store unavailable
        (not called again: the run stays pending), or the agent keeps failed runs."""
        journal = self._journal
        if journal is None:
            return
        if not journal.journaled(run_id):
            journal.forget(run_id)  # none written, or taken over: nothing of it is kept
            return
        if isinstance(exc, RunInterrupted | StoreUnavailable):
            journal.forget(run_id)  # pending: a resume claims it again
            return
        if self.keep_failed_runs:
            journal.forget(run_id)
            log.info("run_kept", run_id=run_id, error=type(exc).__name__)
            return
        try:
            journal.discard(run_id)
        except Exception as journal_exc:  # the run's own error matters more
            log.warning("run_journal_failed", run_id=run_id, error=str(journal_exc), retried=True)
            exc.add_note(
                f"run {run_id!r} recorded tool steps, and its journal could not be dropped "
                f"({type(journal_exc).__name__}): it stays pending until this process "
                "drops it at its next run on this store, once the store takes writes again"
            )

    def _stopped(self, run_id: str) -> None:
        """A run stopped from outside (``KeyboardInterrupt``, a cancelled task): what it
        journaled stays pending for a resume, and nothing of it is kept in this process
        (the same run id run again is refused as pending, as from any other process;
        it was taken for the live run and wrote on in its journal)."""
        if self._journal is not None:
            self._journal.forget(run_id)

    def _drop_undropped(self) -> None:
        """Drop the journals of this store's failed runs that could not be dropped then
        (`RunJournal.drop_undropped`); a store that still refuses writes fails the run
        that follows, not this."""
        journal = self._journal
        if journal is None:
            return
        try:
            dropped = journal.drop_undropped()
        except Exception:  # the store itself is gone: the run's own calls say so
            return
        for run_id in dropped:
            log.info("run_journal_dropped", run_id=run_id)

    def _finish(self, run: _Run, turn: CheckedMessages, version: int | None) -> RunResult:
        """A committed run's result (its journal cleared by the commit); its session
        forgets its window and keeps its memo."""
        if self._journal is not None:
            self._journal.forget(run.run_id)
        if run.session is not None:
            run.session.forget_window()
            if run.memos:
                run.session.set_memo(run.memos[-1])
        return self._result(run.run_id, run.cid, turn, version)

    async def _acommit_whole(self, run: _Run, turn: CheckedMessages) -> int | None:
        """`_acommit`, seen to its end: a cancellation that comes while the commit is
        under way is raised once the commit has its outcome (within the store's deadline),
        so the conversation is then as it will stay and the next run finds it free; a
        turn committed so is the run's (its run id, or a call's request id, finds it)."""
        commit = asyncio.ensure_future(self._acommit(run, turn))
        try:
            return await asyncio.shield(commit)
        except asyncio.CancelledError:
            await _outlast(commit)
            if not commit.cancelled() and commit.exception() is None:
                # committed: the run is finished as any committed run is (its journal
                # cleared with the turn, its session's window and memo caught up)
                if run.session is None:
                    self._finish(run, turn, commit.result())
                else:
                    finishing = asyncio.to_thread(self._finish, run, turn, commit.result())
                    await _outlast(asyncio.ensure_future(finishing))
            raise

    async def _acommit(self, run: _Run, turn: CheckedMessages) -> int | None:
        """`_commit` from an event loop: a `DefaultProvider` on a store handle sends the
        turn through the store's awaitable path; any other commit runs in a worker
        thread, as does a commit refused for a conflict (`commit_turn` tells a turn
        committed already from a changed conversation)."""
        provider = self.provider
        if type(provider) is DefaultProvider and run.session is None:
            target = provider.store
            if provider.store_features.handle:
                batch = provider.to_store(turn)
                if batch:
                    request = requests.add(
                        run.cid,
                        batch,
                        idempotency_key=run.run_id,
                        expected_version=run.base,
                        max_bytes=target.max_message_bytes,
                        then_clear=self._finished_journal(run),
                    )
                    try:
                        version = int(await target.submit(request))
                    except ConflictError:
                        pass
                    else:
                        return committed_fresh(version, target, run.cid, run.run_id, run.base)
        return await asyncio.to_thread(self._commit, run, turn)

    def _finished_journal(self, run: _Run) -> str | None:
        """The journal the turn's commit clears, if the run kept one."""
        return self._journal.finished_by(run.run_id) if self._journal is not None else None

    def _commit(self, run: _Run, turn: CheckedMessages) -> int | None:
        """Commit the turn (clearing its journal); a session's keys choose what is
        recorded of it."""
        assert self.provider is not None
        recorded: Sequence[Message] | None = None
        if run.session is not None:
            recorded = recorded_turn(
                turn,
                inputs=run.inputs,
                input_keys=run.session.input_keys,
                reply_keys=run.session.reply_keys,
            )
        return commit_turn(
            self.provider,
            run.cid,
            turn if recorded is None else msgs.check(recorded, max_bytes=None),
            run_id=run.run_id,
            base_version=run.base,
            options=self._append_options,
            then_clear=self._finished_journal(run),
        )

    def _save_step(
        self, run: _Run, turn: CheckedMessages, added: CheckedMessages, *, from_loop: bool = False
    ) -> None:
        """Send one tool step to the journal (its call and all its results: one write);
        `_settle` (or `_asettle`, ``from_loop``) waits until it is durable."""
        if self._journal is not None:
            steps = self._stored_shape
            if steps:  # journaled as the store would keep it, one message for each
                shaped = msgs.check(pre.run_keeping_shape(steps, list(added)), max_bytes=None)
                if self._journal.finished_by(run.run_id) is None:  # the first write: all
                    before = list(turn)[: len(turn) - len(added)]
                    kept = pre.run_keeping_shape(steps, before)
                    turn = msgs.check(kept, max_bytes=None).join(shaped)
                added = shaped
            run.writing = self._journal.begin_step(
                run.run_id,
                cid=run.cid,
                base_version=0 if run.base is None else run.base,
                inputs=run.inputs,
                turn=turn,
                added=added,
                agent=self.agent_type,
                from_loop=from_loop,
            )

    def _call(self, run: _Run) -> Kept | None:
        """Before a tool or LLM call: the process's lease keeper may renew the run's
        lease while the call lasts (`memoryd.agent.lease_keeper`)."""
        kept = run.kept
        if kept is None:
            journal = self._journal
            if journal is None:
                return None
            kept = run.kept = journal.kept(run.run_id, lambda: run.writing)
        kept.call()
        return kept

    @staticmethod
    def _returned(kept: Kept | None) -> None:
        """After the call, however it ended: the journal is the run's again (a renewal
        under way ends first)."""
        if kept is not None:
            kept.returned()

    @staticmethod
    async def _areturned(kept: Kept | None) -> None:
        """`_returned` on an event loop: a renewal under way is waited for off the loop."""
        if kept is not None and not kept.returned(wait=False):
            await asyncio.to_thread(kept.returned)

    @staticmethod
    def _taken_over(kept: Kept | None) -> None:
        """After a call that returned: a renewal during it that found the run taken
        over is raised now, before the run writes or calls anything more."""
        if kept is not None and kept.lost is not None:
            raise kept.lost

    @staticmethod
    def _end_kept(run: _Run) -> None:
        kept, run.kept = run.kept, None
        if kept is not None:
            KEEPER.end(kept)

    @staticmethod
    def _settle(run: _Run) -> None:
        """Wait until the run's last tool step is durable (its write was sent before
        the LLM call that follows it, which ran meanwhile)."""
        writing, run.writing = run.writing, None
        if writing is not None:
            writing.wait()

    def _boundary(self, run: _Run, *, tool: bool) -> None:
        """A step boundary: before a tool call, wait for the last step's write and
        renew the run's lease; then let the owner stop the run here.

        The boundary before an LLM call renews nothing: it follows the run's start
        (no journal yet), a tool step's write or a resume's claim, and each of those
        writes the lease's heartbeat itself. A run stopped there (`RunInterrupted`)
        still waits for that write (`_loop`).
        """
        if tool and self._journal is not None:
            self._settle(run)
            self._journal.renew(run.run_id)
        if self.step_hook is not None:
            self.step_hook(run.run_id)

    @staticmethod
    async def _asettle(run: _Run) -> None:
        """`_settle` on an event loop. A wait that is cancelled leaves the write to
        be waited for again (`_asettle_anyway`)."""
        writing = run.writing
        if writing is None:
            return
        try:
            await writing.wait_async()
        except asyncio.CancelledError:
            raise  # the write goes on: the run's cleanup waits for it
        except BaseException:
            run.writing = None
            raise
        run.writing = None

    async def _asettle_anyway(self, run: _Run) -> None:
        """The last step's write waited for to its outcome however often the run's
        task is cancelled meanwhile (the write ends by the store's deadline), so a
        stopped run is pending or never journaled by the time its error is raised; a
        failed write is logged (the run's own error matters more)."""
        while run.writing is not None:
            try:
                await self._asettle(run)
            except asyncio.CancelledError:
                continue
            except Exception as exc:
                log.warning("run_journal_failed", run_id=run.run_id, error=str(exc))

    async def _aboundary(self, run: _Run, *, tool: bool) -> None:
        """`_boundary` on an event loop (a due lease renewal is written from a worker
        thread)."""
        journal = self._journal
        if tool and journal is not None:
            await self._asettle(run)
            if journal.renew_due(run.run_id):
                await asyncio.to_thread(journal.renew, run.run_id)
        if self.step_hook is not None:
            self.step_hook(run.run_id)

    async def _aloop(
        self, run: _Run, history: list[Message], turn: CheckedMessages
    ) -> CheckedMessages:
        """`_loop` on an event loop: drive `_steps` with `_aeffect`."""
        steps = self._steps(run, history, turn)
        try:
            try:
                effect = next(steps)
                while True:
                    effect = steps.send(await self._aeffect(run, effect))
            except StopIteration as done:
                turn = done.value
            except BaseException:
                steps.close()
                await self._asettle_anyway(run)
                raise
            try:
                await self._asettle(run)  # the last step's write
            except asyncio.CancelledError:
                await self._asettle_anyway(run)
                raise
        finally:
            self._end_kept(run)
        return turn

    async def _aeffect(self, run: _Run, effect: tuple[Any, ...]) -> Any:
        """`_loop`'s steps on an event loop: what may block runs in a worker thread."""
        kind = effect[0]
        if kind == _CHAT:
            await self._aboundary(run, tool=False)
            if run.session is None and type(self.provider) in _PURE_WINDOWS:
                sent = self._window(run, effect[1], effect[2])
            else:
                sent = await asyncio.to_thread(self._window, run, effect[1], effect[2])
            kept = self._call(run)
            try:
                reply = await self.kernel.achat_checked(
                    sent, context=effect[3], step=effect[4], invoke_id=run.run_id
                )
            finally:
                await self._areturned(kept)
            self._taken_over(kept)
            return reply
        if kind == _TOOL:
            await self._aboundary(run, tool=True)
            token = current_tool_call.set((run.run_id, effect[1]["id"]))
            kept = self._call(run)
            try:
                result = await self.kernel.acall_tool(effect[1], context=effect[2])
            finally:
                # a task dropped with its closed loop is finalised in another context,
                # where the token is foreign: nothing of the run's is left to reset then
                with contextlib.suppress(ValueError):
                    current_tool_call.reset(token)
                await self._areturned(kept)
            self._taken_over(kept)
            return result
        self._save_step(run, effect[1], effect[2], from_loop=True)
        return None

    def _shown(self, turn: CheckedMessages) -> Sequence[Message]:
        """The turn as the provider and the kernel's filters see it.

        The turn's messages are committed without another check, so code that could
        change them in place (a user's filters, a provider other than `DefaultProvider`,
        which copies for foreign preprocessors itself) sees copies.
        """
        if self.kernel.filters or (
            self.provider is not None and type(self.provider) is not DefaultProvider
        ):
            return copy.deepcopy(list(turn))
        return turn

    def _loop(self, run: _Run, history: list[Message], turn: CheckedMessages) -> CheckedMessages:
        """Drive `_steps` in this thread; however they end, the last tool step's write
        has been waited for (the turn's commit follows it; a stopped run leaves it for
        the resume)."""
        steps = self._steps(run, history, turn)
        kernel = self.kernel
        try:
            effect = next(steps)
            while True:  # what the loop asks, done here (see `_TOOL` and the kinds beside it)
                kind = effect[0]
                if kind == _CHAT:
                    self._boundary(run, tool=False)
                    sent = self._window(run, effect[1], effect[2])
                    kept = self._call(run)
                    try:
                        reply = kernel.chat_checked(
                            sent, context=effect[3], step=effect[4], invoke_id=run.run_id
                        )
                    finally:
                        self._returned(kept)
                    self._taken_over(kept)
                    effect = steps.send(reply)
                elif kind == _TOOL:
                    self._boundary(run, tool=True)
                    token = current_tool_call.set((run.run_id, effect[1]["id"]))
                    kept = self._call(run)
                    try:
                        result = kernel.call_tool(effect[1], context=effect[2])
                    finally:
                        current_tool_call.reset(token)
                        self._returned(kept)
                    self._taken_over(kept)
                    effect = steps.send(result)
                else:
                    self._save_step(run, effect[1], effect[2])
                    effect = steps.send(None)
        except StopIteration as done:
            turn = done.value
            self._settle(run)
        except BaseException:
            steps.close()
            try:
                self._settle(run)
            except Exception as exc:  # the run's own error matters more
                log.warning("run_journal_failed", run_id=run.run_id, error=str(exc))
            raise
        finally:
            self._end_kept(run)
        return turn

    def _window(self, run: _Run, history: list[Message], shown: Sequence[Message]) -> list[Message]:
        """What an LLM call is sent: the provider's ``prepare`` of history + turn (or the
        session's window), the turn always kept whole; a session's memo is kept.

        A session's handlers get the whole stored history as their ``full_context``
        (`Session.handlers_history`). A run only appends its turn: a full context a
        resize handler returns is not applied by it (`Session.refresh` applies one),
        and the session warns so once."""
        sent = [*history, *shown]
        session = run.session
        if session is not None:
            if run.full is None:
                run.full = session.handlers_history(history)
            resized = session.shape(run.full, sent)
            if resized.memo is not None:
                run.memos.append(resized.memo)
            if resized.full_context is not None:
                session.note_unapplied(run.run_id)
            return keep_turn(resized.window, shown)
        if self.provider is not None:
            return keep_turn(self.provider.prepare(run.cid, sent), shown)
        return sent

    def _steps(
        self, run: _Run, history: list[Message], turn: CheckedMessages
    ) -> Generator[tuple[Any, ...], Any, CheckedMessages]:
        """Continue a turn from wherever it is: the input, a tool call, or its results.

        A generator: it yields what it needs done (`_TOOL`, `_CHAT`, ...) and returns
        the turn, so one loop serves a thread's run and an event loop's.

        Every message joins the turn checked once where it was made (the input in
        `run`, a reply by the kernel, a tool result here), so the turn is committed
        without another check. The messages of a tool step (the call and its results)
        are journaled in one write once its tools ran; a reply without tool calls is
        journaled only by the commit. With the run's session each call is sent its
        window, and the memos its handlers return are kept on the run.
        """
        inputs, run_id = run.inputs, run.run_id
        context = Context.of_run(run.cid, run_id)
        max_steps = self.kernel.max_steps
        asked = -1  # the index of the turn's last assistant message, -1 before the first
        step = 0  # LLM calls made
        for index in range(inputs, len(turn)):
            if turn[index].get("role") == "assistant":
                asked, step = index, step + 1
        unsaved: CheckedMessages | None = None
        while True:
            if asked >= 0:
                calls = turn[asked].get("tool_calls")
                if not calls:
                    return turn
                answered = {m.get("tool_call_id") for m in turn[asked + 1 :]}
                cap = self.kernel.max_tool_calls
                if any(call["id"] not in answered for call in calls[:cap]):  # a tool will run
                    self._check_recordable(run)
                for position, call in enumerate(calls):
                    if call["id"] in answered:
                        continue
                    if position >= cap:  # past max_tool_calls: answered, never run
                        result = self.kernel.skip_call(call, len(calls), context=context)
                    else:
                        result = yield (_TOOL, call, context)
                    piece = self._recordable(result)
                    turn = turn.join(piece)
                    unsaved = piece if unsaved is None else unsaved.join(piece)
                if unsaved is not None:
                    yield (_SAVE, turn, unsaved)
                    unsaved = None
            if step >= max_steps:
                raise StepLimitExceeded(
                    f"run {run_id} made {max_steps} LLM calls and the model still asks "
                    "for tools; nothing was stored. Raise max_steps or check the tools"
                )
            reply = yield (_CHAT, history, self._shown(turn), context, step)
            self._check_reply(run, reply)
            asked = len(turn)
            turn = turn.join(reply)
            unsaved = reply
            step += 1

    def _record_limit(self) -> int | None:
        """The largest message a run records (`record_limit`), known at first use (the
        stores are known once the first run has its journal)."""
        limit = self._result_limit
        if limit == _UNKNOWN:
            journal = None if self._journal is None else self._journal.store
            limit = self._result_limit = record_limit(self.provider, journal)
        return limit

    def _check_reply(self, run: _Run, reply: CheckedMessages) -> None:
        """Refuse a reply the run could not record (`check_reply_size`: larger than its
        stores keep), before any of its tools runs: `LLMError`, nothing of it stored.
        A session that records only some ``reply_keys`` of a final answer records less
        than the reply: its commit checks what it records."""
        if run.session is not None and run.session.reply_keys and not reply[0].get("tool_calls"):
            return
        check_reply_size(reply, self._record_limit())

    def _recordable(self, result: ToolResult) -> CheckedMessages:
        """A tool's result as the run records it, checked once: one larger than the
        run's stores keep becomes an error result the model reads (`oversized_result`),
        and one they refuse for what it holds (a lone surrogate) is made recordable
        (`recordable_result`). The tool ran: a retry would run it again."""
        # a plain dict, checked here once (`result.message` is a builder's, checked too)
        answer = {"role": "tool", "tool_call_id": result.call_id, "content": result.content}
        try:
            piece = msgs.check([answer], max_bytes=None)
        except InvalidMessage as exc:
            result = recordable_result(result, exc)
            answer = {"role": "tool", "tool_call_id": result.call_id, "content": result.content}
            piece = msgs.check([answer], max_bytes=None)
        limit = self._record_limit()
        size = piece.sizes[0]
        if limit is None or size <= limit:
            return piece
        too_large = oversized_result(result.call_id, result.name, size, limit)
        return msgs.check([too_large.message], max_bytes=None)

    def _check_recordable(self, run: _Run) -> None:
        """Stop a run before its tool step when its journal's store is known to refuse
        writes (a full disk): the tools would run, and their results could not be
        recorded, so a retry would run them again.

        Raises:
            DiskFull: The store refuses writes; nothing was written.
        """
        journal = self._journal
        if journal is None:
            return
        store = journal.store
        if store.refuses_writes():
            raise DiskFull(
                f"run {run.run_id} stopped before its tool step: store {store.name!r} "
                "refuses writes (its disk is full, or its Redis is out of memory), so the "
                "tools' results could not be recorded; nothing was written. Free space "
                "and retry"
            )

    def __repr__(self) -> str:
        return f"<Agent memory={self.provider!r} tools={sorted(self.kernel.tools)}>"
