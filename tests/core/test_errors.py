"""The exception tree of DESIGN §3.2, its attributes and its messages; and that every
exception memoryd defines is defined in memoryd/errors.py and drawn in its tree."""

from __future__ import annotations

import builtins
import copy
import importlib
import pickle
import pkgutil
import re

import pytest

import memoryd
from memoryd import errors
from memoryd.errors import (
    AgentSystemStopped,
    AlreadyStarted,
    AuthenticationError,
    CallCycle,
    CallTimeout,
    ConflictError,
    CorruptRecord,
    DenseUnavailable,
    DiskFull,
    ExportFormatError,
    ExtractionError,
    InvalidConversationId,
    InvalidMessage,
    InvalidSessionItem,
    LLMError,
    MemorydError,
    Overloaded,
    ProtocolError,
    SchemaError,
    ScriptExhausted,
    StepLimitExceeded,
    StorageError,
    StoreNotRunning,
    StoreUnavailable,
    ToolArgumentError,
    UnknownAgent,
    UnknownConversation,
    UnknownRun,
    UnknownStore,
    WriteTimeout,
)

PARENTS = {
    InvalidMessage: (MemorydError, ValueError),
    InvalidSessionItem: (InvalidMessage, TypeError),
    InvalidConversationId: (MemorydError, ValueError),
    ConflictError: (MemorydError,),
    AlreadyStarted: (MemorydError,),
    AuthenticationError: (MemorydError, PermissionError),
    StoreUnavailable: (MemorydError,),
    StoreNotRunning: (StoreUnavailable,),
    WriteTimeout: (StoreUnavailable,),
    StorageError: (MemorydError,),
    CorruptRecord: (StorageError,),
    DiskFull: (StorageError,),
    ProtocolError: (MemorydError,),
    ExportFormatError: (MemorydError, ValueError),
    LLMError: (MemorydError,),
    ScriptExhausted: (LLMError,),
    StepLimitExceeded: (MemorydError,),
    ToolArgumentError: (MemorydError, ValueError),
    UnknownConversation: (MemorydError, LookupError),
    UnknownStore: (StoreNotRunning, LookupError),
    UnknownRun: (MemorydError, LookupError),
    UnknownAgent: (MemorydError, LookupError),
    Overloaded: (MemorydError,),
    CallTimeout: (MemorydError, TimeoutError),
    CallCycle: (MemorydError,),
    AgentSystemStopped: (MemorydError,),
    SchemaError: (MemorydError, ValueError),
    ExtractionError: (MemorydError, ValueError),
    DenseUnavailable: (MemorydError, ImportError),
}

BAD_INPUT = {
    InvalidMessage,
    InvalidSessionItem,
    InvalidConversationId,
    ExportFormatError,
    ToolArgumentError,
    SchemaError,
    ExtractionError,
}
"""The errors that are also ValueErrors: the input (a message, an id, a file, tool
arguments, a schema or a model's JSON reply) is wrong, not memoryd's state."""

DEFINED_ELSEWHERE = {
    "memoryd._codec_msgpack._RefusedExt": "the msgpack ext hook's private refusal; the "
    "codec turns it into CorruptRecord before it leaves memoryd/codec.py",
    "memoryd.client._http._Stop": "the response parser's callback stop; the connection "
    "turns it into TransportFailed naming the problem",
    "memoryd.llm.openai._TooLarge": "the bounded body read's private stop; OpenAIChat turns "
    "it into LLMError naming max_response_bytes (or an excerpt saying the answer is long)",
    "memoryd.server.limits._HeadTooLarge": "the HTTP parser callback's private stop at a "
    "head over the limit; the connection answers it with a 431",
    "memoryd.server.limits._TooManyPipelined": "the HTTP parser callback's private stop "
    "past the requests one connection may queue; the connection answers it with a 429",
    "memoryd.store.lmdb.engine._MapAtCap": "the LMDB engine's private note that the map "
    "may not grow; the engine refuses the batch with StorageError",
    "memoryd.store.redis.batch._Unreachable": "the Redis batch's private retry signal; "
    "the batch answers its writers with WriteTimeout",
}
"""Exception classes memoryd defines outside memoryd/errors.py, each private to the one
module that raises and catches it, and why it stays there."""


@pytest.mark.parametrize(
    ("cls", "parents"), PARENTS.items(), ids=lambda v: getattr(v, "__name__", "")
)
def test_exception_has_the_documented_parents(cls: type, parents: tuple[type, ...]) -> None:
    """Each exception sits where the tree in DESIGN §3.2 puts it."""
    for parent in parents:
        assert issubclass(cls, parent)
    assert issubclass(cls, MemorydError)


def test_root_is_a_plain_exception() -> None:
    """MemorydError is an Exception and not a ValueError, so only the bad-input errors are."""
    assert issubclass(MemorydError, Exception)
    assert not issubclass(MemorydError, ValueError)
    value_errors: set[type] = {cls for cls in PARENTS if issubclass(cls, ValueError)}
    assert value_errors == BAD_INPUT


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


