"""The ``tool`` decorator, Tool.definition and ToolRegistry."""

from __future__ import annotations

import dataclasses
import json

import pytest
from pydantic import BaseModel, Field

from agentloop.tools.base import Tool, ToolContext, tool
from agentloop.tools.registry import ToolRegistry, UnknownToolError


class SearchArgs(BaseModel):
    query: str = Field(description="What to look for.")
    limit: int = Field(default=5, ge=1, le=20)


class EmptyArgs(BaseModel):
    pass


@tool()
async def search(args: SearchArgs, ctx: ToolContext) -> list[str]:
    """Search the documentation.

    Returns matching titles.
    """
    return [args.query] * args.limit


@tool("get_time", description="The current time.", timeout_s=2.5, opt_in=True)
async def current_time(args: EmptyArgs, ctx: ToolContext) -> str:
    return "noon"


@tool()
async def echo(args: EmptyArgs, ctx: ToolContext) -> str:
    """Echo nothing."""
    return ""


@tool(opt_in=True)
async def run_code(args: EmptyArgs, ctx: ToolContext) -> str:
    """Run code (dangerous, so opt-in)."""
    return ""


def registry() -> ToolRegistry:
    return ToolRegistry([search, current_time, echo, run_code])


# --- the decorator -----------------------------------------------------------------------------


def test_tool_infers_name_args_model_and_docstring_description() -> None:
    assert isinstance(search, Tool)
    assert search.name == "search"
    assert search.args_model is SearchArgs
    assert search.description == "Search the documentation.\n\nReturns matching titles."
    assert search.timeout_s is None
    assert search.opt_in is False


def test_tool_arguments_override_the_inferred_ones() -> None:
    assert current_time.name == "get_time"
    assert current_time.description == "The current time."
    assert current_time.args_model is EmptyArgs
    assert current_time.timeout_s == 2.5
    assert current_time.opt_in is True


def test_explicit_description_wins_over_the_docstring() -> None:
    async def fn(args: EmptyArgs, ctx: ToolContext) -> None:
        """The docstring."""

    assert tool(description="Given.")(fn).description == "Given."


def test_tool_function_is_kept_and_callable() -> None:
    assert search.fn.__name__ == "search"


def test_first_parameter_without_annotation_is_rejected() -> None:
    async def untyped(args, ctx: ToolContext) -> None:  # type: ignore[no-untyped-def]
        """Has a docstring."""

    with pytest.raises(TypeError, match="untyped: first parameter must be annotated"):
        tool()(untyped)


def test_first_parameter_that_is_not_a_model_is_rejected() -> None:
    async def plain(args: dict, ctx: ToolContext) -> None:  # type: ignore[type-arg]
        """Has a docstring."""

    with pytest.raises(TypeError, match="plain: first parameter must be annotated"):
        tool()(plain)  # type: ignore[arg-type]


def test_function_without_parameters_is_rejected() -> None:
    async def nothing() -> None:
        """Has a docstring."""

    with pytest.raises(TypeError, match="first parameter must be annotated"):
        tool()(nothing)  # type: ignore[arg-type]


def test_function_without_description_is_rejected() -> None:
    async def undocumented(args: EmptyArgs, ctx: ToolContext) -> None:
        pass

    with pytest.raises(TypeError, match="undocumented: a tool needs a description or a docstring"):
        tool()(undocumented)


# --- definition --------------------------------------------------------------------------------


def test_definition_is_the_chat_completions_function_shape() -> None:
    definition = search.definition

    assert definition == {
        "type": "function",
        "function": {
            "name": "search",
            "description": "Search the documentation.\n\nReturns matching titles.",
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {
                        "type": "string",
                        "description": "What to look for.",
                    },
                    "limit": {
                        "type": "integer",
                        "default": 5,
                        "minimum": 1,
                        "maximum": 20,
                    },
                },
                "required": ["query"],
            },
        },
    }


class Note(BaseModel):
    title: str = Field(description="The note's heading.")
    body: str


@tool(description="Keep a note.")
async def keep(args: Note, ctx: ToolContext) -> str:
    return args.title


def test_definition_has_no_titles_but_keeps_a_field_named_title() -> None:
    """pydantic titles the model and each field; the model is sent none of them (they only
    repeat names, on every call), while a property that is *called* title stays."""
    assert "title" in SearchArgs.model_json_schema()
    assert "title" not in search.definition["function"]["parameters"]
    parameters = keep.definition["function"]["parameters"]
    assert parameters["properties"] == {
        "title": {"type": "string", "description": "The note's heading."},
        "body": {"type": "string"},
    }


def test_definition_of_an_empty_model() -> None:
    assert echo.definition["function"]["parameters"] == {"type": "object", "properties": {}}


def test_definition_is_the_same_object_on_every_access() -> None:
    first = search.definition
    text = json.dumps(first)

    assert search.definition is first
    assert json.dumps(search.definition) == text
    assert registry().definitions()[0] is first


# --- ToolRegistry ------------------------------------------------------------------------------


def test_registry_basics() -> None:
    tools = registry()

    assert tools.names == ["search", "get_time", "echo", "run_code"]
    assert len(tools) == 4
    assert list(tools) == [search, current_time, echo, run_code]
    assert tools.get("echo") is echo
    assert tools.get("missing") is None
    assert tools.definitions() == [t.definition for t in (search, current_time, echo, run_code)]


def test_duplicate_names_are_rejected() -> None:
    with pytest.raises(ValueError, match="'search' is registered twice"):
        ToolRegistry([search, echo, search])


def test_duplicate_added_later_is_rejected() -> None:
    tools = ToolRegistry([echo])

    with pytest.raises(ValueError, match="'echo' is registered twice"):
        tools.add(echo)


def test_select_none_leaves_out_opt_in_tools() -> None:
    assert registry().select(None).names == ["search", "echo"]


def test_select_names_keeps_the_requested_order_and_allows_opt_in() -> None:
    selected = registry().select(["run_code", "echo", "search"])

    assert selected.names == ["run_code", "echo", "search"]
    assert list(selected) == [run_code, echo, search]


def test_select_repeated_names_once() -> None:
    assert registry().select(["echo", "search", "echo"]).names == ["echo", "search"]


def test_select_empty_list_offers_no_tools() -> None:
    assert registry().select([]).names == []


def test_select_unknown_names_lists_them_and_the_available_tools() -> None:
    with pytest.raises(UnknownToolError) as caught:
        registry().select(["search", "fly", "teleport"])

    message = str(caught.value)
    assert "['fly', 'teleport']" in message
    assert "available: search, get_time, echo, run_code" in message


def test_unknown_tool_error_is_a_value_error() -> None:
    assert issubclass(UnknownToolError, ValueError)


def test_select_on_an_empty_registry_says_none_are_available() -> None:
    with pytest.raises(UnknownToolError, match="available: none"):
        ToolRegistry().select(["search"])


def test_select_returns_a_new_registry() -> None:
    tools = registry()

    selected = tools.select(["echo"])
    selected.add(dataclasses.replace(search, name="extra"))

    assert "extra" not in tools.names


def test_without_removes_one_tool_and_keeps_the_rest_in_order() -> None:
    tools = registry()

    assert tools.without("get_time").names == ["search", "echo", "run_code"]
    assert tools.without("missing").names == tools.names
    assert tools.names == ["search", "get_time", "echo", "run_code"], "the original is unchanged"
