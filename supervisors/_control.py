"""Control of running ``SupervisedActor``s from outside: fault injection, a stop by a
supervisor, and borrowing an idle actor to run its methods in the caller's thread."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pykka
from pykka.messages import ProxyCall

from supervisors._actor import SupervisedActor
from supervisors._inbox import Inbox
from supervisors._link import wait_arg
from supervisors._registry import whereis

__all__ = ["borrowed_if_idle", "kill", "shutdown_actor"]


def kill(target: str | pykka.ActorRef[Any], reason: str = "killed") -> bool:
    """Fault injection: the actor crashes as if a handler raised ``Killed``.

    The crash happens when the actor reaches the message, after what is already
    queued. Its supervisor sees an abnormal exit and applies its restart policy.

    Args:
        target: a registered name or an ActorRef of a ``SupervisedActor``.
        reason: text carried by the ``Killed`` exception.

    Returns:
        True if the message was delivered, False if no such live actor exists.

    Raises:
        TypeError: ``target`` is neither a name nor an ActorRef.
    """
    if not isinstance(target, str | pykka.ActorRef):
        raise TypeError(f"kill takes a registered name or an ActorRef, not {target!r:.80}")
    ref = whereis(target) if isinstance(target, str) else target
    if ref is None:
        return False
    try:
        ref.tell(ProxyCall(attr_path=("_sv_kill",), args=(reason,), kwargs={}))
    except pykka.ActorDeadError:
        return False
    return True


def shutdown_actor(ref: pykka.ActorRef[Any], timeout_s: float, detail: str | None = None) -> bool:
    """Stop a ``SupervisedActor`` with reason ``shutdown`` and wait for it.

    Args:
        ref: the actor.
        timeout_s: how long to wait for it to finish terminating (``math.inf``: as
            long as it takes).
        detail: recorded in its exit reason.

    Returns:
        True if it stopped (or was already dead) within the timeout.
    """
    lazy = getattr(ref.actor_inbox, "lazy", None)
    if isinstance(lazy, SupervisedActor) and lazy._stop_unthreaded(detail):
        return True
    try:
        ref.ask(
            ProxyCall(attr_path=("_sv_shutdown",), args=(detail,), kwargs={}),
            timeout=wait_arg(timeout_s),
        )
    except pykka.ActorDeadError:
        return True
    except pykka.Timeout:
        return False
    return True


@contextmanager
def borrowed_if_idle(ref: pykka.ActorRef[Any]) -> Iterator[SupervisedActor | None]:
    """Borrow an idle live ``SupervisedActor`` to run its methods in this thread.

    The actor handles no message and has none waiting, so a method run now runs as
    if the actor had taken it next; messages arriving meanwhile wait in its inbox
    until the block ends.

    Args:
        ref: the actor.

    Yields:
        The actor, its inbox borrowed; or None when it is busy, dead or borrowed.
    """
    inbox = ref.actor_inbox
    owner = inbox.owner if isinstance(inbox, Inbox) else None
    actor = owner() if owner is not None else None
    if (
        not isinstance(inbox, Inbox)
        or not isinstance(actor, SupervisedActor)
        or not inbox.borrow(idle=True)
    ):
        yield None
        return
    try:
        yield actor if ref.is_alive() else None
    finally:
        inbox.give_back()
