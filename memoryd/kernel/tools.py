"""Tools: plain Python functions the model can call, with a JSON schema from their hints.

```python
@memoryd.tool
def lookup(city: str, days: int = 1) -> str:
    '''Look up the weather.

    Args:
        city: The city name.
        days: How many days ahead.
    '''
    return f"sunny in {city}"
```

``lookup.schema`` is the OpenAI ``tools`` entry; ``lookup.invoke({"city": "Oslo"})``
validates the arguments against it (raising `ToolArgumentError` naming the problem)
before calling the function. Calling ``lookup("Oslo")`` still calls the plain function.
Schema derivation and argument checks are pure.
"""

from __future__ import annotations

import asyncio
import inspect
import re
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Literal, Union, get_args, get_origin, overload

from memoryd.errors import ToolArgumentError

__all__ = ["Tool", "tool", "tools_by_name"]

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_SCALARS: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}


def _schema_of(hint: Any, where: str) -> dict[str, Any]:
    """The JSON schema of one type hint, or TypeError naming the unsupported hint."""
    if hint in _SCALARS:
        return {"type": _SCALARS[hint]}
    if hint is type(None) or hint is None:
        return {"type": "null"}
    if hint is Any:
        return {}
    origin = get_origin(hint)
    args = get_args(hint)
    if origin is Literal:
        if not all(isinstance(a, str | int | float | bool) for a in args):
            raise TypeError(f"{where}: Literal values must be str, int, float or bool")
        return {"enum": list(args)}
    if origin in (Union, types.UnionType):
        options = [_schema_of(a, where) for a in args]
        return {"anyOf": options}
    if origin is list or hint is list:
        return {"type": "array", "items": _schema_of(args[0], where) if args else {}}
    if origin is dict or hint is dict:
        if args and args[0] is not str:
            raise TypeError(f"{where}: dict keys must be str (JSON objects), not {args[0]!r}")
        values = _schema_of(args[1], where) if len(args) == 2 else {}
        return {"type": "object", "additionalProperties": values}
    raise TypeError(
        f"{where} has the type hint {hint!r}, which has no JSON schema here; use str, int, "
        "float, bool, None, list[...], dict[str, ...], Literal[...] or a union of them"
    )


def _doc_parts(doc: str | None) -> tuple[str, dict[str, str]]:
    """The description (text before the sections) and the ``Args:`` entries of a docstring."""
    text = inspect.cleandoc(doc or "")
    description: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if re.fullmatch(r"[A-Z][A-Za-z ]*:", stripped) and not line.startswith(" "):
            section, current = stripped[:-1].lower(), None
            continue
        if section is None:
            description.append(line)
        elif section in ("args", "arguments", "parameters"):
            match = re.match(r"^\s{1,8}(\*{0,2}\w+)(?:\s*\([^)]*\))?:\s*(.*)$", line)
            if match and (current is None or len(line) - len(line.lstrip()) <= 8):
                current = match.group(1).lstrip("*")
                params[current] = match.group(2).strip()
            elif current is not None and stripped:
                params[current] = f"{params[current]} {stripped}".strip()
    return "\n".join(description).strip(), params


def _check(value: Any, schema: Mapping[str, Any], where: str) -> str | None:
    """The first problem of ``value`` against ``schema`` (the subset `_schema_of` makes)."""
    if "anyOf" in schema:
        problems = [_check(value, option, where) for option in schema["anyOf"]]
        if all(problems):
            return f"{where} is {value!r:.60}, which matches none of the allowed types"
        return None
    if "enum" in schema:
        allowed = schema["enum"]
        if not any(v == value and isinstance(v, bool) == isinstance(value, bool) for v in allowed):
            return f"{where} is {value!r:.60}; allowed values: {allowed}"
        return None
    kind = schema.get("type")
    checks: dict[str | None, Callable[[Any], bool]] = {
        None: lambda v: True,
        "string": lambda v: isinstance(v, str),
        "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
        "boolean": lambda v: isinstance(v, bool),
        "null": lambda v: v is None,
        "array": lambda v: isinstance(v, list),
        "object": lambda v: isinstance(v, dict),
    }
    ok = checks[kind](value)
    if not ok:
        return f"{where} must be of JSON type {kind}, got {type(value).__name__} {value!r:.60}"
    if kind == "array":
        for index, item in enumerate(value):
            problem = _check(item, schema.get("items", {}), f"{where}[{index}]")
            if problem:
                return problem
    if kind == "object" and "additionalProperties" in schema:
        for key, item in value.items():
            problem = _check(item, schema["additionalProperties"], f"{where}[{key!r}]")
            if problem:
                return problem
    return None


