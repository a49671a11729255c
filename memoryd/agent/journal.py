"""The run journal: the tool steps of unfinished agent runs, with a lease on each run.

A run pays for its journal only when it calls tools (Koog's Persistence, at the price
of one write per tool step):

* a turn without tool calls writes nothing here: its one write is the turn's commit;
* after each tool step, the step's messages (the assistant's tool calls and all of
  their results: one write however many calls ran in parallel) are appended to the
  run's journal conversation ``memoryd.run/<run id>``; the first such write also holds
  a header (the conversation, its base version, how many messages are the input, the
  owner) and the input itself. The run makes its next LLM call while the store
  commits that write, and waits for it before its next tool call (`StepWrite`): no
  tool runs before the steps before it are durable, and a real LLM call hides the
  write's fsync;
* the turn's commit clears the journal in the same write (`StoreHandle.add`'s
  ``then_clear``), so k tool steps cost k + 1 writes and a finished run leaves
  nothing listed: journal ids start with `memoryd.store.requests.HIDDEN_PREFIX`, which
  `conversations`, `tail` and exports skip.

The unfinished runs of a store are the journal conversations holding messages
(`RunJournal.pending`, store-wide). Every write to a journal is compare-and-set on its
version, so a run has one writer: resuming *claims* it first (a ``memo`` event naming
the new owner), and a former owner's next write then fails. A run's lease is its
owner and the time of its journal's last event: a live owner renews it
(`RunJournal.renew`) within ``lease_s``, so a run whose lease has run out, or whose
owner is this process but which is not running here, is orphaned.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from memoryd import messages as msgs
from memoryd._shown import shown
from memoryd.agent.drops import UNDROPPED
from memoryd.agent.lease_keeper import KEEPER, Kept
from memoryd.agent.locks import active_runs, run_active
from memoryd.errors import ConflictError, InvalidConversationId, UnknownRun
from memoryd.messages import CheckedMessages
from memoryd.store import requests
from memoryd.store.handle import StoreHandle
from memoryd.store.requests import HIDDEN_PREFIX

__all__ = [
    "DEFAULT_LEASE_S",
    "JOURNAL_PREFIX",
    "MAX_RUN_ID_BYTES",
    "OWNER",
    "RunJournal",
    "RunRecord",
    "StepWrite",
    "check_new_run_id",
    "check_run_id",
    "journal_id",
    "owner_gone",
]

Message = dict[str, Any]
JOURNAL_PREFIX = HIDDEN_PREFIX
DEFAULT_LEASE_S = 30.0
"""How long a run's lease lasts after its journal's last event."""
OWNER = f"{socket.gethostname()}/{os.getpid()}/{uuid.uuid4().hex[:8]}"
"""This process's owner id in run leases."""
_HEADER_KEY = "memoryd_run"


def owner_gone(owner: str) -> bool:
    """True when ``owner`` (an owner id like `OWNER`) names a process of this host that
    no longer exists."""
    host, _, rest = owner.partition("/")
    pid = rest.partition("/")[0]
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        return False
    return False


def check_run_id(run_id: object) -> str:
    """``run_id`` when it is a non-empty str.

    Raises:
        ValueError: It is not.
    """
    if not isinstance(run_id, str) or not run_id:
        raise ValueError(f"run_id must be a non-empty str, not {run_id!r}")
    return run_id


MAX_RUN_ID_BYTES = msgs.MAX_CONVERSATION_ID_BYTES - len(JOURNAL_PREFIX.encode("utf-8"))
"""The longest run id (UTF-8 bytes): its journal ``memoryd.run/<run id>`` must be a
conversation id."""


def check_new_run_id(run_id: object) -> str:
    """``run_id`` when a new run may take it: a non-empty str that names its journal
    (``memoryd.run/<run id>``: at most `MAX_RUN_ID_BYTES` UTF-8 bytes, no control
    character, no lone surrogate). Checked before the run starts, so that no tool runs
    in a run whose steps could not be recorded.

    Raises:
        ValueError: It is not (the message says why).
    """
    checked = check_run_id(run_id)
    try:
        msgs.validate_conversation_id(journal_id(checked))
    except InvalidConversationId as exc:
        raise ValueError(
            f"run_id {shown(checked)} cannot name its journal 'memoryd.run/<run id>': {exc} "
            f"(a run id is at most {MAX_RUN_ID_BYTES} UTF-8 bytes, with no control character)"
        ) from None
    return checked