def _all_memoryd_modules() -> list[str]:
    """Import every module of memoryd (a ``__main__`` runs a program, so not those) and
    return their names; a module whose optional extra is not installed is left out."""
    names = []
    for info in pkgutil.walk_packages(memoryd.__path__, "memoryd."):
        if info.name.rpartition(".")[2] == "__main__":
            continue
        try:
            importlib.import_module(info.name)
        except ModuleNotFoundError as exc:
            if (exc.name or "").partition(".")[0] == "memoryd":
                raise
            continue  # an optional extra (langchain-core, openai-agents, ...) is missing
        names.append(info.name)
    return names


def _subclasses(cls: type[BaseException]) -> set[type[BaseException]]:
    """Every subclass of ``cls``, at any depth."""
    found: set[type[BaseException]] = set()
    for sub in cls.__subclasses__():
        found |= {sub, *_subclasses(sub)}
    return found


def _drawn_trees() -> list[tuple[str, str | None, tuple[str, ...]]]:
    """The classes drawn in the docstring's trees: (name, drawn parent, named bases).

    A node line is a name at the start of a block, or after ``├── `` / ``└── ``; the
    parent is the nearest node above it one level up; ``Name(A, B)`` names extra bases.
    """
    doc = errors.__doc__ or ""
    blocks = re.findall(r"```\n(.*?)```", doc, flags=re.DOTALL)
    node = re.compile(r"^((?:│   |    )*)(├── |└── )?([A-Z]\w*)(?:\(([\w, ]+)\))?(?:\s|$)")
    drawn: list[tuple[str, str | None, tuple[str, ...]]] = []
    for block in blocks:
        stack: list[str] = []
        for line in block.splitlines():
            match = node.match(line)
            if match is None or (match.group(2) is None and match.group(1)):
                continue  # a description continued on the next line
            depth = len(match.group(1)) // 4 + (1 if match.group(2) else 0)
            del stack[depth:]
            parent = stack[-1] if stack else None
            bases = tuple(b.strip() for b in (match.group(4) or "").split(",") if b.strip())
            drawn.append((match.group(3), parent, bases))
            stack.append(match.group(3))
    return drawn


def test_every_exception_memoryd_defines_is_defined_in_errors() -> None:
    """Walking every module of memoryd finds no exception class outside memoryd/errors.py
    but the few private ones listed, each with its reason."""
    modules = _all_memoryd_modules()
    assert "memoryd.store.lmdb.engine" in modules and "memoryd.kernel.kernel" in modules
    elsewhere = sorted(
        f"{cls.__module__}.{cls.__qualname__}"
        for cls in _subclasses(BaseException)
        if cls.__module__.partition(".")[0] == "memoryd" and cls.__module__ != "memoryd.errors"
    )
    assert elsewhere == sorted(DEFINED_ELSEWHERE)


def test_old_homes_re_export_the_one_class() -> None:
    """The packages that exported an error before it moved hand out the same class."""
    from memoryd import kernel, llm
    from memoryd import memory as long_term

    assert kernel.StepLimitExceeded is StepLimitExceeded
    assert kernel.ToolArgumentError is ToolArgumentError
    assert kernel.UnknownRun is UnknownRun
    assert llm.LLMError is LLMError and llm.ScriptExhausted is ScriptExhausted
    assert long_term.DenseUnavailable is DenseUnavailable
    assert long_term.SchemaError is SchemaError
    assert long_term.ExtractionError is ExtractionError


def test_every_class_in_all_is_drawn_once() -> None:
    """Every class errors.__all__ names is drawn in the docstring's trees, exactly once,
    and the trees draw nothing else."""
    names = [name for name, _, _ in _drawn_trees()]
    assert sorted(names) == sorted(errors.__all__)


def test_the_drawn_tree_matches_the_classes() -> None:
    """Each drawn class subclasses its drawn parent and every base drawn in parentheses;
    the public tree is MemorydError's, the internal signals are no MemorydError but where
    a base says so."""
    for name, parent, bases in _drawn_trees():
        cls = getattr(errors, name)
        for base_name in (*bases, *([parent] if parent else [])):
            base = getattr(errors, base_name, None) or getattr(builtins, base_name)
            assert issubclass(cls, base), f"{name} is drawn under {base_name}"
        if parent is None and name != "MemorydError":
            assert issubclass(cls, MemorydError) == any(
                issubclass(getattr(errors, b, Exception), MemorydError) for b in bases
            ), f"{name} is drawn as an internal signal"


def test_public_errors_are_exported_from_memoryd() -> None:
    """Every exception in the MemorydError tree is importable from memoryd itself."""
    public = {name for name, parent, _ in _drawn_trees() if parent or name == "MemorydError"}
    assert public <= set(memoryd.__all__)
    for name in public:
        assert getattr(memoryd, name) is getattr(errors, name)


@pytest.mark.parametrize(
    "clone", [lambda e: pickle.loads(pickle.dumps(e)), copy.copy, copy.deepcopy]
)
def test_export_format_error_keeps_its_line(clone: object) -> None:
    """ExportFormatError names its line, keeps it as an attribute, and across pickle."""
    exc = ExportFormatError(7, "not valid JSON")
    assert str(exc) == "line 7: not valid JSON"
    again = clone(exc)  # type: ignore[operator]
    assert type(again) is ExportFormatError
    assert (again.line, again.problem, str(again)) == (7, "not valid JSON", str(exc))
