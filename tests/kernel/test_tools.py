"""@memoryd.tool: schemas from type hints and docstrings, arguments checked before the call."""

from __future__ import annotations

from typing import Literal

import pytest

import memoryd


@memoryd.tool
def forecast(
    city: str, days: int = 1, unit: Literal["C", "F"] = "C", tags: list[str] | None = None
) -> str:
    """Look up the weather.

    Args:
        city: The city name.
        days: How many days
            ahead (wrapped line).
        unit: The unit.
        tags: Labels.

    Returns:
        The forecast.
    """
    return f"{city}:{days}{unit}:{tags}"


def test_schema_comes_from_hints_and_docstring() -> None:
    """Types, required parameters and descriptions come from the function."""
    spec = forecast.schema
    assert spec["type"] == "function"
    function = spec["function"]
    assert function["name"] == "forecast"
    assert function["description"] == "Look up the weather."
    params = function["parameters"]
    assert params["required"] == ["city"]
    assert params["additionalProperties"] is False
    assert params["properties"]["city"] == {"type": "string", "description": "The city name."}
    assert params["properties"]["days"]["description"] == "How many days ahead (wrapped line)."
    assert params["properties"]["unit"]["enum"] == ["C", "F"]
    assert params["properties"]["tags"]["anyOf"] == [
        {"type": "array", "items": {"type": "string"}},
        {"type": "null"},
    ]


def test_arguments_are_validated_before_the_call() -> None:
    """Missing, unknown and mistyped arguments raise ToolArgumentError; the function never runs."""
    calls: list[int] = []

    @memoryd.tool
    def count(n: int) -> int:
        """Count."""
        calls.append(n)
        return n

    with pytest.raises(memoryd.ToolArgumentError, match="needs the argument 'n'"):
        count.invoke({})
    with pytest.raises(memoryd.ToolArgumentError, match="no parameter 'm'"):
        count.invoke({"n": 1, "m": 2})
    with pytest.raises(memoryd.ToolArgumentError, match="JSON type integer"):
        count.invoke({"n": True})
    with pytest.raises(memoryd.ToolArgumentError, match="JSON object"):
        count.invoke([1])
    with pytest.raises(memoryd.ToolArgumentError, match="allowed values"):
        forecast.invoke({"city": "Oslo", "unit": "K"})
    with pytest.raises(memoryd.ToolArgumentError, match=r"argument 'tags'"):
        forecast.invoke({"city": "Oslo", "tags": [1]})
    assert calls == []
    assert count.invoke({"n": 4}) == 4
    assert forecast.invoke({"city": "Oslo", "days": 2, "tags": ["x"]}) == "Oslo:2C:['x']"


def test_a_tool_is_still_the_plain_function() -> None:
    """Calling the Tool calls the function with ordinary arguments."""
    assert forecast("Rome", 3) == "Rome:3C:None"


def test_decorator_with_name_and_description() -> None:
    """@tool(name=..., description=...) overrides the defaults."""

    @memoryd.tool(name="sum-it", description="Sums.")
    def total(values: list[float], weights: dict[str, float] | None = None) -> float:
        return sum(values)

    assert total.name == "sum-it"
    assert total.description == "Sums."
    assert total.invoke({"values": [1, 2.5]}) == 3.5


def test_functions_without_a_schema_are_refused() -> None:
    """Missing hints, unsupported hints, *args and bad names are named at decoration time."""
    with pytest.raises(TypeError, match="needs a type hint"):
        memoryd.tool(name="anon")(lambda x: x)
    with pytest.raises(ValueError, match="tool name"):
        memoryd.tool(name="has space")(forecast.function)

    def takes_set(items: set[str]) -> None: ...

    def takes_args(*items: str) -> None: ...

    def int_keys(table: dict[int, str]) -> None: ...

    with pytest.raises(TypeError, match=r"parameter 'items'.*no JSON schema"):
        memoryd.tool(takes_set)
    with pytest.raises(TypeError, match=r"\*args"):
        memoryd.tool(takes_args)
    with pytest.raises(TypeError, match="dict keys must be str"):
        memoryd.tool(int_keys)
    with pytest.raises(TypeError, match=r"tool 'forecast': description must be a str.*not int"):
        memoryd.tool(name="forecast", description=5)(forecast.function)  # type: ignore[arg-type]