def journal_id(run_id: str) -> str:
    """The hidden conversation holding one run's journal.

    Args:
        run_id: The run id.

    Returns:
        ``memoryd.run/<run id>``.
    """
    return f"{JOURNAL_PREFIX}{run_id}"


@dataclass(frozen=True, kw_only=True, slots=True)
class RunRecord:
    """An unfinished run as its journal records it.

    Attributes:
        run_id: The run id.
        conversation_id: The conversation it runs on.
        base_version: The conversation's version when the run started.
        messages: The turn so far: the input, then every recorded step.
        inputs: How many of ``messages`` are the run's input.
        owner: The owner id of the process holding its lease.
        heartbeat: When the lease was last renewed (seconds since the epoch).
        lease_s: How long the lease lasts after ``heartbeat``.
        journal_version: The journal's version (the compare-and-set base of its next write).
        agent: The agent type that runs it, when a system named one.
    """

    run_id: str
    conversation_id: str
    base_version: int
    messages: tuple[Message, ...]
    inputs: int
    owner: str
    heartbeat: float
    lease_s: float
    journal_version: int
    agent: str | None = None

    def orphaned(self, now: float, running_here: bool = False) -> bool:
        """True when no live process holds the run: its lease ran out, its owner is a
        process of this host that is gone, or it is this process's run but not running
        here.

        Args:
            now: The time (seconds since the epoch).
            running_here: Whether the run is running in this process.
        """
        if self.owner == OWNER:
            return not running_here
        return now > self.heartbeat + self.lease_s or owner_gone(self.owner)


@dataclass(slots=True)
class _Live:
    """A journaled run this process writes: its journal version (the CAS base)."""

    version: int
    written_at: float


