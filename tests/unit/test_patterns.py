"""``Pattern``: string patterns checked with Python's re, as pydantic's ``pattern=`` checks them,
and no model of agentloop left on pydantic's own (Rust) regex engine."""

from __future__ import annotations

import importlib
import pkgutil
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, ValidationError

import agentloop
from agentloop.patterns import Pattern


class _Named(BaseModel):
    name: Annotated[str, Pattern(r"^[a-z]{1,3}$")]
    price: Annotated[str, Pattern(r"^[0-9]+\$")] | None = None
    tagged: Annotated[str, Pattern(r"^data-.")] | None = None


@pytest.mark.parametrize("name", ["a", "abc"])
def test_a_matching_string_is_kept(name: str) -> None:
    assert _Named(name=name).name == name


@pytest.mark.parametrize("name", ["", "abcd", "ABC", "ab\n", "a\nb", " ab"])
def test_what_the_pattern_refuses_is_refused_with_pydantics_own_error(name: str) -> None:
    with pytest.raises(ValidationError) as caught:
        _Named(name=name)
    (error,) = caught.value.errors()
    assert error["type"] == "string_pattern_mismatch"
    assert error["msg"] == "String should match pattern '^[a-z]{1,3}$'"


def test_an_escaped_final_dollar_is_a_dollar_sign() -> None:
    assert _Named(name="a", price="12$").price == "12$"
    with pytest.raises(ValidationError):
        _Named(name="a", price="12")


def test_a_pattern_anchored_at_the_start_only_matches_a_prefix() -> None:
    assert _Named(name="a", tagged="data-x and more").tagged == "data-x and more"
    for refused in ("data-", "data-\nx", "xdata-x"):
        with pytest.raises(ValidationError):
            _Named(name="a", tagged=refused)


def test_the_json_schema_states_the_pattern() -> None:
    properties = _Named.model_json_schema()["properties"]
    assert properties["name"] == {"pattern": "^[a-z]{1,3}$", "title": "Name", "type": "string"}
    assert {"pattern": "^data-.", "type": "string"} in properties["tagged"]["anyOf"]


def _str_patterns(schema: Any) -> list[str]:
    """Every ``pattern`` a core schema gives pydantic-core's own regex engine."""
    if isinstance(schema, dict):
        found = [schema["pattern"]] if schema.get("type") == "str" and "pattern" in schema else []
        return found + [p for value in schema.values() for p in _str_patterns(value)]
    if isinstance(schema, list | tuple):
        return [p for value in schema for p in _str_patterns(value)]
    return []


def _models() -> list[type[BaseModel]]:
    for module in pkgutil.walk_packages(agentloop.__path__, "agentloop."):
        if not module.name.endswith("__main__"):
            importlib.import_module(module.name)
    found, todo = [], list(BaseModel.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        generic = cls.__pydantic_generic_metadata__["origin"] is not None
        if cls.__module__.startswith("agentloop.") and not generic:
            found.append(cls)
    return found


def test_no_model_of_agentloop_compiles_a_pattern_with_pydantics_regex_engine() -> None:
    models = _models()
    assert len(models) > 50, "the walk found agentloop's models"
    patterned = {
        f"{cls.__module__}.{cls.__qualname__}": patterns
        for cls in models
        if (patterns := _str_patterns(cls.__pydantic_core_schema__))
    }
    assert patterned == {}, "use agentloop.patterns.Pattern instead of Field(pattern=...)"