class Tool:
    """A function the model can call: name, description, JSON schema and the function.

    Build one with `tool`. Calling the `Tool` calls the function unchanged; `invoke`
    is what the kernel uses: it checks a dict of arguments against the schema first.

    Attributes:
        name: The name the model calls it by.
        description: What it does (the docstring's description).
        parameters: The JSON schema of its arguments (an ``object`` schema).
        function: The wrapped function.
    """

    def __init__(
        self,
        function: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
    ) -> None:
        if not callable(function):
            raise TypeError(f"a tool wraps a function, not {function!r:.80}")
        name = name if name is not None else getattr(function, "__name__", "")
        if not isinstance(name, str) or not _NAME.match(name):
            raise ValueError(
                f"tool name {name!r} must be 1-64 letters, digits, '_' or '-'; pass name="
            )
        if description is not None and not isinstance(description, str):
            raise TypeError(
                f"tool {name!r}: description must be a str (what the model reads), "
                f"not {type(description).__name__}"
            )
        doc_description, doc_params = _doc_parts(inspect.getdoc(function))
        try:
            hints = typing.get_type_hints(function)
        except Exception as exc:
            raise TypeError(f"tool {name!r}: its type hints do not resolve: {exc}") from None
        properties: dict[str, Any] = {}
        required: list[str] = []
        for param in inspect.signature(function).parameters.values():
            where = f"tool {name!r} parameter {param.name!r}"
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise TypeError(f"{where}: *args and **kwargs cannot be described to a model")
            if param.kind is param.POSITIONAL_ONLY:
                raise TypeError(f"{where}: positional-only parameters cannot be named by a model")
            if param.name not in hints:
                raise TypeError(f"{where} needs a type hint so its JSON schema can be derived")
            schema = _schema_of(hints[param.name], where)
            if param.name in doc_params:
                schema = {**schema, "description": doc_params[param.name]}
            properties[param.name] = schema
            if param.default is param.empty:
                required.append(param.name)
        self.name: str = name
        self.description: str = description if description is not None else doc_description
        self.parameters: dict[str, Any] = {
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": False,
        }
        self.function = function
        self.awaitable: bool = inspect.iscoroutinefunction(function)
        """True for an ``async def`` function: `Agent.arun` awaits it on its event loop;
        a thread's run (`invoke`) runs it to completion in an event loop of its own."""
        self.__doc__ = function.__doc__
        self.__wrapped__ = function

    @property
    def schema(self) -> dict[str, Any]:
        """The OpenAI ``tools`` entry: ``{"type": "function", "function": {...}}``."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }

    def validate(self, arguments: Any) -> dict[str, Any]:
        """Check arguments against the schema.

        Args:
            arguments: The decoded arguments the model sent.

        Returns:
            The arguments (a dict).

        Raises:
            ToolArgumentError: Not a dict, a required argument is missing, an unknown
                one is given, or a value has the wrong type.
        """
        if not isinstance(arguments, dict):
            raise ToolArgumentError(
                f"tool {self.name!r} takes a JSON object of arguments, got "
                f"{type(arguments).__name__}"
            )
        properties = self.parameters["properties"]
        unknown = sorted(set(arguments) - set(properties))
        if unknown:
            raise ToolArgumentError(
                f"tool {self.name!r} has no parameter {unknown[0]!r}; "
                f"its parameters are {sorted(properties)}"
            )
        missing = [p for p in self.parameters["required"] if p not in arguments]
        if missing:
            raise ToolArgumentError(
                f"tool {self.name!r} needs the argument {missing[0]!r}; "
                f"required: {self.parameters['required']}"
            )
        for key, value in arguments.items():
            problem = _check(value, properties[key], f"argument {key!r}")
            if problem:
                raise ToolArgumentError(f"tool {self.name!r}: {problem}")
        return arguments

    def begin(self, arguments: Any) -> Any:
        """Validate ``arguments``, then call the function with them as keywords, without
        awaiting anything: what it returned, a coroutine included (an ``async def``
        function's, or one a plain function returned), for the caller to await.

        Args:
            arguments: The decoded arguments.

        Returns:
            What the function returned.

        Raises:
            ToolArgumentError: The arguments do not match the schema (not called).
            Exception: Whatever the function raised.
        """
        return self.function(**self.validate(arguments))

    def invoke(self, arguments: Any) -> Any:
        """Validate ``arguments``, then call the function with them as keywords.

        An ``async def`` function is run to completion here, in an event loop of its
        own (`asyncio.run`); called from a thread that runs an event loop already, it is
        refused (`Agent.arun` awaits it instead). A plain function that returns a
        coroutine (a sync wrapper around an async client) is taken as an async one:
        its coroutine is run the same way, never left unawaited.

        Args:
            arguments: The decoded arguments.

        Returns:
            What the function returned (what its coroutine returned, for an async one).

        Raises:
            ToolArgumentError: The arguments do not match the schema (not called).
            RuntimeError: An ``async def`` tool called from a running event loop's thread
                (a plain function's coroutine is closed unrun then).
            Exception: Whatever the function raised.
        """
        arguments = self.validate(arguments)
        if self.awaitable:
            try:
                asyncio.get_running_loop()
            except RuntimeError:
                return asyncio.run(self.function(**arguments))
            raise self._on_loop()
        value = self.function(**arguments)
        if not inspect.iscoroutine(value):
            return value
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(value)
        value.close()  # never awaited, and no warning that it was not
        raise self._on_loop()

    def _on_loop(self) -> RuntimeError:
        return RuntimeError(
            f"tool {self.name!r} is async and this thread runs an event loop: "
            "await it (Agent.arun) instead of running it here"
        )

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the wrapped function unchanged."""
        return self.function(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<Tool {self.name!r}>"


@overload
def tool(function: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *, name: str | None = None, description: str | None = None
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    function: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Turn a function into a `Tool`: ``@tool`` or ``@tool(name=..., description=...)``.

    Args:
        function: The function (when used as ``@tool``).
        name: The tool name (default: the function's name).
        description: The description (default: the docstring's text before its sections).

    Returns:
        The `Tool`, or a decorator making one.

    Raises:
        TypeError: A parameter has no type hint or one with no JSON schema, or is
            ``*args``/``**kwargs``/positional-only.
        ValueError: The name is not 1-64 letters, digits, ``_`` or ``-``.
    """
    if function is not None:
        return Tool(function, name=name, description=description)

    def decorate(fn: Callable[..., Any]) -> Tool:
        return Tool(fn, name=name, description=description)

    return decorate


def tools_by_name(tools: Any) -> dict[str, Tool]:
    """Index a sequence of tools (or plain functions, wrapped with `tool`) by name.

    Args:
        tools: A list or tuple of `Tool` objects or functions.

    Returns:
        ``{name: Tool}`` in the given order.

    Raises:
        TypeError: ``tools`` is not a list or tuple, or holds something not callable.
        ValueError: Two tools share a name.
    """
    if isinstance(tools, str | bytes) or not isinstance(tools, list | tuple):
        raise TypeError(f"tools must be a list of tools or functions, not {tools!r:.80}")
    out: dict[str, Tool] = {}
    for index, item in enumerate(tools):
        if not isinstance(item, Tool) and not callable(item):
            raise TypeError(f"tools[{index}] is {item!r:.60}; give a @tool or a function")
        wrapped = item if isinstance(item, Tool) else Tool(item)
        if wrapped.name in out:
            raise ValueError(f"two tools are named {wrapped.name!r}; tool names must be unique")
        out[wrapped.name] = wrapped
    return out
