"""The exception tree of DESIGN §3.2, its attributes and its messages."""

from __future__ import annotations

import copy
import pickle

import pytest

from memoryd import errors
from memoryd.errors import (
    AlreadyStarted,
    ConflictError,
    CorruptRecord,
    InvalidConversationId,
    InvalidMessage,
    MemorydError,
    StorageError,
    StoreUnavailable,
    WriteTimeout,
)

PARENTS = {
    InvalidMessage: (MemorydError, ValueError),
    InvalidConversationId: (MemorydError, ValueError),
    ConflictError: (MemorydError,),
    AlreadyStarted: (MemorydError,),
    StoreUnavailable: (MemorydError,),
    WriteTimeout: (StoreUnavailable,),
    StorageError: (MemorydError,),
    CorruptRecord: (StorageError,),
}


@pytest.mark.parametrize(
    ("cls", "parents"), PARENTS.items(), ids=lambda v: getattr(v, "__name__", "")
)
def test_exception_has_the_documented_parents(cls: type, parents: tuple[type, ...]) -> None:
    """Each exception sits where the tree in DESIGN §3.2 puts it."""
    for parent in parents:
        assert issubclass(cls, parent)
    assert issubclass(cls, MemorydError)


def test_root_is_a_plain_exception() -> None:
    """MemorydError is an Exception and not a ValueError, so only the two bad-input errors are."""
    assert issubclass(MemorydError, Exception)
    assert not issubclass(MemorydError, ValueError)
    value_errors: set[type] = {cls for cls in PARENTS if issubclass(cls, ValueError)}
    assert value_errors == {InvalidMessage, InvalidConversationId}


def test_write_timeout_is_caught_as_store_unavailable() -> None:
    """Callers that handle StoreUnavailable also handle a write timeout."""
    with pytest.raises(StoreUnavailable):
        raise WriteTimeout("no answer in 5 s; retry with the same idempotency_key")


def test_all_is_sorted_and_complete() -> None:
    """__all__ is sorted and names every exception class in the module."""
    assert errors.__all__ == sorted(errors.__all__)
    classes = {
        name
        for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, BaseException) and not name.startswith("_")
    }
    assert set(errors.__all__) == classes


def test_docstring_draws_every_exception() -> None:
    """The module docstring draws the tree with every public exception in it."""
    doc = errors.__doc__ or ""
    for name in errors.__all__:
        assert name in doc
    assert "└──" in doc


def test_conflict_error_carries_both_versions() -> None:
    """ConflictError keeps expected and actual, and its default message names both."""
    exc = ConflictError(expected=3, actual=5)
    assert (exc.expected, exc.actual) == (3, 5)
    assert "3" in str(exc) and "5" in str(exc)
    assert "retry" in str(exc)


def test_conflict_error_keeps_a_custom_message() -> None:
    """A message given explicitly is used as is."""
    exc = ConflictError("conversation 'a' moved", expected=None, actual=2)
    assert str(exc) == "conversation 'a' moved"
    assert exc.expected is None


def test_conflict_error_requires_the_versions() -> None:
    """The versions are required keyword arguments."""
    with pytest.raises(TypeError):
        ConflictError("x")  # type: ignore[call-arg]


@pytest.mark.parametrize(
    "clone", [lambda e: pickle.loads(pickle.dumps(e)), copy.copy, copy.deepcopy]
)
def test_conflict_error_survives_pickle_and_copy(clone: object) -> None:
    """Attributes survive pickling (a trip between processes) and copying."""
    exc = ConflictError(expected=1, actual=2)
    again = clone(exc)  # type: ignore[operator]
    assert type(again) is ConflictError
    assert (again.expected, again.actual, str(again)) == (1, 2, str(exc))


def test_already_started_carries_the_owner_pid() -> None:
    """AlreadyStarted names the owner's pid when known, and keeps it across pickle."""
    exc = AlreadyStarted("data/chat is in use by pid 4242", owner_pid=4242)
    assert exc.owner_pid == 4242
    again = pickle.loads(pickle.dumps(exc))
    assert again.owner_pid == 4242
    assert str(again) == str(exc)
    assert AlreadyStarted("name 'x' is taken").owner_pid is None


@pytest.mark.parametrize(
    "cls",
    [
        InvalidMessage,
        InvalidConversationId,
        StoreUnavailable,
        WriteTimeout,
        StorageError,
        CorruptRecord,
    ],
)
def test_plain_errors_pickle_with_their_message(cls: type[MemorydError]) -> None:
    """The plain errors round-trip through pickle with their message."""
    again = pickle.loads(pickle.dumps(cls("what went wrong; what to do")))
    assert type(again) is cls
    assert str(again) == "what went wrong; what to do"
