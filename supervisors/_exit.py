"""Exit reasons: why an actor stopped."""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["Exit", "ExitKind"]


class ExitKind(enum.Enum):
    """The kinds of exit a supervisor distinguishes."""

    NORMAL = "normal"
    """The actor stopped itself, or was stopped with ``ActorRef.stop()``."""
    SHUTDOWN = "shutdown"
    """Its supervisor stopped it, or it is a supervisor that gave up."""
    CRASHED = "crashed"
    """An unexpected exception, or ``SupervisedActor.crash``."""
    KILLED = "killed"
    """Fault injection through ``supervisors.kill``."""
    START_FAILED = "start_failed"
    """``init`` raised, or the start was abandoned after its timeout."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Exit:
    """Why an actor stopped.

    Attributes:
        kind: the kind of exit.
        error: the exception behind a crash, kill or failed start.
        detail: a short machine-readable note (for example
            ``"reached_max_restart_intensity"``).
    """

    kind: ExitKind
    error: BaseException | None = None
    detail: str | None = None

    @property
    def abnormal(self) -> bool:
        """True unless the exit is normal or a shutdown (OTP's rule for transient children)."""
        return self.kind not in (ExitKind.NORMAL, ExitKind.SHUTDOWN)

    def describe(self) -> str:
        """A one-line reason for logs: the kind, then the error or detail."""
        if self.error is not None:
            return f"{self.kind.value}: {type(self.error).__name__}: {self.error}"
        if self.detail:
            return f"{self.kind.value}: {self.detail}"
        return self.kind.value
