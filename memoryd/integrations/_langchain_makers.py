"""Plain LangChain messages built as their constructors leave them, without validating.

`memoryd.integrations.langchain` reads a history into LangChain message objects, and
pydantic's validation is most of that cost. For the plain shapes (str content, a str or
no name, no tool calls) the makers here set the state a constructor leaves: the same
fields in the same order, the same set fields, fresh copies of every mutable default.
Imported only by `memoryd.integrations.langchain`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any, cast

__all__ = [
    "AI",
    "DEVELOPER",
    "DEVELOPER_SYSTEM",
    "HUMAN",
    "PLAIN_MAKERS",
    "SYSTEM",
    "TOOL",
    "Maker",
    "build_history",
]

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

DEVELOPER = "__openai_role__"
"""The ``additional_kwargs`` key marking a system message that was a developer message."""

_SCALARS = (str, int, float, bool, type(None))
_FLAT = (dict, list)

Maker = Callable[[Any, Any], BaseMessage]
"""Builds one message from its two given fields (see `_maker`)."""


def _slot_setter(cls: type, name: str) -> Callable[[Any, Any], None]:
    """The setter of the model slot ``name`` (pydantic keeps its state in four slots)."""
    for klass in cls.__mro__:
        descriptor = vars(klass).get(name)
        if descriptor is not None and hasattr(descriptor, "__set__"):
            return cast(Callable[[Any, Any], None], descriptor.__set__)
    return lambda message, value: object.__setattr__(message, name, value)  # pragma: no cover


def _is_flat(value: Any) -> bool:
    """A dict or list of scalars: its ``copy()`` shares nothing mutable."""
    items = value.values() if type(value) is dict else value
    return type(value) in _FLAT and all(type(item) in _SCALARS for item in items)


_new = object.__new__
_set_dict = _slot_setter(BaseMessage, "__dict__")
_set_fields_set = _slot_setter(BaseMessage, "__pydantic_fields_set__")
_set_extra = _slot_setter(BaseMessage, "__pydantic_extra__")
_set_private = _slot_setter(BaseMessage, "__pydantic_private__")


def _maker(cls: type[BaseMessage], first: str, second: str, **example: Any) -> Maker:
    """A function building messages of ``cls`` the way its constructor would, unvalidated.

    Reading a history builds a LangChain message per stored message, and pydantic's
    validation is most of that cost (pydantic's ``model_construct`` is slower still:
    a Python loop over every field). For the plain shapes only (str
    content, a str or no name, no tool calls) a maker sets the state the constructor
    leaves: the fields of an instance the constructor built here from ``example``
    (so the defaults and the set fields are LangChain's own), with a fresh copy of
    every mutable default, and the two given fields. The result compares equal to
    the constructor's, field for field. Every other shape takes the constructor.

    Args:
        cls: the message class.
        first: the field a call's first argument sets (``content``).
        second: the field its second argument sets (``name`` or ``tool_call_id``).
        example: constructor arguments naming ``first`` and ``second`` (and any
            fixed field, such as the developer marker in ``additional_kwargs``).
    """
    made = cls(**example)
    fields = dict(made.__dict__)  # in the constructor's order; mutable ones replaced per call
    copied = tuple(
        (k, v, type(v).copy if _is_flat(v) else copy.deepcopy)
        for k, v in made.__dict__.items()
        if type(v) not in _SCALARS
    )
    fields_set = set(made.__pydantic_fields_set__)
    extra = made.__pydantic_extra__
    private = made.__pydantic_private__
    if (extra is not None and extra) or private is not None:  # pragma: no cover
        return lambda first_value, second_value: cls(
            **{**example, first: first_value, second: second_value}
        )  # state of its own beyond the fields: built validated
    new = _new
    set_dict = _slot_setter(cls, "__dict__")
    set_fields_set = _slot_setter(cls, "__pydantic_fields_set__")
    set_extra = _slot_setter(cls, "__pydantic_extra__")
    set_private = _slot_setter(cls, "__pydantic_private__")
    no_extra = extra is None

    def make(first_value: Any, second_value: Any) -> BaseMessage:
        state = fields.copy()
        state[first] = first_value
        state[second] = second_value
        for key, value, copy_value in copied:
            state[key] = copy_value(value)
        message = new(cls)
        set_dict(message, state)
        set_fields_set(message, fields_set.copy())
        set_extra(message, None if no_extra else {})
        set_private(message, None)
        return message

    return make


def _human(content: Any, name: Any) -> BaseMessage:
    """`_maker`'s human message, spelled out: a user turn is half of most histories."""
    message = _new(HumanMessage)
    _set_dict(
        message,
        {
            "content": content,
            "additional_kwargs": {},
            "response_metadata": {},
            "type": "human",
            "name": name,
            "id": None,
        },
    )
    _set_fields_set(message, {"content", "name"})
    _set_extra(message, {})
    _set_private(message, None)
    return message


def _ai(content: Any, name: Any) -> BaseMessage:
    """`_maker`'s AI message without tool calls, spelled out: the other half."""
    message = _new(AIMessage)
    _set_dict(
        message,
        {
            "content": content,
            "additional_kwargs": {},
            "response_metadata": {},
            "type": "ai",
            "name": name,
            "id": None,
            "tool_calls": [],
            "invalid_tool_calls": [],
            "usage_metadata": None,
        },
    )
    _set_fields_set(message, {"content", "name", "tool_calls", "invalid_tool_calls"})
    _set_extra(message, {})
    _set_private(message, None)
    return message


def _state(message: BaseMessage) -> tuple[Any, ...]:
    """Everything a message holds, fields in order: what two equal builds share."""
    return (
        type(message),
        list(message.__dict__.items()),
        message.__pydantic_fields_set__,
        message.__pydantic_extra__,
        message.__pydantic_private__,
    )


def _checked(spelled: Maker, generic: Maker, construct: Maker) -> Maker:
    """``spelled`` if it builds what the constructor (``construct``) builds, else
    ``generic``: a LangChain release with other fields falls back, never builds wrong."""
    for first, second in (("text", None), ("", "who")):
        if _state(spelled(first, second)) != _state(construct(first, second)):
            return generic  # pragma: no cover (another LangChain release)
    return spelled


HUMAN = _checked(
    _human,
    _maker(HumanMessage, "content", "name", content="", name=None),
    lambda content, name: HumanMessage(content=content, name=name),
)
"""Builds a ``HumanMessage(content=..., name=...)``."""
SYSTEM = _maker(SystemMessage, "content", "name", content="", name=None)
"""Builds a ``SystemMessage(content=..., name=...)``."""
DEVELOPER_SYSTEM = _maker(
    SystemMessage,
    "content",
    "name",
    content="",
    name=None,
    additional_kwargs={DEVELOPER: "developer"},
)
"""Builds the ``SystemMessage`` a developer message reads as (marked in ``additional_kwargs``)."""
TOOL = _maker(ToolMessage, "content", "tool_call_id", content="", tool_call_id="")
"""Builds a ``ToolMessage(content=..., tool_call_id=...)``."""
AI = _checked(
    _ai,
    _maker(
        AIMessage, "content", "name", content="", name=None, tool_calls=[], invalid_tool_calls=[]
    ),
    lambda content, name: AIMessage(
        content=content, name=name, tool_calls=[], invalid_tool_calls=[]
    ),
)
"""Builds an ``AIMessage(content=..., name=...)`` without tool calls."""

PLAIN_MAKERS = {
    "user": HUMAN,
    "system": SYSTEM,
    "developer": DEVELOPER_SYSTEM,
    "assistant": AI,
}
"""The maker of a message that holds only a role and a str content, by role."""


def _history_inline(
    stored: list[dict[str, Any]], other: Callable[[Mapping[str, Any]], BaseMessage]
) -> list[BaseMessage]:
    """`build_history` with the user and assistant turns built in the loop itself.

    A history is mostly user and assistant turns of a role and a str content: they are
    built here, with no call per message and every name a local. They hold exactly what
    `HUMAN` and `AI` build (checked on import, see `build_history`). Each stored message
    is replaced by its message as the loop goes: no second list, and the store's dict is
    freed for the next message's dicts to reuse.
    """
    out: list[Any] = stored  # each message replaces its stored dict
    new = _new
    set_dict, set_fields_set, set_extra, set_private = (
        _set_dict,
        _set_fields_set,
        _set_extra,
        _set_private,
    )
    human, ai = HumanMessage, AIMessage
    makers = PLAIN_MAKERS
    message: Any
    for index, stored_message in enumerate(out):
        try:  # a stored message has a role; most hold a content and nothing else
            role = stored_message["role"]
            text = stored_message["content"]
        except KeyError:
            out[index] = other(stored_message)
            continue
        if type(text) is str and len(stored_message) == 2:
            if role == "user":
                message = new(human)
                set_dict(
                    message,
                    {
                        "content": text,
                        "additional_kwargs": {},
                        "response_metadata": {},
                        "type": "human",
                        "name": None,
                        "id": None,
                    },
                )
                set_fields_set(message, {"content", "name"})
            elif role == "assistant":
                message = new(ai)
                set_dict(
                    message,
                    {
                        "content": text,
                        "additional_kwargs": {},
                        "response_metadata": {},
                        "type": "ai",
                        "name": None,
                        "id": None,
                        "tool_calls": [],
                        "invalid_tool_calls": [],
                        "usage_metadata": None,
                    },
                )
                set_fields_set(message, {"content", "name", "tool_calls", "invalid_tool_calls"})
            else:
                maker = makers.get(role)
                out[index] = other(stored_message) if maker is None else maker(text, None)
                continue
            set_extra(message, {})
            set_private(message, None)
            out[index] = message
            continue
        out[index] = other(stored_message)
    return out


def _history_by_maker(
    stored: list[dict[str, Any]], other: Callable[[Mapping[str, Any]], BaseMessage]
) -> list[BaseMessage]:
    """`build_history` through the makers, one call per message."""
    out: list[Any] = stored  # each message replaces its stored dict
    makers = PLAIN_MAKERS
    for index, stored_message in enumerate(out):
        if len(stored_message) == 2:
            text = stored_message.get("content")
            maker = makers.get(stored_message.get("role"))
            if maker is not None and type(text) is str:
                out[index] = maker(text, None)
                continue
        out[index] = other(stored_message)
    return out


def _refuse(message: Mapping[str, Any]) -> BaseMessage:  # pragma: no cover (a wrong check)
    raise AssertionError(f"not a plain message: {message!r}")


def _inline_builds_what_the_makers_build() -> bool:
    """Whether `_history_inline` builds what `HUMAN` and `AI` build (so the constructors)."""
    if HUMAN is not _human or AI is not _ai:
        return False  # pragma: no cover (another LangChain release)
    sample = [{"role": "user", "content": "text"}, {"role": "assistant", "content": ""}]
    inline = _history_inline([dict(m) for m in sample], _refuse)
    made = _history_by_maker([dict(m) for m in sample], _refuse)
    return [_state(m) for m in inline] == [_state(m) for m in made]


build_history: Callable[
    [list[dict[str, Any]], Callable[[Mapping[str, Any]], BaseMessage]], list[BaseMessage]
] = _history_inline if _inline_builds_what_the_makers_build() else _history_by_maker
"""The LangChain messages of messages a store returned, in order, in the same list.

The list is the caller's to give away: each stored message (a dict, only read) is
replaced by its LangChain message, and the list is returned. A message holding only a
role and a str content, most of any history, is built as its plain maker
(`PLAIN_MAKERS`) builds it; every other goes through the second argument, which builds
one message of any shape.
"""
