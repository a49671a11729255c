"""Errors raised by the supervisors package.

```
SupervisorError
├── ChildSpecError(ValueError)   a child spec or supervisor setting is invalid
├── NameTaken                    a name is already registered to a live actor
├── StartError                   a child failed to start (or did not confirm in time)
├── UnknownChild(KeyError)       no child with that id
├── ChildRunning                 delete/restart asked of a child that is running
└── CallTimeout                  a supervisor did not answer within the deadline
```
"""

from __future__ import annotations

__all__ = [
    "CallTimeout",
    "ChildRunning",
    "ChildSpecError",
    "NameTaken",
    "StartError",
    "SupervisorError",
    "UnknownChild",
]


class SupervisorError(Exception):
    """Base class of every error raised by ``supervisors``."""


class ChildSpecError(SupervisorError, ValueError):
    """A child spec or a supervisor setting is invalid."""


class NameTaken(SupervisorError):
    """A name is already registered to a live actor."""

    def __init__(self, name: str) -> None:
        super().__init__(f"the name {name!r} is already registered to a live actor")
        self.name = name


class StartError(SupervisorError):
    """An actor failed to start, or did not confirm it was ready in time.

    The underlying exception, if any, is chained as ``__cause__``.
    """


class UnknownChild(SupervisorError, KeyError):
    """No child with that id is known to the supervisor."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown child"


class ChildRunning(SupervisorError):
    """The operation needs a terminated child, but the child is running."""


class CallTimeout(SupervisorError):
    """A supervisor did not answer within the call deadline.

    As with OTP's ``gen_server:call``, the supervisor goes on with the request: a child
    being started may still start (and is then kept), one being stopped is stopped.
    """
