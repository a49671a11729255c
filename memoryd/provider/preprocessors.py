"""Preprocessors: callables ``list -> list`` that shape what an LLM call sees (Koog).

They run in order, each on the output of the one before, so order matters::

    DefaultProvider(store, preprocessors=[
        preprocessors.drop_system(),
        preprocessors.filter_messages(lambda m: m["role"] != "tool" or len(m["content"]) < 2000),
        preprocessors.char_budget(12_000),
    ])

Any callable taking a list of messages and returning a list of messages is a
preprocessor. The ones here are pure (they never mutate their input; changed messages
are new dicts) and never leave a tool result without its call or a call without all its
results. Each has a ``describe()`` that `memoryd.explain` shows.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from memoryd._json_values import loads
from memoryd.messages import is_system
from memoryd.provider.budget import Counter, char_length, default_counter, fit
from memoryd.provider.safe_window import check_messages, check_window, repair, safe_window

__all__ = [
    "Preprocessor",
    "char_budget",
    "check_steps",
    "drop_system",
    "filter_messages",
    "name_of",
    "redact",
    "run",
    "run_keeping_shape",
    "token_budget",
    "window_size",
]

Message: TypeAlias = dict[str, Any]
Preprocessor: TypeAlias = Callable[[list[Message]], list[Message]]
"""A step of the pipeline: messages in, messages out."""


def _check_limit(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an int >= 1, not {value!r}")
    return int(value)


def name_of(step: Any) -> str:
    """How a preprocessor is named in errors and explanations.

    Args:
        step: A preprocessor.

    Returns:
        Its ``describe()`` if it has one, else its function name or repr.
    """
    describe = getattr(step, "describe", None)
    if callable(describe):
        return str(describe())
    return str(getattr(step, "__qualname__", None) or repr(step))


def check_steps(steps: Any, name: str) -> tuple[Preprocessor, ...]:
    """Check a sequence of preprocessors.

    Args:
        steps: The candidates.
        name: The argument's name, for the error.

    Returns:
        The steps as a tuple.

    Raises:
        TypeError: ``steps`` is not a list or tuple of callables.
    """
    if not isinstance(steps, list | tuple):
        raise TypeError(f"{name} must be a list or tuple of callables, not {type(steps).__name__}")
    for index, step in enumerate(steps):
        if not callable(step):
            raise TypeError(f"{name}[{index}] is not callable: {step!r:.80}")
    return tuple(steps)


def run(steps: Sequence[Preprocessor], messages: list[Message]) -> list[Message]:
    """Run ``steps`` in order on ``messages``.

    Args:
        steps: The preprocessors.
        messages: The input list (passed to the first step).

    Returns:
        The last step's output.

    Raises:
        TypeError: A step returned something other than a list of message dicts.
    """
    for step in steps:
        result = step(messages)
        if not isinstance(result, list) or not all(isinstance(m, dict) for m in result):
            raise TypeError(
                f"preprocessor {name_of(step)} must return a list of message dicts, "
                f"returned {type(result).__name__}"
            )
        messages = result
    return messages


LEFT_OUT = "[left out by a store preprocessor]"
"""The content `run_keeping_shape` records for a message the preprocessors reshaped."""


def run_keeping_shape(steps: Sequence[Preprocessor], messages: list[Message]) -> list[Message]:
    """What ``steps`` let be stored of ``messages``, one message for each, in the same shape.

    A record that must keep every message of a run (the run journal: a resumed run
    needs each step's call and results) is still bound by what the store preprocessors
    allow to be stored (``redact``: secrets never stored). When ``steps`` return as many
    messages, each with the same role, tool-call ids and ``tool_call_id`` (``redact``, a
    content rewrite), their messages are the answer. Otherwise (a step dropped, merged
    or reordered messages) nothing of theirs is used: each message keeps its role and
    tool-call ids, its content becomes `LEFT_OUT` and its calls' arguments ``"{}"``, so
    nothing a step might have removed is stored.

    Args:
        steps: The store preprocessors.
        messages: The messages (not mutated: the steps get copies they may change).

    Returns:
        New messages, as many as ``messages``.

    Raises:
        TypeError: A step returned something other than a list of message dicts.
    """
    if not steps:
        return list(messages)
    out = run(steps, copy.deepcopy(list(messages)))
    if len(out) == len(messages) and all(
        _shape(new) == _shape(old) for new, old in zip(out, messages, strict=True)
    ):
        return out
    return [_left_out(message) for message in messages]


def _shape(message: Mapping[str, Any]) -> tuple[Any, ...]:
    calls = message.get("tool_calls")
    ids = (
        tuple(call.get("id") if isinstance(call, Mapping) else None for call in calls)
        if isinstance(calls, list)
        else None
    )
    return message.get("role"), message.get("tool_call_id"), ids


def _left_out(message: Mapping[str, Any]) -> Message:
    kept: Message = {"role": message["role"], "content": LEFT_OUT}
    if "tool_call_id" in message:
        kept["tool_call_id"] = message["tool_call_id"]
    if "name" in message:
        kept["name"] = message["name"]
    calls = message.get("tool_calls")
    if isinstance(calls, list):
        kept["tool_calls"] = [
            {**call, "function": {**call["function"], "arguments": "{}"}}
            if isinstance(call, Mapping) and isinstance(call.get("function"), Mapping)
            else call
            for call in calls
        ]
    return kept


@dataclass(frozen=True, slots=True)
class _WindowSize:
    n: int

    def __call__(self, messages: list[Message]) -> list[Message]:
        return safe_window(messages, self.n)

    def describe(self) -> str:
        return f"window_size({self.n}): the last {self.n} non-system messages, whole tool calls"


def window_size(n: int) -> Preprocessor:
    """Keep the last ``n`` non-system messages, safely (see `safe_window`).

    Args:
        n: How many non-system messages to keep at most.

    Returns:
        The preprocessor.

    Raises:
        ValueError: ``n`` is not an int >= 0.
    """
    return _WindowSize(check_window(n))


@dataclass(frozen=True, slots=True)
class _Filter:
    predicate: Callable[[Message], Any]

    def __call__(self, messages: list[Message]) -> list[Message]:
        return repair([m for m in check_messages(messages) if self.predicate(m)])

    def describe(self) -> str:
        name = getattr(self.predicate, "__qualname__", repr(self.predicate))
        return f"filter_messages({name}): messages the predicate keeps"


def filter_messages(predicate: Callable[[Message], Any]) -> Preprocessor:
    """Keep the messages for which ``predicate(message)`` is true.

    A tool exchange the filter broke (a call without all its results, a result without
    its call) is dropped whole.

    Args:
        predicate: Called with each message.

    Returns:
        The preprocessor.

    Raises:
        TypeError: ``predicate`` is not callable.
    """
    if not callable(predicate):
        raise TypeError(f"filter_messages needs a callable predicate, not {predicate!r:.80}")
    return _Filter(predicate)


@dataclass(frozen=True, slots=True)
class _DropSystem:
    def __call__(self, messages: list[Message]) -> list[Message]:
        return [m for m in check_messages(messages) if not is_system(m)]

    def describe(self) -> str:
        return "drop_system(): no system or developer messages"


def drop_system() -> Preprocessor:
    """Drop system and developer messages.

    Returns:
        The preprocessor.
    """
    return _DropSystem()


@dataclass(frozen=True, slots=True)
class _Redact:
    pattern: re.Pattern[str]
    replacement: str

    def _text(self, text: str) -> str:
        return self.pattern.sub(self.replacement, text)

    def _value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self._text(value)
        if isinstance(value, Mapping):
            return {key: self._value(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [self._value(item) for item in value]
        return value

    def _arguments(self, arguments: Any) -> Any:
        if not isinstance(arguments, str):
            return self._value(arguments)
        try:
            decoded = loads(arguments)
        except ValueError:
            return self._text(arguments)
        return json.dumps(self._value(decoded), separators=(",", ":"), ensure_ascii=False)

    def _message(self, message: Message) -> Message:
        out = dict(message)
        content = out.get("content")
        if isinstance(content, str):
            out["content"] = self._text(content)
        elif isinstance(content, list):
            out["content"] = [
                {**part, "text": self._text(part["text"])}
                if isinstance(part, Mapping) and isinstance(part.get("text"), str)
                else part
                for part in content
            ]
        calls = out.get("tool_calls")
        if isinstance(calls, list):
            new_calls = []
            for call in calls:
                function = call.get("function") if isinstance(call, Mapping) else None
                if isinstance(function, Mapping) and "arguments" in function:
                    arguments = self._arguments(function["arguments"])
                    new_calls.append({**call, "function": {**function, "arguments": arguments}})
                else:
                    new_calls.append(call)
            out["tool_calls"] = new_calls
        return out

    def __call__(self, messages: list[Message]) -> list[Message]:
        return [self._message(m) for m in check_messages(messages)]

    def describe(self) -> str:
        return f"redact({self.pattern.pattern!r}, {self.replacement!r})"


def redact(pattern: str | re.Pattern[str], replacement: str = "[REDACTED]") -> Preprocessor:
    """Replace every match of ``pattern`` in message text and tool-call arguments.

    Text content, text content parts, and the string values inside JSON tool-call
    arguments are rewritten (the arguments stay valid JSON); other fields are kept.

    Args:
        pattern: A regular expression (str or compiled).
        replacement: What each match becomes (``re.sub`` syntax, so ``\\1`` works).

    Returns:
        The preprocessor.

    Raises:
        TypeError: ``pattern`` or ``replacement`` has the wrong type.
        ValueError: ``pattern`` is not a valid regular expression, or matches the
            empty string (it would insert ``replacement`` everywhere).
    """
    if not isinstance(replacement, str):
        raise TypeError(f"replacement must be a str, not {type(replacement).__name__}")
    if isinstance(pattern, str):
        try:
            compiled = re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"redact pattern {pattern!r} is not a valid regex: {exc}") from None
    elif isinstance(pattern, re.Pattern) and isinstance(pattern.pattern, str):
        compiled = pattern
    else:
        raise TypeError(f"pattern must be a str or a compiled str regex, not {pattern!r:.80}")
    if compiled.search("") is not None:
        raise ValueError(
            f"redact pattern {compiled.pattern!r} matches the empty string; "
            "it would insert the replacement everywhere"
        )
    return _Redact(compiled, replacement)


@dataclass(frozen=True, slots=True)
class _Budget:
    limit: int
    counter: Counter
    label: str

    def __call__(self, messages: list[Message]) -> list[Message]:
        return fit(messages, self.limit, self.counter)

    def describe(self) -> str:
        return f"{self.label}: the newest whole messages that fit, system messages kept"


def char_budget(max_length: int) -> Preprocessor:
    """Agently's ``max_length`` with ``simple_cut``, measured on compact JSON characters.

    System messages are kept and counted; then the newest messages that fit, never
    splitting a tool call from its results. If even the newest does not fit, the tail of
    its text is kept.

    Args:
        max_length: The budget in characters (sum over the messages' compact JSON).

    Returns:
        The preprocessor.

    Raises:
        ValueError: ``max_length`` is not an int >= 1.
    """
    limit = _check_limit(max_length, "max_length")
    return _Budget(limit, char_length, f"char_budget({limit})")


def token_budget(max_tokens: int, counter: Counter | None = None) -> Preprocessor:
    """Like `char_budget`, measured in tokens.

    Args:
        max_tokens: The budget in tokens.
        counter: Counts one message's tokens; default `budget.default_counter()`
            (tiktoken when installed with its files cached, else an offline estimate).

    Returns:
        The preprocessor.

    Raises:
        ValueError: ``max_tokens`` is not an int >= 1.
        TypeError: ``counter`` is not callable.
    """
    limit = _check_limit(max_tokens, "max_tokens")
    if counter is None:
        counter = default_counter()
    elif not callable(counter):
        raise TypeError(f"counter must be a callable message -> int, not {counter!r:.80}")
    name = getattr(counter, "__name__", type(counter).__name__)
    return _Budget(limit, counter, f"token_budget({limit}, counter={name})")
