"""ChatRequest validation, message content parts, the wire form and Usage arithmetic."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from agentloop.models import (
    AssistantMessage,
    ChatRequest,
    FunctionCall,
    SystemMessage,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
    to_wire,
)


def user(text: str = "hi") -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant_calls(*ids: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": i, "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
            for i in ids
        ],
    }


def tool_result(call_id: str, content: str = '{"ok": true}') -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def request(*messages: dict[str, Any], **fields: Any) -> ChatRequest:
    return ChatRequest.model_validate({"messages": list(messages), **fields})


# --- conversation shape ------------------------------------------------------------------------


def test_empty_messages_are_rejected() -> None:
    with pytest.raises(ValidationError, match="at least 1 item"):
        request()


@pytest.mark.parametrize(
    "last",
    [
        {"role": "assistant", "content": "hello"},
        {"role": "system", "content": "be brief"},
    ],
)
def test_last_message_must_be_the_users(last: dict[str, Any]) -> None:
    with pytest.raises(ValidationError, match="last message must be the user's"):
        request(user(), last)


def test_tool_message_without_a_tool_call_is_rejected() -> None:
    with pytest.raises(ValidationError, match=r"messages\[1\].*unknown or already answered"):
        request(user(), tool_result("call_1"), user())


def test_tool_message_answering_another_id_is_rejected() -> None:
    with pytest.raises(ValidationError, match="'call_other'"):
        request(user(), assistant_calls("call_1"), tool_result("call_other"), user())


def test_a_tool_call_answered_twice_is_rejected() -> None:
    with pytest.raises(ValidationError, match=r"messages\[3\].*already answered"):
        request(
            user(), assistant_calls("call_1"), tool_result("call_1"), tool_result("call_1"), user()
        )


def test_tool_call_without_result_before_the_next_user_message_is_rejected() -> None:
    with pytest.raises(ValidationError, match=r"messages\[3\].*call_2.*no tool result before"):
        request(user(), assistant_calls("call_1", "call_2"), tool_result("call_1"), user())


def test_tool_call_without_result_at_the_end_is_rejected() -> None:
    with pytest.raises(ValidationError, match=r"'call_1'.*no tool result"):
        request(user(), assistant_calls("call_1"))


def test_a_valid_history_with_tool_calls_is_accepted() -> None:
    req = request(
        {"role": "system", "content": "be brief"},
        user("weather in Paris and Rome?"),
        assistant_calls("call_1", "call_2"),
        tool_result("call_2"),
        tool_result("call_1"),
        {"role": "assistant", "content": "Sunny in both."},
        user("thanks, and tomorrow?"),
        model="groq:llama-3.3-70b-versatile",
        tools=["lookup"],
        max_iterations=3,
        token_budget=10_000,
    )

    assert [type(m) for m in req.messages] == [
        SystemMessage,
        UserMessage,
        AssistantMessage,
        ToolMessage,
        ToolMessage,
        AssistantMessage,
        UserMessage,
    ]
    call_message = req.messages[2]
    assert isinstance(call_message, AssistantMessage)
    calls = call_message.tool_calls
    assert calls is not None
    assert [(c.id, c.name, c.arguments) for c in calls] == [
        ("call_1", "lookup", "{}"),
        ("call_2", "lookup", "{}"),
    ]
    assert req.model == "groq:llama-3.3-70b-versatile"


def test_a_single_user_message_is_enough() -> None:
    req = request(user())

    assert req.model is None
    assert req.tools is None
    assert req.max_iterations is None
    assert req.token_budget is None


@pytest.mark.parametrize("field", ["max_iterations", "token_budget"])
def test_limits_must_be_positive(field: str) -> None:
    with pytest.raises(ValidationError, match=field):
        request(user(), **{field: 0})


# --- content parts -----------------------------------------------------------------------------


def test_text_content_parts_are_joined() -> None:
    req = request(
        {
            "role": "user",
            "content": [{"type": "text", "text": "Hello, "}, {"type": "text", "text": "world"}],
        }
    )

    assert req.messages[0].content == "Hello, world"


@pytest.mark.parametrize("role", ["system", "assistant", "tool"])
def test_text_content_parts_are_joined_for_every_role(role: str) -> None:
    parts = [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
    fields: dict[str, Any] = {"tool_call_id": "call_1"} if role == "tool" else {}

    message = {
        "system": SystemMessage,
        "assistant": AssistantMessage,
        "tool": ToolMessage,
    }[role].model_validate({"role": role, "content": parts, **fields})

    assert message.content == "ab"


def test_an_image_part_is_rejected() -> None:
    image = {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}

    with pytest.raises(ValidationError, match="only text content parts are supported"):
        request({"role": "user", "content": [{"type": "text", "text": "what is this?"}, image]})


# --- extra fields ------------------------------------------------------------------------------


def test_extra_request_fields_are_rejected() -> None:
    with pytest.raises(ValidationError, match="temperature"):
        request(user(), temperature=0.2)


def test_extra_message_fields_are_rejected() -> None:
    with pytest.raises(ValidationError, match="name"):
        request({"role": "user", "content": "hi", "name": "bob"})


def test_unknown_role_is_rejected() -> None:
    with pytest.raises(ValidationError, match="developer"):
        request({"role": "developer", "content": "hi"})


# --- wire form ---------------------------------------------------------------------------------


def test_to_wire_drops_none_and_shapes_tool_calls_like_openai() -> None:
    messages = [
        SystemMessage(content="be brief"),
        UserMessage(content="weather?"),
        AssistantMessage(
            tool_calls=[
                ToolCall(
                    id="call_1",
                    function=FunctionCall(name="get_weather", arguments='{"city": "Paris"}'),
                )
            ]
        ),
        ToolMessage(tool_call_id="call_1", content='{"ok": true, "result": 21}'),
        AssistantMessage(content="21 degrees."),
    ]

    assert to_wire(messages) == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": '{"ok": true, "result": 21}'},
        {"role": "assistant", "content": "21 degrees."},
    ]


def test_wire_form_validates_back_into_a_request() -> None:
    req = request(user(), assistant_calls("call_1"), tool_result("call_1"), user("and then?"))

    again = ChatRequest.model_validate({"messages": to_wire(req.messages)})

    assert again.messages == req.messages


# --- Usage -------------------------------------------------------------------------------------


def test_usage_total_is_prompt_plus_completion() -> None:
    usage = Usage(prompt_tokens=100, completion_tokens=20, cached_tokens=64)

    assert usage.total_tokens == 120


def test_usage_addition_adds_every_field() -> None:
    total = Usage(prompt_tokens=100, completion_tokens=20, cached_tokens=64) + Usage(
        prompt_tokens=5, completion_tokens=7, cached_tokens=1
    )

    assert total == Usage(prompt_tokens=105, completion_tokens=27, cached_tokens=65)
    assert total.total_tokens == 132


def test_usage_defaults_to_zero() -> None:
    assert Usage().total_tokens == 0
    assert Usage() + Usage() == Usage()