class StepWrite:
    """A tool step's journal write on its way to the store (`RunJournal.begin_step`).

    Args:
        settle: Waits for the write and records the run's new journal version (a
            thread's write), else None.
        settle_async: The same, awaited (an event loop's write), else None.
    """

    __slots__ = (
        "_direct",
        "_lock",
        "_loop",
        "_outcome",
        "_requested",
        "_settle",
        "_settle_async",
        "_task",
    )

    def __init__(
        self,
        settle: Callable[[], None] | None,
        settle_async: Callable[[], Awaitable[None]] | None,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        self._settle = settle
        self._settle_async = settle_async
        self._loop = loop
        """The event loop that sent the write (``settle_async``), else None."""
        self._task: asyncio.Future[None] | None = None
        self._direct = False
        self._requested = False
        self._lock = threading.Lock()
        self._outcome: BaseException | bool = False
        """False until waited for; then True, or the exception the wait raised."""

    @property
    def from_loop(self) -> bool:
        """True for a write sent from an event loop (awaited there, `wait_async`)."""
        return self._settle is None

    @property
    def recorded(self) -> bool:
        """True once an event loop's write was waited for in a task (`request_wait`),
        successfully, and its journal version recorded: read from any thread."""
        task = self._task
        return task is not None and task.done() and not task.cancelled() and not task.exception()

    def wait(self) -> None:
        """Wait until the step is durable.

        Raises:
            ConflictError: Another process took the run over (its lease ran out);
                the run is no longer this journal's to write.
            WriteTimeout, StoreUnavailable: As `StoreHandle.add`.
            RuntimeError: The write was sent from an event loop: await `wait_async`.
        """
        if self._settle is None:
            raise RuntimeError("this step write was sent from an event loop: await wait_async()")
        # Waited for once (the lease keeper, then the run), then replayed: the lock is
        # the one place two threads meet over a write (its PendingWrite is not shared).
        with self._lock:
            if self._outcome is False:
                try:
                    self._settle()
                except BaseException as exc:
                    self._outcome = exc
                    raise
                self._outcome = True
            elif self._outcome is not True:
                raise self._outcome

    def request_wait(self) -> None:
        """From any thread (the lease keeper): have the loop that sent this write wait
        for it in a task of its own, so it is recorded while the run is in a long LLM
        call (`recorded`). Asked once; nothing for a thread's write. A write the run
        awaits meanwhile is taken by the run alone."""
        loop = self._loop
        if loop is None or self._requested:
            return
        self._requested = True
        with contextlib.suppress(RuntimeError):  # a closed loop: its run is gone
            loop.call_soon_threadsafe(self._start)

    def _start(self) -> None:
        if self._settle_async is not None and self._task is None and not self._direct:
            self._task = asyncio.ensure_future(self._settle_async())
            self._task.add_done_callback(_outcome_taken)

    async def wait_async(self) -> None:
        """`wait`, from the event loop that sent the write (``from_loop=True``); a
        thread's write is waited for in a worker thread. A write already waited for in
        a task (`request_wait`) gives that task's outcome."""
        if self._settle_async is None:
            await asyncio.to_thread(self.wait)
        elif self._task is None:
            self._direct = True  # no task starts for it now
            await self._settle_async()
        else:
            await asyncio.shield(self._task)


def _outcome_taken(task: asyncio.Future[None]) -> None:
    """Take a settled task's outcome, so one that no awaiter took is not reported lost."""
    if not task.cancelled():
        task.exception()


class RunJournal:
    """Reads and writes run journals in one store.

    Args:
        store: The store, or a function returning it (resolved on every call, so a
            journal on the default store survives ``memoryd.shutdown()``).
        lease_s: How long a run's lease lasts after its last journal write.
        clock: Wall-clock time (seconds since the epoch), for leases.
    """

    def __init__(
        self,
        store: StoreHandle | Callable[[], StoreHandle],
        *,
        lease_s: float = DEFAULT_LEASE_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self.lease_s = lease_s
        self._clock = clock
        self._live: dict[str, _Live] = {}
        self._taken: set[str] = set()
        """Runs of this process another took over (a compare-and-set refused): none of
        their writes is recorded again, so a failing run never drops the new owner's
        journal (`forget` ends the note)."""

    @property
    def store(self) -> StoreHandle:
        """The store the journal lives in."""
        return self._store if isinstance(self._store, StoreHandle) else self._store()

    # -- writes ---------------------------------------------------------------------------

    def journaled(self, run_id: str) -> bool:
        """True once this journal wrote (or claimed) the run's journal."""
        return run_id in self._live

    def begin_step(
        self,
        run_id: str,
        *,
        cid: str,
        base_version: int,
        inputs: int,
        turn: CheckedMessages,
        added: CheckedMessages,
        agent: str | None = None,
        from_loop: bool = False,
    ) -> StepWrite:
        """Send a tool step's record: ONE compare-and-set write of the messages it ``added``.

        The run's first step writes the header and the whole ``turn`` instead.
        Messages are written as they were checked, without a second check. The write
        is durable once the returned `StepWrite` is waited for: the run may make its
        next LLM call meanwhile, but waits for it before its next tool call, before its
        commit, and before it stops (no tool runs before the steps before it are
        recorded). The run's next step is sent after that wait.

        Args:
            run_id: The run id.
            cid: The conversation.
            base_version: The conversation's version when the run started.
            inputs: How many of ``turn``'s messages are the input.
            turn: The turn so far.
            added: The messages this step added (the end of ``turn``).
            agent: The agent type, recorded in the header for recovery.
            from_loop: Called from a running event loop (`Agent.arun`): the write goes
                through the store's awaitable path (`StoreHandle.begin_on_loop`) and is
                awaited with `StepWrite.wait_async`, never blocking the loop.
        """
        store = self.store
        live = self._live.get(run_id)
        request, batch = self._step_request(
            store,
            run_id,
            live,
            cid=cid,
            base_version=base_version,
            inputs=inputs,
            turn=turn,
            added=added,
            agent=agent,
        )
        if from_loop:
            sending = store.begin_on_loop(request)
            sent_at = self._clock()

            async def settle_async() -> None:
                try:
                    # a cancelled wait leaves the write going, and waiting again (the
                    # run's cleanup) finds its outcome (`StoreHandle.begin_on_loop`)
                    version = await sending
                except ConflictError as exc:
                    refused = self._refused
                    version = await asyncio.to_thread(refused, exc, store, run_id, live, batch)
                self._written(run_id, version, sent_at)

            return StepWrite(None, settle_async, asyncio.get_running_loop())
        pending = store.begin(request)
        sent_at = self._clock()  # the lease runs from here, not from the wait

        def settle() -> None:
            try:
                version = pending.result()
            except ConflictError as exc:
                version = self._refused(exc, store, run_id, live, batch)
            self._written(run_id, version, sent_at)

        return StepWrite(settle, None)

    def _step_request(
        self,
        store: StoreHandle,
        run_id: str,
        live: _Live | None,
        *,
        cid: str,
        base_version: int,
        inputs: int,
        turn: CheckedMessages,
        added: CheckedMessages,
        agent: str | None,
    ) -> tuple[requests.Add, CheckedMessages]:
        """A tool step's write, and the messages it writes: the header and the whole
        turn for the run's first step, else the messages the step added."""
        if live is None:
            header = {
                "conversation_id": cid,
                "base_version": base_version,
                "inputs": inputs,
                "owner": OWNER,
                "lease_s": self.lease_s,
                "agent": agent,
            }
            head = msgs.check(
                [{"role": "system", "content": "run journal", _HEADER_KEY: header}],
                max_bytes=None,
            )
            batch, expected = head.join(turn), 0
        else:
            batch, expected = added, live.version
        request = requests.add(
            journal_id(run_id),
            batch,
            idempotency_key=None,
            expected_version=expected,
            max_bytes=store.max_message_bytes,
        )
        return request, batch

    def _refused(
        self,
        exc: ConflictError,
        store: StoreHandle,
        run_id: str,
        live: _Live | None,
        batch: CheckedMessages,
    ) -> int:
        """A step write refused by its compare-and-set: the first write of a run whose id
        ran before is written again at the journal's version (`_reopen`); otherwise, or
        if that fails too, the run is no longer this journal's (`ConflictError`).
        """
        try:
            if live is not None:
                raise exc
            return self._reopen(store, run_id, batch)
        except ConflictError:
            self._lose(run_id)
            raise

    def _lose(self, run_id: str) -> None:
        """The run is someone else's now: forget it, and never record it again."""
        self._live.pop(run_id, None)
        self._taken.add(run_id)

    def _written(self, run_id: str, version: int, sent_at: float) -> None:
        """Record a step's write: the journal's new version, and when the lease renewed.

        A write recorded already (the lease keeper waited for it during a long call,
        then renewed) is not recorded again over the newer version."""
        if run_id in self._taken:
            return  # waited for again after a takeover (by the lease keeper, then the run)
        record = self._live.get(run_id)
        if record is None:
            self._live[run_id] = _Live(version, sent_at)
        elif version > record.version:  # one record per run, kept up to date
            record.version, record.written_at = version, sent_at

    def _reopen(self, store: StoreHandle, run_id: str, batch: CheckedMessages) -> int:
        """The first write of a run whose id ran before: a retried request, or a run id
        given again. A journal left empty by that earlier run (finished or discarded; a
        backend that keeps a cleared journal's versions) is written at its version, still
        compare-and-set; one that holds messages belongs to a run still pending.

        Raises:
            ConflictError: The journal holds a pending run, or another writer won.
        """
        journal = journal_id(run_id)
        version = store.version(journal)
        if store.get(journal, limit=1):
            raise ConflictError(
                f"run {run_id!r} is already pending in store {store.name!r} (running in "
                "another process, or waiting to be resumed): resume or discard it, or "
                "start this run under another id",
                expected=0,
                actual=version,
            )
        return store.add(journal, batch, expected_version=version)

    def renew_due(self, run_id: str) -> bool:
        """True when `renew` would write: the run is this journal's and half of its
        lease has passed."""
        live = self._live.get(run_id)
        return live is not None and self._clock() - live.written_at >= self.lease_s / 2

    def renew(self, run_id: str) -> bool:
        """Renew the lease of a run this process writes, if half of it has passed.

        Returns:
            True when a renewal was written.

        Raises:
            ConflictError: Another process took the run over.
        """
        if not self.renew_due(run_id):
            return False
        live = self._live[run_id]
        try:
            version = self.store.record(
                journal_id(run_id),
                "memo",
                data={"owner": OWNER, "lease_s": self.lease_s},
                expected_version=live.version,
            )
        except ConflictError:
            self._lose(run_id)
            raise
        self._live[run_id] = _Live(version, self._clock())
        return True

    def kept(self, run_id: str, writing: Callable[[], StepWrite | None]) -> Kept:
        """The run, kept by the process's lease keeper during its calls until
        `LeaseKeeper.end` (`memoryd.agent.lease_keeper`).

        Args:
            run_id: The run (the calling thread writes its journal).
            writing: Its step write in flight now, or None.
        """
        kept = Kept(
            run_id,
            self.lease_s,
            lambda: self.renew_due(run_id),
            lambda: self.renew(run_id),
            writing,
        )
        return KEEPER.keep(kept)

    def claim(self, record: RunRecord) -> None:
        """Take a run over for this process (compare-and-set: one claimant wins).

        Raises:
            ConflictError: Someone wrote to the run since ``record`` was read.
        """
        version = self.store.record(
            journal_id(record.run_id),
            "memo",
            data={"owner": OWNER, "lease_s": self.lease_s},
            expected_version=record.journal_version,
        )
        self._taken.discard(record.run_id)
        self._live[record.run_id] = _Live(version, self._clock())

    def finished_by(self, run_id: str) -> str | None:
        """The journal to clear with the turn's commit.

        Returns:
            The journal id when the run wrote one, else None.
        """
        return journal_id(run_id) if run_id in self._live else None

    def forget(self, run_id: str) -> None:
        """Stop tracking a run this process no longer writes (its turn committed, or it
        ended pending); its journal, if any, is left as it is."""
        self._live.pop(run_id, None)
        self._taken.discard(run_id)

    def orphan(self, run_id: object) -> RunRecord:
        """The unfinished run ``run_id``, when no live process holds it.

        Args:
            run_id: The run id (from `pending`).

        Returns:
            Its record.

        Raises:
            ValueError: ``run_id`` is not a non-empty str, or a live process holds the
                run: this one, running it, or another whose lease has not run out (the
                message names the owner).
            UnknownRun: No unfinished run of that id.
        """
        record = self.load(check_run_id(run_id))
        self.check_orphaned(record)
        return record

    def check_orphaned(self, record: RunRecord, *, running_here: bool | None = None) -> None:
        """Check that no live process holds the run ``record`` describes.

        Args:
            record: The run's record.
            running_here: Whether this process runs it (None: whether it is active here;
                a caller that marked it active itself to take it over passes False).

        Raises:
            ValueError: This process runs it, or another holds its lease (named).
        """
        now = self._clock()
        here = record.run_id in active_runs() if running_here is None else running_here
        if record.orphaned(now, here):
            return
        if record.owner == OWNER:
            raise ValueError(f"run {record.run_id!r} is running in this process; wait for its call")
        raise ValueError(
            f"run {record.run_id!r} is held by the live process {record.owner!r} (its lease "
            f"runs out in {record.heartbeat + record.lease_s - now:.1f} s unless renewed); "
            "that process finishes it"
        )

    def discard_orphan(self, record: RunRecord) -> None:
        """Drop an orphaned run (`orphan`): claimed first, compare-and-set on its journal,
        so a process that took it over since ``record`` was read keeps it; then cleared.

        Raises:
            ConflictError: Another process wrote to the run since ``record`` was read.
            ValueError: The run started running in this process meanwhile.
        """
        with run_active(record.run_id):
            self.claim(record)
            self.discard(record.run_id)

    def discard(self, run_id: str) -> None:
        """Drop a run: it is no longer pending (its journal is cleared). A run this
        journal wrote whose drop fails is noted (`memoryd.agent.drops`) and dropped by
        `drop_undropped` once the store takes writes again.

        Args:
            run_id: The run id.

        Raises:
            StorageError, StoreUnavailable, WriteTimeout: As `StoreHandle.clear`.
        """
        live = self._live.pop(run_id, None)
        store = self.store
        try:
            store.clear(journal_id(run_id))
        except Exception:
            if live is not None:
                UNDROPPED.note(store, run_id, live.version)
            raise

    def drop_undropped(self) -> list[str]:
        """Drop the runs of this store that failed here and could not be dropped then
        (`memoryd.agent.drops`): each claimed compare-and-set on the version noted, then
        cleared. A run written since (resumed, claimed) is left as it is. Stops at the
        first write the store still refuses, keeping that run and the rest noted.

        Returns:
            The run ids dropped.
        """
        store = self.store
        dropped: list[str] = []
        for run_id, version in UNDROPPED.of(store).items():
            try:
                with run_active(run_id):
                    outcome = self._drop_noted(store, run_id, version)
            except ValueError:
                # Another thread of this process has it now: dropping it (a run starting
                # beside this one), or resuming it. The note stays: a resume writes to
                # the journal, so the next try finds it theirs; a drop refused by a full
                # disk is tried again. Forgetting it here left it pending for good.
                continue
            if outcome == "refused":
                break  # the store still refuses writes: next time
            UNDROPPED.forget(store, run_id)
            if outcome == "dropped":
                dropped.append(run_id)
        return dropped

    def _drop_noted(self, store: StoreHandle, run_id: str, version: int) -> str:
        """Claim a noted run at ``version``, then clear it.

        Returns:
            ``"dropped"``; ``"theirs"`` when someone wrote to it since (or it is gone);
            ``"refused"`` when the store refused a write (it stays noted, at the
            version it has now).
        """
        journal = journal_id(run_id)
        data = {"owner": OWNER, "lease_s": self.lease_s}
        try:
            claimed = store.record(journal, "memo", data=data, expected_version=version)
        except ConflictError:
            return "theirs"
        except Exception:
            return "refused"
        UNDROPPED.note(store, run_id, claimed)
        try:
            store.clear(journal)
        except Exception:
            return "refused"
        return "dropped"

    # -- reads ----------------------------------------------------------------------------

    def pending(self, cid: str | None = None) -> list[RunRecord]:
        """The unfinished runs of the store (or of one conversation), oldest first.

        Runs that failed in this process and whose journal could not be dropped then
        are dropped first, if the store takes writes now (`drop_undropped`).

        Args:
            cid: Only this conversation's runs (None: every run in the store).

        Returns:
            Their records.
        """
        if UNDROPPED:
            self.drop_undropped()
        store = self.store
        records = []
        for journal in store.conversations(prefix=JOURNAL_PREFIX):
            try:
                record = self.load(journal[len(JOURNAL_PREFIX) :])
            except UnknownRun:  # finished meanwhile
                continue
            if cid is None or record.conversation_id == cid:
                records.append(record)
        records.sort(key=lambda r: r.heartbeat)
        return records

    def load(self, run_id: str) -> RunRecord:
        """Replay one unfinished run's journal.

        Args:
            run_id: The run id.

        Returns:
            The record.

        Raises:
            UnknownRun: No unfinished run ``run_id`` is recorded.
        """
        store = self.store
        try:
            events = store.events(journal_id(run_id))
        except InvalidConversationId as exc:  # no run could have this id
            raise UnknownRun(
                f"no unfinished run {shown(run_id)} can be recorded: {exc} (a run's journal is "
                f"{JOURNAL_PREFIX!r} + its id)"
            ) from None
        messages: list[Message] = []
        owner, lease_s = "", self.lease_s
        for event in events:
            if event.kind == "cleared":
                messages = []
            elif event.kind == "appended":
                messages.extend(event.messages)
            elif event.kind == "memo":
                data = event.data or {}
                owner = str(data.get("owner", owner))
                lease_s = float(data.get("lease_s", lease_s))
        header = messages[0].get(_HEADER_KEY) if messages else None
        if not isinstance(header, dict):
            raise UnknownRun(
                f"no unfinished run {run_id!r} is recorded in store {store.name!r}; "
                "check the id (pending_runs() lists them)"
            )
        first = next(e for e in events if e.kind == "appended")
        if not any(e.kind == "memo" and e.version > first.version for e in events):
            owner, lease_s = str(header["owner"]), float(header["lease_s"])
        return RunRecord(
            run_id=run_id,
            conversation_id=str(header["conversation_id"]),
            base_version=int(header["base_version"]),
            messages=tuple(messages[1:]),
            inputs=int(header["inputs"]),
            owner=owner,
            heartbeat=events[-1].timestamp,
            lease_s=lease_s,
            journal_version=events[-1].version,
            agent=header.get("agent"),
        )
